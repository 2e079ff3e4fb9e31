"""The sync and a firmware update (issue 51): a node marked as updating
(``NodesRepo.mark_update``) is neither fenced nor has its power overwritten
while its BMC reboots under the update; the mark's bound ends it, and so
does clearing it."""

from __future__ import annotations

from collections.abc import Callable

from bmaas.driver import PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.fleet import FakeFleet
from bmaas.health import Change, HealthRule
from bmaas.ops import driver_factory
from bmaas.store import Store
from bmaas.sync import SyncParts, SyncReport, SyncSettings, sync_pass
from tests.budgets import unbounded


def _pass(store: Store, fleet: FakeFleet) -> SyncReport:
    return sync_pass(
        store,
        SyncSettings(health_rule=HealthRule(1, 1)),
        SyncParts(driver_factory(fleet=fleet)),
        deadline=unbounded(fleet.clock),
    )


def test_a_node_mid_update_is_not_fenced_nor_its_power_overwritten(
    store: Store, enroll: Callable[..., list[str]]
) -> None:
    enroll(1)
    fleet = FakeFleet(clock=FakeClock())
    fleet.add("n01", power=PowerState.ON)
    assert not _pass(store, fleet).nodes_with(Change.FAULTED)
    assert store.nodes.get("n01").power_state == PowerState.ON
    store.nodes.mark_update("n01", until=store.clock() + 600, by="op")
    fleet.machine("n01").reboot_bmc(3600)  # the BMC reboots into its new firmware
    for _ in range(3):
        assert not _pass(store, fleet).nodes_with(Change.FAULTED)
    record = store.nodes.get("n01")
    assert (record.maintenance, record.fault, record.fault_count) == (False, None, 0)
    assert record.power_state == PowerState.ON  # not overwritten by unknown
    assert "firmware update in progress: " in (record.last_error or "")
    store.nodes.mark_update("n01", until=None, by="op")  # the update ended: counted again
    assert _pass(store, fleet).nodes_with(Change.FAULTED) == ["n01"]
    kinds = [e.kind for e in store.nodes.events("n01")]
    assert kinds.count("firmware_update") == 2


def test_a_mark_past_its_bound_no_longer_shields_the_node(
    store: Store, enroll: Callable[..., list[str]], wall: FakeClock
) -> None:
    """A command that died mid-update leaves its mark: it ends at its bound."""
    enroll(1)
    fleet = FakeFleet(clock=FakeClock())
    fleet.add("n01", power=PowerState.ON)
    store.nodes.mark_update("n01", until=store.clock() + 60, by="op")
    fleet.machine("n01").reboot_bmc(3600)
    assert not _pass(store, fleet).nodes_with(Change.FAULTED)
    wall.advance(61)
    assert _pass(store, fleet).nodes_with(Change.FAULTED) == ["n01"]
