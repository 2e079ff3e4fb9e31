"""The goodput benchmark's "blind reschedule" baseline, on FakeDriver and a
fake clock: it must behave as documented (any exception moves on, no retry
on the spot, a new port per attempt, nothing recorded against the node,
nothing left held), or the benchmark compares bmaas with a straw man."""

from __future__ import annotations

from bmaas.driver import PowerState
from bmaas.hwlab.harness.bench.blind import BlindReschedule
from bmaas.hwlab.harness.bench.common import CallCounter
from bmaas.hwlab.harness.demo import leaks
from bmaas.provision import Request
from bmaas.store import OwnerKind, Store
from bmaas.store.records import PortOrigin
from tests.unit.test_provision import SETTINGS, Rack

REQUEST = Request("web-1", resource_class="baremetal", network="prov")


def blind(rack: Rack, counter: CallCounter | None = None) -> BlindReschedule:
    store = rack.store
    if counter is not None:
        counter.wrap(store.ports, ["create"], prefix="ports.")
        counter.wrap(store.lifecycle, ["delete_owner"], prefix="lifecycle.")
    return BlindReschedule(
        store, driver_factory=rack.factory, settings=SETTINGS, limits=rack.policy
    )


def test_a_healthy_node_is_deployed_with_one_port(store: Store) -> None:
    rack = Rack(store)
    done = blind(rack).provision(REQUEST)
    assert (done.ok, done.node, done.faults) == (True, "n01", ())
    instance = store.nodes.get("n01")
    assert instance.owner_kind is OwnerKind.INSTANCE
    (port,) = store.ports.find(node="n01")
    assert port.created_by is PortOrigin.BMAAS
    assert rack.fleet.machine("n01").power_state() is PowerState.ON
    assert leaks(store) == (0, 0)


def test_a_busy_answer_is_not_retried_on_the_spot_but_rescheduled(store: Store) -> None:
    """bmaas retries a busy BMC where it is; the baseline moves on at once."""
    rack = Rack(store, rules={"n01": [{"effect": "busy", "nth": 1}]})
    counter = CallCounter()
    done = blind(rack, counter).provision(REQUEST)
    assert (done.ok, done.node, done.faults) == (True, "n02", ("BMCBusy",))
    # the busy probe, then the blind tear-down power-off: no second probe on n01
    assert rack.calls("n01") == ["probe", "power.set"]
    assert counter.counts() == {"ports.create": 2, "lifecycle.delete_owner": 1}
    assert store.nodes.get("n01").allocated is False
    assert len(store.ports.find()) == 1  # the first attempt's port was deleted, not reused


def test_failures_are_not_recorded_so_the_broken_node_is_picked_again(store: Store) -> None:
    rack = Rack(store, rules={"n01": [{"effect": "hang"}]})
    strategy = blind(rack)
    first = strategy.provision(REQUEST)
    second = strategy.provision(Request("web-2", resource_class="baremetal", network="prov"))
    assert (first.node, first.faults) == ("n02", ("BMCTimeout",))
    assert (second.node, second.faults) == ("n03", ("BMCTimeout",))
    node = store.nodes.get("n01")
    assert (node.fault, node.fault_count, node.maintenance) == (None, 0, False)


def test_any_exception_is_rescheduled_until_the_hosts_run_out(store: Store) -> None:
    rules = {
        "n01": [{"effect": "auth_fail"}],
        "n02": [{"effect": "power_stuck", "operation": "power.set"}],
        "n03": [{"effect": "hang"}],
    }
    rack = Rack(store, count=4, rules=rules)
    done = blind(rack).provision(REQUEST)
    assert done.ok is False
    assert done.faults == ("BMCAuthError", "PowerFailure", "BMCTimeout")
    assert "n04" not in rack.drivers  # three hosts, no more
    assert store.owners.allocations() == []
    assert store.ports.find() == []
    assert store.owners.find() == []


def test_running_out_of_candidates_ends_the_request(store: Store) -> None:
    rack = Rack(store, count=1, rules={"n01": [{"effect": "hang"}]})
    done = blind(rack).provision(REQUEST)
    assert done.ok is False
    assert done.faults == ("BMCTimeout", "NoCandidates")
    assert leaks(store) == (0, 0)
    assert store.owners.find() == []
