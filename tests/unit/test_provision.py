"""Request-level retry (the client-side reschedule) on FakeDriver: which node
each attempt took, what each owner holds afterwards, ports reused and cleaned,
and the sleep sequences, with no real sleeps."""

from __future__ import annotations

import random
from typing import Any

import pytest

from bmaas.deploy import DeploySettings, WillNotBeReady
from bmaas.driver import PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.fleet import FakeFleet
from bmaas.fakes.machine import Hardware
from bmaas.faults import (
    BmaasError,
    BMCAuthError,
    BMCBusy,
    BootFailure,
    InputError,
    NoCandidates,
    PowerFailure,
    ProvisionFailed,
)
from bmaas.provision import DEPLOY_FAILURE, Provisioner, Request, should_reschedule
from bmaas.retry import RetryLimits
from bmaas.store import OwnerKind, ProvisionState, Store
from bmaas.store.records import PortOrigin
from tests.unit.conftest import network_spec, node_spec

HW = Hardware(power_on_time=2, power_off_time=1, soft_off_time=3, os_boot_time=4)
SETTINGS = DeploySettings(
    power_timeout=10,
    settle=5,
    boot_timeout=30,
    poll_interval=1,
    deadline_s=120,
    ready_interval=2,
    ready_timeout=10,
)


class Rack:
    """Fake machines enrolled in a store, and a provisioner over them."""

    def __init__(
        self,
        store: Store,
        count: int = 3,
        *,
        rules: dict[str, list[dict[str, Any]]] | None = None,
        power: PowerState = PowerState.OFF,
        **kw: Any,
    ) -> None:
        self.store = store
        self.fleet = FakeFleet(clock=FakeClock(start=0.0), seed=5)
        self.names = [f"n{i:02d}" for i in range(1, count + 1)]
        rules = rules or {}
        for name in self.names:
            self.fleet.add(name, hardware=HW, rules=rules.get(name, ()), power=power)
        store.nodes.enroll(
            [
                node_spec(
                    n,
                    segment="rack1",
                    resource_class="baremetal",
                    properties={"cpus": 8, "memory_mb": 32768},
                )
                for n in self.names
            ],
            [network_spec("prov", {"rack1": ("10.1.0.0/24", "10.1.0.10", "10.1.0.20")})],
        )
        self.drivers: dict[str, Any] = {}
        self.policy = RetryLimits(
            sleep=self.fleet.clock.sleep,
            clock=self.fleet.clock.monotonic,
            jitter=0.0,
            rng=random.Random(0),
            total=30,
        )
        options: dict[str, Any] = {"settings": SETTINGS, "keep_leases": False, **kw}
        self.provisioner = Provisioner(
            store, driver_factory=self.factory, limits=self.policy, **options
        )

    def factory(self, record: Any) -> Any:
        driver = FakeDriver(record.name, fleet=self.fleet, bmc_timeout=5.0)
        self.drivers.setdefault(record.name, []).append(driver)
        return driver

    def calls(self, node: str) -> list[str]:
        return [c for d in self.drivers.get(node, []) for c in d.wire_calls]

    def holder(self, node: str) -> OwnerKind | None:
        return self.store.nodes.get(node).owner_kind


def test_a_healthy_request_becomes_an_instance(store: Store) -> None:
    rack = Rack(store)
    done = rack.provisioner.provision(Request("web-1", resource_class="baremetal", network="prov"))
    assert done.node == "n01"
    # a first-try success is one attempt: the node that worked (as the CLI counts)
    (worked,) = done.attempts
    assert (worked.node, worked.outcome, worked.fault_code) == ("n01", "succeeded", None)
    assert worked.elapsed > 0
    assert done.to_dict()["attempts"][0]["outcome"] == "succeeded"
    node = store.nodes.get("n01")
    assert node.owner_kind is OwnerKind.INSTANCE
    assert node.owner_name == "web-1"
    assert node.provision_state is ProvisionState.ACTIVE
    machine = rack.fleet.machine("n01")
    assert machine.power_state() is PowerState.ON
    assert machine.last_boot_device is not None
    assert machine.last_boot_device.value == "pxe"
    assert machine.boot_device().device.value == "disk"  # finalize: disk from now on
    (port,) = store.ports.find(owner_id=done.instance_id)
    assert port.node == "n01"
    assert port.ip_address is not None
    assert store.owners.find(kind=OwnerKind.REQUEST) == []
    assert store.owners.find(kind=OwnerKind.ATTEMPT) == []


def test_busy_bmc_is_retried_on_the_same_node_not_rescheduled(store: Store) -> None:
    rack = Rack(store, rules={"n01": [{"effect": "busy", "operation": "power.set", "nth": [1, 2]}]})
    done = rack.provisioner.provision(Request("r1"))
    assert done.node == "n01"
    assert [a.outcome for a in done.attempts] == ["succeeded"]  # same node: one attempt
    assert rack.calls("n01").count("power.set") == 3
    assert rack.fleet.clock.sleeps[:2] == [0.5, 1.0]


def test_auth_error_is_never_retried_here_but_the_request_moves_on(store: Store) -> None:
    rack = Rack(store, rules={"n01": [{"effect": "auth_fail"}]})
    done = rack.provisioner.provision(Request("r1", network="prov"))
    assert done.node == "n02"
    assert [(a.node, a.fault_class) for a in done.attempts] == [
        ("n01", "BMCAuthError"),
        ("n02", None),
    ]
    assert rack.calls("n01") == ["probe"]  # one login attempt, no lockout-inducing retries
    assert store.nodes.get("n01").owner_id is None
    assert "login rejected" in (store.nodes.get("n01").last_error or "")


def test_ports_are_created_once_and_reused_by_the_next_attempt(store: Store) -> None:
    rack = Rack(store, rules={"n01": [{"effect": "power_stuck", "operation": "power.set"}]})
    done = rack.provisioner.provision(Request("r1", network="prov"))
    assert done.node == "n02"
    (port,) = store.ports.find(owner_id=done.instance_id)
    assert done.ports == (port.id,)
    assert port.node == "n02"
    assert port.created_by is PortOrigin.BMAAS
    assert [p.id for p in store.ports.find()] == [port.id]  # no second port was ever made


def test_failed_request_deletes_only_the_ports_it_created(store: Store) -> None:
    rack = Rack(
        store,
        count=2,
        rules={n: [{"effect": "power_stuck", "operation": "power.set"}] for n in ("n01", "n02")},
    )
    user_port = store.ports.create("prov", created_by=PortOrigin.USER, name="mine")
    with pytest.raises(ProvisionFailed) as info:
        rack.provisioner.provision(Request("r1", network="prov", ports=(user_port.id,)))
    failed = info.value
    assert [(a.node, a.fault_class) for a in failed.attempts] == [
        ("n01", "PowerFailure"),
        ("n02", "PowerFailure"),
    ]
    assert all(a.elapsed > 0 for a in failed.attempts)
    assert isinstance(failed.__cause__, PowerFailure)
    assert "request r1 failed after 2 attempt(s)" in str(failed)
    remaining = store.ports.find()
    assert [p.id for p in remaining] == [user_port.id]
    assert remaining[0].owner_id is None
    assert remaining[0].node is None
    assert store.owners.allocations() == []
    assert store.owners.find() == []
    assert [n.provision_state for n in store.nodes.find()] == [ProvisionState.AVAILABLE] * 2


def test_max_attempts_bounds_the_reschedules(store: Store) -> None:
    rules = {
        n: [{"effect": "boot_crash", "up_for": 1, "operation": "power.set"}]
        for n in ("n01", "n02", "n03")
    }
    rack = Rack(store, count=3, rules=rules, max_attempts=2)
    with pytest.raises(ProvisionFailed) as info:
        rack.provisioner.provision(Request("r1"))
    assert [a.fault_class for a in info.value.attempts] == ["BootFailure", "BootFailure"]
    assert "n03" not in rack.drivers


def test_alternates_skip_maintenance_faulted_and_other_classes(store: Store) -> None:
    rack = Rack(store, count=3, rules={"n03": [{"effect": "hang"}]})
    store.nodes.set_maintenance("n01", reason="psu", by="alice")
    store.health.set_fault("n02", "power failure", reason="sync")
    store.nodes.enroll([node_spec("gpu1", resource_class="gpu")], [])
    with pytest.raises(ProvisionFailed) as info:
        rack.provisioner.provision(Request("r1", resource_class="baremetal"))
    assert [a.node for a in info.value.attempts] == ["n03"]
    assert "n01" not in rack.drivers
    assert "n02" not in rack.drivers


def test_no_matching_node_is_no_candidates(store: Store) -> None:
    rack = Rack(store)
    with pytest.raises(ProvisionFailed) as info:
        rack.provisioner.provision(Request("big", properties={"cpus": 64}))
    assert info.value.attempts == []
    assert isinstance(info.value.__cause__, NoCandidates)
    assert store.owners.find() == []
    # the message itself names the cause, with counts (not "nothing was tried")
    assert info.value.message == (
        "no node of any class is available (3 enrolled, 0 with properties {'cpus': 64})"
    )
    assert str(info.value) == f"request big failed after 0 attempt(s): {info.value.message}"


@pytest.mark.parametrize(
    ("request_", "busy", "expected"),
    [
        (
            Request("g", resource_class="gpu"),
            (),
            "no node of resource class 'gpu' is available (3 enrolled, 0 of that class)",
        ),
        (
            Request("b", resource_class="baremetal", traits=("CUSTOM_X",)),
            (),
            "no node of resource class 'baremetal' is available "
            "(3 enrolled, 3 of that class, 0 with traits ['CUSTOM_X'])",
        ),
        (
            Request("b", resource_class="baremetal"),
            ("maintenance", "fault", "taken"),
            "no node of resource class 'baremetal' is free "
            "(3 enrolled, 3 of that class, 3 match: 1 allocated, 1 faulted, 1 in maintenance)",
        ),
    ],
)
def test_no_candidates_says_why_with_counts(
    store: Store, request_: Request, busy: tuple[str, ...], expected: str
) -> None:
    rack = Rack(store)
    if busy:
        store.nodes.set_maintenance("n01", reason="psu", by="alice")
        store.health.set_fault("n02", "power failure", reason="sync")
        rack.provisioner.provision(Request("holder", resource_class="baremetal"))
    with pytest.raises(ProvisionFailed) as info:
        rack.provisioner.provision(request_)
    assert info.value.message == expected
    assert info.value.attempts == []
    assert info.value.cause_text == f"NoCandidates: request {request_.name}: {expected}"


def test_no_candidates_on_an_empty_store_says_to_enroll(store: Store) -> None:
    rack = Rack(store, count=0)
    with pytest.raises(ProvisionFailed, match=r"no node is enrolled \(run `bmaas enroll FILE`\)"):
        rack.provisioner.provision(Request("r1"))


def test_properties_are_minimums(store: Store) -> None:
    rack = Rack(store)
    assert rack.provisioner.provision(Request("r", properties={"cpus": 4})).node == "n01"


def test_bad_input_stops_before_any_node_and_leaves_nothing(store: Store) -> None:
    rack = Rack(store)
    with pytest.raises(InputError, match="no such network"):
        rack.provisioner.provision(Request("r1", network="nope"))
    assert store.owners.find() == []
    assert rack.drivers == {}


def test_repeated_deploy_faults_put_a_node_into_maintenance(store: Store) -> None:
    rack = Rack(
        store,
        count=2,
        rules={"n01": [{"effect": "power_stuck", "operation": "power.set"}]},
        max_attempts=1,
    )
    for name in ("r1", "r2"):
        with pytest.raises(ProvisionFailed):
            rack.provisioner.provision(Request(name), candidates=["n01"])
    node = store.nodes.get("n01")
    assert node.fault == DEPLOY_FAILURE
    assert node.maintenance
    assert node.maintenance_by_system
    done = rack.provisioner.provision(Request("r3"))
    assert done.node == "n02"


def test_a_node_that_falls_back_off_is_a_boot_failure(store: Store) -> None:
    rack = Rack(
        store, rules={"n01": [{"effect": "boot_crash", "up_for": 2, "operation": "power.set"}]}
    )
    done = rack.provisioner.provision(Request("r1"))
    assert done.node == "n02"
    attempt, worked = done.attempts
    assert worked.succeeded
    assert attempt.fault_class == "BootFailure"
    assert "fell back to off" in attempt.message


def test_settle_waits_for_boot_progress(store: Store) -> None:
    hw = Hardware(power_on_time=2, power_off_time=1, soft_off_time=3, os_boot_time=9)
    rack = Rack(store, count=1)
    rack.fleet.add("n01", hardware=hw)
    rack.provisioner.provision(Request("r1"))
    assert rack.fleet.machine("n01").boot_progress() == "OSRunning"


def test_virtual_media_when_an_image_is_given(store: Store) -> None:
    rack = Rack(store, count=1)
    done = rack.provisioner.provision(Request("r1", image_url="http://images/os.iso"))
    assert done.boot_method == "vmedia"
    machine = rack.fleet.machine("n01")
    assert machine.last_boot_device is not None
    assert machine.last_boot_device.value == "cdrom"
    assert machine.media is None  # ejected once deployed
    assert "vmedia.insert" in rack.calls("n01")


def test_a_node_already_on_is_rebooted_once(store: Store) -> None:
    rack = Rack(
        store,
        count=1,
        power=PowerState.ON,
        rules={"n01": [{"effect": "delay", "seconds": 30, "operation": "power.set", "nth": 2}]},
    )
    boots = rack.fleet.machine("n01").boots
    rack.provisioner.provision(Request("r1"))
    # the REBOOT's answer was lost, the power state was read, no second reboot
    assert rack.fleet.machine("n01").boots == boots + 1


def test_ready_hook_errors_are_wrapped(store: Store) -> None:
    def broken(node: str, driver: Any) -> bool:
        raise RuntimeError(f"ssh to {node} refused")

    rack = Rack(store, count=1, ready=broken)
    with pytest.raises(ProvisionFailed) as info:
        rack.provisioner.provision(Request("r1"))
    cause = info.value.__cause__
    assert isinstance(cause, BootFailure)
    assert "ready check failed: RuntimeError: ssh to n01 refused" in str(cause)
    assert isinstance(cause.__cause__, RuntimeError)


def test_a_hook_that_says_never_ends_the_wait_at_its_first_word(store: Store) -> None:
    """``WillNotBeReady`` (``--fail-pattern``'s match) is the BootFailure at
    once: asked twice, not until ``ready_timeout``; the message is the hook's."""
    asked: list[str] = []
    said = "its serial log shows 'Kernel panic - not syncing'"

    def panicked(node: str, driver: Any) -> bool:
        asked.append(node)
        if len(asked) == 2:
            raise WillNotBeReady(said)
        return False

    rack = Rack(store, count=1, ready=panicked)
    with pytest.raises(ProvisionFailed) as info:
        rack.provisioner.provision(Request("r1"))
    cause = info.value.__cause__
    assert isinstance(cause, BootFailure)
    assert cause.message == f"will not be ready: {said}"
    assert cause.operation == "deploy.ready"
    assert asked == ["n01", "n01"]


def test_ready_hook_is_asked_until_yes(store: Store) -> None:
    answers = iter([False, False, True])
    rack = Rack(store, count=1, ready=lambda node, driver: next(answers))
    assert rack.provisioner.provision(Request("r1")).node == "n01"


def test_request_deadline_is_never_overrun_per_attempt(store: Store) -> None:
    rules = {
        n: [{"effect": "slow_power", "seconds": 50, "operation": "power.set"}]
        for n in ("n01", "n02", "n03")
    }
    rack = Rack(store, count=3, rules=rules, deadline_s=25.0)
    start = rack.fleet.clock.monotonic()
    with pytest.raises(ProvisionFailed) as info:
        rack.provisioner.provision(Request("r1"))
    assert rack.fleet.clock.monotonic() - start <= 25.0 + 1e-6
    assert all(a.fault_class in ("PowerFailure", "BootFailure") for a in info.value.attempts)


def test_parallel_requests_never_share_a_node(store: Store) -> None:
    rack = Rack(store, count=4)
    results = rack.provisioner.provision_many([Request(f"r{i}") for i in range(5)], workers=5)
    nodes = [r.node for r in results if not isinstance(r, ProvisionFailed)]
    assert sorted(nodes) == ["n01", "n02", "n03", "n04"]
    failed = [r for r in results if isinstance(r, ProvisionFailed)]
    assert len(failed) == 1
    assert isinstance(failed[0].__cause__, NoCandidates)


def test_undeploy_powers_off_and_frees_node_and_ports(store: Store) -> None:
    rack = Rack(store, count=1)
    user_port = store.ports.create("prov", created_by=PortOrigin.USER)
    done = rack.provisioner.provision(Request("r1", network="prov", ports=(user_port.id,)))
    assert rack.provisioner.undeploy("r1") == ["n01"]
    assert rack.fleet.machine("n01").power_state() in (PowerState.OFF, PowerState.POWERING_OFF)
    assert store.nodes.get("n01").owner_id is None
    assert [p.id for p in store.ports.find()] == [user_port.id]
    assert done.instance_id not in {o.id for o in store.owners.find()}


def test_undeploy_that_cannot_power_off_fences_the_node(store: Store) -> None:
    rack = Rack(store, count=1)
    rack.provisioner.provision(Request("r1"))
    rule = {"effect": "malformed_reply", "operation": "power.set"}  # the BMC's own fault
    rack.fleet.machine("n01").plan.add(FaultRule.from_dict(rule))
    rack.provisioner.undeploy("r1")
    node = store.nodes.get("n01")
    assert node.owner_id is None
    assert node.fault == "undeploy failure"
    assert not node.claimable


@pytest.mark.parametrize(
    ("rule", "cls"),
    [
        ({"effect": "auth_fail"}, BMCAuthError),  # fix the password, then undeploy again
        ({"effect": "busy", "operation": "power.set"}, BMCBusy),  # the BMC said "later"
    ],
)
def test_undeploy_that_fails_not_by_the_nodes_fault_keeps_the_instance(
    store: Store, rule: dict[str, object], cls: type[BmaasError]
) -> None:
    """The policy row does not fence for it (issue 36): the node is not put
    into maintenance, and the instance keeps it -- it may still run."""
    rack = Rack(store, count=1)
    rack.provisioner.provision(Request("r1"))
    rack.fleet.machine("n01").plan.add(FaultRule.from_dict(rule))
    with pytest.raises(cls):
        rack.provisioner.undeploy("r1")
    node = store.nodes.get("n01")
    assert node.fault is None
    assert not node.maintenance
    assert node.owner_id is not None  # still the instance's
    rack.fleet.machine("n01").plan.clear()
    rack.provisioner.undeploy("r1")  # again, once the BMC is reachable: released
    assert store.nodes.get("n01").owner_id is None


def test_move_success_frees_the_source(store: Store) -> None:
    rack = Rack(store, count=2)
    done = rack.provisioner.provision(Request("r1", network="prov"))
    moved = rack.provisioner.move("r1")
    assert (moved.source, moved.target) == ("n01", "n02")
    assert store.nodes.get("n01").owner_id is None
    assert store.nodes.get("n02").owner_id == done.instance_id
    assert store.nodes.get("n02").provision_state is ProvisionState.ACTIVE
    (port,) = store.ports.find(owner_id=done.instance_id)
    assert port.node == "n02"
    assert rack.fleet.machine("n01").power_state() in (PowerState.OFF, PowerState.POWERING_OFF)
    assert store.owners.find(kind=OwnerKind.MOVE) == []


def test_move_failure_gives_the_source_back(store: Store) -> None:
    rack = Rack(
        store,
        count=2,
        max_attempts=1,
        rules={"n02": [{"effect": "power_stuck", "operation": "power.set"}]},
    )
    done = rack.provisioner.provision(Request("r1", network="prov"), candidates=["n01"])
    with pytest.raises(ProvisionFailed) as info:
        rack.provisioner.move("r1", to="n02")
    assert [a.node for a in info.value.attempts] == ["n02"]
    assert store.nodes.get("n01").owner_id == done.instance_id
    assert store.nodes.get("n02").owner_id is None
    (port,) = store.ports.find(owner_id=done.instance_id)
    assert port.node == "n01"
    assert store.owners.find(kind=OwnerKind.MOVE) == []


def test_reschedule_decision_by_fault_type() -> None:
    assert should_reschedule(BMCAuthError("x"))
    assert should_reschedule(PowerFailure("x"))
    assert not should_reschedule(InputError("x"))
    assert not should_reschedule(ProvisionFailed("x"))
