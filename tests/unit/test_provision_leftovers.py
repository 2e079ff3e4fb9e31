"""What a failed attempt leaves on a node (media, boot override, power) when
its BMC hangs: recorded, never offered, cleaned once the BMC answers again
(issue 49, finding 3). FakeFleet/FakeDriver and a fake clock."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from bmaas.candidates import candidates
from bmaas.cli.nodes import _row
from bmaas.deadline import Deadline
from bmaas.deploy import Step
from bmaas.driver import BootDevice, Capability, PowerState
from bmaas.fakes.faults import FaultRule
from bmaas.faults import NodeUnavailable
from bmaas.provision import Provisioner, Request
from bmaas.provision.leftovers import Started, undo_leftovers, what_was_left
from bmaas.provision.reclaim import reclaim
from bmaas.provision.records import Job
from bmaas.store import OwnerKind, Store
from tests.unit.test_provision import Rack

ISO = "http://images.example/deploy.iso"
#: the BMC takes the media and the boot override, then hangs on power
HANG_ON_POWER = [{"effect": "hang", "operation": "power.set"}]


def _failed_on_n01(store: Store) -> Rack:
    rack = Rack(store, count=2, rules={"n01": HANG_ON_POWER})
    done = rack.provisioner.provision(Request("r1", image_url=ISO))
    assert [(a.node, a.fault_class) for a in done.attempts] == [
        ("n01", "BMCTimeout"),
        ("n02", None),
    ]
    assert done.node == "n02"  # the second candidate got the request
    return rack


def _reclaim(rack: Rack) -> Any:
    """Reclaim as the provisioner's host does: on its runtime's pool."""
    rt = rack.provisioner.embedded.rt  # type: ignore[union-attr]
    return reclaim(rack.store, rt, driver_factory=rack.factory, deadline=Deadline.after(60))


def test_cleaning_runs_on_the_runtimes_pooled_drivers_not_one_built_a_node(store: Store) -> None:
    """Issue 45: reclaim's cleaning takes the node's driver from the host's
    runtime pool, as every other operation does -- kept there after (its
    session reused), not a driver built for the cleaning and closed."""
    rack = _failed_on_n01(store)
    rack.fleet.machine("n01").plan.clear()  # the BMC answers again
    rt = rack.provisioner.embedded.rt  # type: ignore[union-attr]
    built = len(rack.drivers["n01"])
    reads = rt.pool.stats.reads
    _reclaimed, cleaned = _reclaim(rack)
    assert cleaned.cleaned == ("n01",)
    assert len(rack.drivers["n01"]) <= built + 1  # the pooled one, or one new session
    assert rack.drivers["n01"][-1].session_alive()  # kept in the pool, not closed
    assert rt.pool.stats.reads > reads  # the cleaning ran on the pool


def test_a_hung_bmc_leaves_the_node_needing_cleaning_and_not_offered(store: Store) -> None:
    rack = _failed_on_n01(store)
    machine = rack.fleet.machine("n01")
    assert machine.media == ISO  # what the finding saw: the deploy ISO still in
    node = store.nodes.get("n01")
    assert node.owner_id is None  # given back...
    assert node.leftovers == {"media": ISO, "boot override": "cdrom", "power": "on"}
    assert not node.claimable  # ...but not offered
    assert node.needs_cleaning == f"media {ISO}, boot override cdrom, power on"
    assert candidates(store) == []  # n02 holds the request, n01 needs cleaning
    assert rack.provisioner.embedded.shortage(  # type: ignore[union-attr]
        Job(Request("r2")), deadline=Deadline.after(5)
    ).endswith("(2 enrolled, 2 match: 1 allocated, 1 needing cleaning)")
    assert store.nodes.events("n01")[-1].kind != "cleaned"
    assert any(e.kind == "needs_cleaning" for e in store.nodes.events("n01", limit=50))
    # the claim's conditional write refuses it too, saying why
    attempt = store.owners.create(OwnerKind.ATTEMPT, name="x", ttl=30)
    with pytest.raises(NodeUnavailable, match="needs cleaning"):
        store.owners.claim("n01", attempt.id)


def test_while_the_bmc_still_hangs_the_sync_keeps_the_node_out(store: Store) -> None:
    rack = _failed_on_n01(store)
    rack.fleet.machine("n01").plan.clear()
    rack.fleet.machine("n01").plan.add(FaultRule.from_dict({"effect": "hang"}))
    _reclaim(rack)
    node = store.nodes.get("n01")
    assert node.leftovers is not None
    assert not node.claimable
    assert rack.fleet.machine("n01").media == ISO


def test_when_the_bmc_answers_one_cleaning_and_the_node_is_offered_again(store: Store) -> None:
    rack = _failed_on_n01(store)
    machine = rack.fleet.machine("n01")
    machine.plan.clear()  # the BMC answers again
    _reclaimed, cleaned = _reclaim(rack)
    assert cleaned.cleaned == ("n01",)
    assert machine.media is None
    assert machine.power_state() in (PowerState.OFF, PowerState.POWERING_OFF)
    assert machine.boot_device().device is BootDevice.DISK
    node = store.nodes.get("n01")
    assert node.leftovers is None
    assert node.claimable
    assert candidates(store) == ["n01"]
    assert store.nodes.events("n01")[-1].kind == "cleaned"
    calls = len(rack.calls("n01"))
    _reclaim(rack)  # nothing left: the BMC is not asked again
    assert len(rack.calls("n01")) == calls


def test_the_next_command_cleans_before_it_picks(store: Store) -> None:
    rack = _failed_on_n01(store)
    rack.fleet.machine("n01").plan.clear()
    fresh = Provisioner(store, driver_factory=rack.factory, limits=rack.policy, keep_leases=False)
    assert fresh.embedded is not None
    assert "n01" in fresh.embedded.cleaned.cleaned
    assert fresh.provision(Request("r2", image_url=ISO)).node == "n01"


def test_a_failure_the_bmc_answers_is_undone_at_once_and_nothing_recorded(store: Store) -> None:
    rack = Rack(
        store, count=2, rules={"n01": [{"effect": "power_stuck", "operation": "power.set"}]}
    )
    done = rack.provisioner.provision(Request("r1", image_url=ISO))
    assert done.node == "n02"
    assert rack.fleet.machine("n01").media is None
    assert store.nodes.get("n01").leftovers is None


def test_what_was_left_follows_the_steps_started() -> None:
    vmedia = Started(ISO, BootDevice.CDROM)
    assert what_was_left(None) == {}
    assert what_was_left(dataclasses.replace(vmedia, steps=[Step.CHECK])) == {}
    assert what_was_left(dataclasses.replace(vmedia, steps=[Step.CHECK, Step.BOOT_DEVICE])) == {
        "media": ISO,
        "boot override": "cdrom",
    }
    pxe = Started(None, BootDevice.PXE, [Step.CHECK, Step.BOOT_DEVICE, Step.POWER])
    assert what_was_left(pxe) == {"boot override": "pxe", "power": "on"}


def test_an_ipmi_deploy_leaves_no_media_only_its_boot_device(store: Store) -> None:
    rack = Rack(store, count=1)
    driver = rack.factory(store.nodes.get("n01"))
    driver.capabilities = driver.capabilities - {Capability.VIRTUAL_MEDIA}
    assert Started.of(driver, ISO) == Started(None, BootDevice.PXE)
    assert Started.of(rack.factory(store.nodes.get("n01")), ISO) == Started(ISO, BootDevice.CDROM)


def test_undo_stops_at_the_first_call_the_bmc_does_not_answer(store: Store) -> None:
    rack = Rack(store, count=1, rules={"n01": [{"effect": "hang"}]})
    driver = rack.factory(store.nodes.get("n01"))
    left = {"media": ISO, "boot override": "cdrom", "power": "on"}
    assert undo_leftovers(driver, left, deadline=Deadline.after(60)) == left
    assert len(driver.wire_calls) == 1


def test_node_list_says_why_it_is_not_offered(store: Store) -> None:
    _failed_on_n01(store)
    row = _row(store.nodes.get("n01"))
    assert "needs cleaning" in row


def test_what_a_bmc_cannot_do_is_not_left_forever(store: Store) -> None:
    """An IPMI node has no virtual media: the media a request named was
    never inserted there, and its cleaning must not wait on an eject."""
    no_vmedia = [{"effect": "unsupported", "operation": "vmedia.*"}]
    rack = Rack(store, count=1, rules={"n01": no_vmedia}, power=PowerState.ON)
    driver = rack.factory(store.nodes.get("n01"))
    left = {"media": ISO, "boot override": "cdrom", "power": "on"}
    assert undo_leftovers(driver, left, deadline=Deadline.after(60)) == {}
    assert any("vmedia" in call for call in driver.wire_calls), driver.wire_calls
    assert rack.fleet.machine("n01").boot_device().device is BootDevice.DISK


def test_a_media_url_with_credentials_is_never_shown(store: Store) -> None:
    Rack(store, count=1)
    url = "http://deployer:s3cret@images.example/deploy.iso"
    store.health.set_leftovers("n01", {"media": url, "power": "on"}, reason=f"failed: {url}")
    node = store.nodes.get("n01")
    assert node.leftovers == {"media": url, "power": "on"}  # kept whole: the eject names it
    shown = [node.needs_cleaning or "", str(node.to_dict()), node.last_error or ""]
    shown += [e.message for e in store.nodes.events("n01", limit=5)]
    assert not [text for text in shown if "s3cret" in text]
    assert "needs cleaning" in " ".join(map(str, _row(node)))
