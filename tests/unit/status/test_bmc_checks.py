"""The bmc, power and boot checks on fake fleets: each kind of fault lands in
the right check with the right result, and the sweep keeps its deadline."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver, BMCInfo, Operation, PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.fleet import FakeFleet
from bmaas.faults import BMCTimeout, UnclassifiedFault
from bmaas.inventory import NodeSpec
from bmaas.ops import DriverFactory, driver_factory
from bmaas.status import Result
from bmaas.store import NodeRecord, Store
from tests.fleet import PASSWORD, install_stub_drivers
from tests.unit.status.conftest import MakeContext, run

Enroll = Callable[..., list[str]]
BMC_CHECKS = ("bmc", "power", "boot")


def test_a_healthy_fleet_is_all_success(make_ctx: MakeContext, enroll: Enroll) -> None:
    enroll(4)
    results = run(make_ctx(), *BMC_CHECKS)
    assert {r.result for r in results.values()} == {Result.SUCCESS}
    assert results["bmc"].details[0].startswith("4 of 4 BMC(s) answered")
    assert results["power"].details == ("4 of 4 read (off 4)",)
    assert results["boot"].details == ("4 of 4 read (disk 4)",)


def test_a_dead_bmc_fails_reachability_after_one_call_deadline(
    make_ctx: MakeContext, enroll: Enroll, fleet: FakeFleet, clock: FakeClock
) -> None:
    enroll(3)
    fleet.add("n02", rules=[{"effect": "hang"}])
    # One worker: a fake hang moves the shared clock by a whole call at once,
    # which a neighbour's call already under way would read as its own
    # deadline spent (a race real time cannot have).
    ctx = make_ctx(deadline=20, workers=1)
    results = run(ctx, *BMC_CHECKS)
    bmc = results["bmc"]
    assert bmc.result is Result.FAILURE
    assert bmc.nodes == {"timeout": ["n02"]}
    assert f"1 node(s) did not answer in time ({ctx.bmc_timeout:.3g}s per call): n02" in (
        bmc.details
    )
    # The probe timed out, so nothing else was asked of that BMC: one call's wait.
    assert clock.sleeps == [ctx.bmc_timeout]
    for name in ("power", "boot"):
        assert results[name].result is Result.FAILURE
        assert results[name].nodes == {"bmc_failed": ["n02"]}
        assert "1 node(s) not read, their BMC check failed (see bmc): n02" in results[name].details


def test_rotated_credentials_fail_and_busy_only_warns(
    make_ctx: MakeContext, enroll: Enroll, fleet: FakeFleet
) -> None:
    enroll(3)
    fleet.add("n01", rules=[{"effect": "auth_fail"}])
    fleet.add("n03", rules=[{"effect": "busy", "operation": "probe", "retry_after": 2}])
    results = run(make_ctx(), *BMC_CHECKS)
    bmc = results["bmc"]
    assert bmc.result is Result.FAILURE
    assert bmc.nodes == {"auth": ["n01"], "busy": ["n03"]}
    assert any(line.startswith("1 node(s) rejected the credentials") for line in bmc.details)
    # A busy probe does not stop the other reads: n03's power and boot were read.
    assert results["power"].nodes == {"bmc_failed": ["n01"]}
    assert results["boot"].nodes == {"bmc_failed": ["n01"]}


def test_busy_alone_is_a_warning(make_ctx: MakeContext, enroll: Enroll, fleet: FakeFleet) -> None:
    enroll(2)
    fleet.add("n02", rules=[{"effect": "busy", "operation": "probe"}])
    results = run(make_ctx(), "bmc")
    assert results["bmc"].result is Result.WARNING
    assert "1 node(s) busy (the BMC said to try later): n02" in results["bmc"].details


def _n01_is(cls: type[FakeDriver], fleet: FakeFleet) -> Callable[[float], DriverFactory]:
    """A ``make_factory`` whose node n01 gets a ``cls`` driver, the rest a plain one."""

    def make(bmc_timeout: float) -> DriverFactory:
        def build(record: NodeRecord) -> BMCDriver:
            kind = cls if record.name == "n01" else FakeDriver
            return kind(record.name, bmc_timeout=bmc_timeout, fleet=fleet)

        return build

    return make


class Starved(FakeDriver):
    """A probe that timed out while this client waited for a CPU: what
    bmaas.lateness marks on a loaded machine (issue 50: a live node at load
    25 was among the dead ones)."""

    def probe(self, *, deadline: Deadline) -> BMCInfo:
        fault = self.fault(BMCTimeout, "no answer", operation="probe")
        fault.late = 0.3
        raise fault


def test_a_timeout_the_client_was_late_for_only_warns_and_says_so(
    make_ctx: MakeContext, enroll: Enroll, fleet: FakeFleet
) -> None:
    enroll(3)
    fleet.add("n03", rules=[{"effect": "hang"}])

    make = _n01_is(Starved, fleet)

    results = run(make_ctx(make_factory=make, workers=1), *BMC_CHECKS)
    bmc = results["bmc"]
    assert bmc.nodes == {"timeout": ["n03"], "late": ["n01"]}
    assert bmc.result is Result.FAILURE  # n03's, not n01's
    line = next(line for line in bmc.details if line.startswith("1 node(s) not told"))
    assert "waited for a CPU" in line
    assert results["power"].nodes == {"bmc_failed": ["n01", "n03"]}  # nothing more asked


def test_a_late_timeout_alone_is_a_warning(
    make_ctx: MakeContext, enroll: Enroll, fleet: FakeFleet
) -> None:
    enroll(2)

    make = _n01_is(Starved, fleet)

    bmc = run(make_ctx(make_factory=make), "bmc")["bmc"]
    assert bmc.nodes == {"late": ["n01"]}
    assert bmc.result is Result.WARNING


class Garbling(FakeDriver):
    """A driver whose mapping table missed something: honest, unclassified."""

    def probe(self, *, deadline: Deadline) -> BMCInfo:
        raise self.fault(UnclassifiedFault, "reply 0x42 means nothing to us", operation="probe")


def test_an_unclassified_fault_fails_with_its_message(
    make_ctx: MakeContext, enroll: Enroll, fleet: FakeFleet
) -> None:
    enroll(2)

    make = _n01_is(Garbling, fleet)

    results = run(make_ctx(make_factory=make), "bmc", "power")
    bmc = results["bmc"]
    assert bmc.result is Result.FAILURE
    assert bmc.nodes == {"unclassified": ["n01"]}
    message = next(line for line in bmc.details if "reply 0x42" in line)
    assert message.strip().startswith("n01: probe via fake")
    # The probe answered something, so the power read was still tried (and worked).
    assert results["power"].result is Result.SUCCESS


def test_faults_on_the_reads_themselves(
    make_ctx: MakeContext, enroll: Enroll, fleet: FakeFleet
) -> None:
    enroll(3)
    fleet.add("n01", rules=[{"effect": "internal_error", "operation": "power.get"}])
    fleet.add("n02", rules=[{"effect": "unsupported", "operation": "boot.get"}])
    results = run(make_ctx(), *BMC_CHECKS)
    assert results["bmc"].result is Result.SUCCESS
    power, boot = results["power"], results["boot"]
    assert (power.result, power.nodes) == (Result.FAILURE, {"fault": ["n01"]})
    assert any("n01: power.get via fake" in line for line in power.details)
    assert (boot.result, boot.nodes) == (Result.FAILURE, {"fault": ["n02"]})
    assert any("operation not supported" in line for line in boot.details)


def test_an_unknown_power_state_is_not_readable(
    make_ctx: MakeContext, enroll: Enroll, fleet: FakeFleet
) -> None:
    enroll(2)

    class Unsure(FakeDriver):
        def get_power_state(self, *, deadline: Deadline) -> PowerState:
            return PowerState.UNKNOWN

    def make(bmc_timeout: float) -> DriverFactory:
        return lambda record: Unsure(record.name, bmc_timeout=bmc_timeout, fleet=fleet)

    power = run(make_ctx(make_factory=make), "power")["power"]
    assert power.result is Result.FAILURE
    assert power.nodes == {"unknown": ["n01", "n02"]}


def test_maintenance_nodes_are_probed_but_only_warn_and_are_not_read(
    make_ctx: MakeContext, enroll: Enroll, fleet: FakeFleet, store: Store
) -> None:
    enroll(3)
    store.nodes.set_maintenance("n01", reason="PSU swap", by="alice")
    fleet.add("n01", rules=[{"effect": "hang"}])
    results = run(make_ctx(workers=1), *BMC_CHECKS)  # one worker: see the dead-BMC test
    bmc = results["bmc"]
    assert bmc.result is Result.WARNING
    assert bmc.nodes == {"timeout_in_maintenance": ["n01"]}
    assert any(line.startswith("1 node(s) in maintenance did not answer") for line in bmc.details)
    for name in ("power", "boot"):
        assert results[name].result is Result.SUCCESS
        assert "1 node(s) in maintenance not read: n01" in results[name].details


def test_a_node_that_cannot_be_asked_says_why_without_the_password(
    make_ctx: MakeContext,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install_stub_drivers(monkeypatch)
    monkeypatch.delenv("STATUS_TEST_PW", raising=False)
    info: dict[str, Any] = {
        "ipmi_address": "127.0.0.1",
        "ipmi_username": "admin",
        "ipmi_password": "${STATUS_TEST_PW}",
    }
    store.nodes.enroll(
        [
            NodeSpec("i01", "ipmi", info),
            NodeSpec("i02", "ipmi", {**info, "ipmi_password": PASSWORD}),
        ]
    )
    results = run(make_ctx(make_factory=driver_factory), *BMC_CHECKS)
    bmc = results["bmc"]
    assert bmc.result is Result.FAILURE
    assert bmc.nodes == {"cannot_ask": ["i01"]}
    assert any("environment variable STATUS_TEST_PW is not set" in line for line in bmc.details)
    text = repr(results)
    assert PASSWORD not in text


def test_nodes_whose_driver_does_not_load_are_not_asked(
    make_ctx: MakeContext, enroll: Enroll, monkeypatch: pytest.MonkeyPatch
) -> None:
    enroll(2)
    from bmaas import registry
    from bmaas.faults import InputError

    def load(name: str) -> type[BMCDriver]:
        raise InputError(f"unknown driver {name!r} (installed: none)", field="driver")

    monkeypatch.setattr(registry, "load_driver", load)
    results = run(make_ctx(), *BMC_CHECKS)
    assert results["bmc"].nodes == {"no_driver": ["n01", "n02"]}
    assert results["bmc"].details[1] == (
        "2 node(s) not asked: driver does not load (see drivers): n01, n02"
    )
    for name in ("power", "boot"):
        assert results[name].result is Result.FAILURE
        assert results[name].nodes == {"bmc_failed": ["n01", "n02"]}


# -- the deadline -----------------------------------------------------------------


def test_the_sweep_gives_up_at_the_deadline_and_says_who_was_not_asked(
    make_ctx: MakeContext, enroll: Enroll, fleet: FakeFleet, clock: FakeClock
) -> None:
    enroll(6)
    for name in ("n01", "n02", "n03", "n04", "n05"):
        fleet.add(name, rules=[{"effect": "hang"}])
    ctx = make_ctx(deadline=10, workers=1)
    bmc = run(ctx, "bmc")["bmc"]
    # Each hang costs a quarter of the sweep's budget: four fit, then time is up.
    assert ctx.bmc_timeout == pytest.approx(9 / 4)
    assert bmc.nodes == {"timeout": ["n01", "n02", "n03", "n04"], "not_asked": ["n05", "n06"]}
    assert any("not asked before the deadline" in line for line in bmc.details)
    assert clock.monotonic() <= ctx.deadline.at


class Stuck(FakeDriver):
    """A BMC call that ignores its deadline (a driver bug, or a kernel that
    never returns): the sweep must still come back on time."""

    release = threading.Event()

    def probe(self, *, deadline: Deadline) -> BMCInfo:
        self._sleep(3600)  # the fake clock: an hour passes while it hangs
        type(self).release.wait(timeout=10)
        return super().probe(deadline=deadline)


def test_a_call_that_never_returns_cannot_hold_the_check_past_its_deadline(
    make_ctx: MakeContext, enroll: Enroll, fleet: FakeFleet
) -> None:
    enroll(3)
    Stuck.release = threading.Event()

    def make(bmc_timeout: float) -> DriverFactory:
        def build(record: NodeRecord) -> BMCDriver:
            cls = Stuck if record.name == "n01" else FakeDriver
            return cls(record.name, bmc_timeout=bmc_timeout, fleet=fleet)

        return build

    try:
        results = run(make_ctx(make_factory=make, workers=1), *BMC_CHECKS)
    finally:
        Stuck.release.set()
    bmc = results["bmc"]
    assert bmc.nodes == {"timeout": ["n01"], "not_asked": ["n02", "n03"]}
    assert results["power"].nodes == {"bmc_failed": ["n01", "n02", "n03"]}


def test_only_the_reads_a_selected_check_needs_are_made(
    make_ctx: MakeContext, enroll: Enroll, fleet: FakeFleet
) -> None:
    enroll(2)
    calls: list[str] = []

    class Counting(FakeDriver):
        def _call(self, operation: Operation, *args: Any) -> Any:
            calls.append(str(operation))
            return super()._call(operation, *args)

    def make(bmc_timeout: float) -> DriverFactory:
        return lambda record: Counting(record.name, bmc_timeout=bmc_timeout, fleet=fleet)

    run(make_ctx(make_factory=make), "power")
    assert sorted(calls) == ["power.get", "power.get", "probe", "probe"]
