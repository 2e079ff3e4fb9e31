"""The per-BMC gate: a cap on requests in flight and a spacing between
request starts, shared by every driver of a process, waits bounded by the
caller's deadline (SlotTimeout, never BMCBusy). Fake clock and sleep."""

from __future__ import annotations

import threading

import pytest

from bmaas.deadline import Deadline
from bmaas.driver_info import DriverInfo
from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCFault, InputError, SlotTimeout
from bmaas.gate import PACE_RESERVE, Gate, GateRegistry
from bmaas.policy import FleetOutcome, SameNode, policy_for


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=100.0)


def test_requests_start_at_least_the_spacing_apart(clock: FakeClock) -> None:
    gate = Gate("redfish:https://bmc", cap=4, spacing=0.25, clock=clock, sleep=clock.sleep)
    for _ in range(4):
        with gate.hold(Deadline.after(5, clock=clock)):
            pass
    # the first goes at once; each later one waits for its turn
    assert clock.sleeps == [0.25, 0.25, 0.25]
    assert gate.stats.paced == 4


def test_spacing_counts_from_the_last_start_not_from_now(clock: FakeClock) -> None:
    gate = Gate("ipmi:10.0.0.1:623", cap=1, spacing=0.5, clock=clock, sleep=clock.sleep)
    gate.pace(Deadline.after(5, clock=clock))
    clock.advance(2.0)  # long after: no wait
    gate.pace(Deadline.after(5, clock=clock))
    assert clock.sleeps == []


def test_a_turn_of_two_requests_goes_at_once_and_the_next_waits_two_spacings(
    clock: FakeClock,
) -> None:
    """An IPMI login and its first command share one turn (sent back to
    back), but the BMC counts both: the next turn comes two spacings later,
    so over any second the BMC sees no more than the spacing promises."""
    gate = Gate("ipmi:10.0.0.1:623", cap=1, spacing=0.25, clock=clock, sleep=clock.sleep)
    gate.pace(Deadline.after(5, clock=clock), requests=2)
    gate.pace(Deadline.after(5, clock=clock))
    gate.pace(Deadline.after(5, clock=clock))
    assert clock.sleeps == [0.5, 0.25]
    assert gate.stats.paced == 3


def test_a_turn_beyond_the_deadline_is_a_slot_timeout_and_reserves_nothing(
    clock: FakeClock,
) -> None:
    gate = Gate("ipmi:10.0.0.1:623", cap=1, spacing=1.0, clock=clock, sleep=clock.sleep)
    gate.pace(Deadline.after(5, clock=clock))
    with pytest.raises(SlotTimeout, match=r"next turn in 1\.00s") as info:
        gate.pace(Deadline.after(0.5, clock=clock), node="n1", operation="power.get")
    fault = info.value
    assert (fault.node, fault.operation, fault.address) == ("n1", "power.get", "ipmi:10.0.0.1:623")
    assert not isinstance(fault, BMCFault)
    gate.pace(Deadline.after(5, clock=clock))  # the refused caller took no turn
    assert clock.sleeps == [1.0]


def test_a_budget_shorter_than_the_spacing_alone_is_the_callers_too_late(
    clock: FakeClock,
) -> None:
    waits: list[float] = []  # sleeps that do not move the clock: callers queue up
    gate = Gate("ipmi:10.0.0.1:623", cap=1, spacing=1.0, clock=clock, sleep=waits.append)
    late = TimeoutError("deadline passed before anything was sent")
    gate.pace(Deadline.after(5, clock=clock))
    with pytest.raises(TimeoutError):  # only the spacing after the last request
        gate.pace(Deadline.after(0.5, clock=clock), too_late=lambda: late)
    gate.pace(Deadline.after(5, clock=clock))  # takes the turn 1 s away
    with pytest.raises(SlotTimeout):  # behind another caller's turn: contention
        gate.pace(Deadline.after(1.5, clock=clock), too_late=lambda: late)
    assert waits == [1.0]


def test_at_the_cap_a_caller_waits_then_gets_a_slot_timeout_at_its_deadline(
    clock: FakeClock,
) -> None:
    gate = Gate("redfish:https://bmc", cap=2, spacing=0, clock=clock, sleep=clock.sleep)
    with gate.hold(Deadline.after(5, clock=clock)), gate.hold(Deadline.after(5, clock=clock)):
        assert gate.in_flight == 2
        with (
            pytest.raises(SlotTimeout, match="2 in flight, cap 2"),
            gate.hold(Deadline(clock(), clock), node="n3"),
        ):
            pass
    assert gate.in_flight == 0
    assert gate.stats.peak == 2
    assert gate.stats.refused == 1


def test_a_waiter_gets_the_slot_the_holder_gives_back(clock: FakeClock) -> None:
    gate = Gate("redfish:https://bmc", cap=1, spacing=0, clock=clock, sleep=clock.sleep)
    entered = threading.Event()
    got: list[str] = []
    with gate.hold(Deadline.after(5, clock=clock)):

        def second() -> None:
            entered.set()
            with gate.hold(Deadline.after(5, clock=clock)):
                got.append("in")

        thread = threading.Thread(target=second)
        thread.start()
        assert entered.wait(5)
        assert got == []
    thread.join(5)
    assert got == ["in"]
    assert gate.stats.peak == 1
    assert gate.stats.waited == 1


def test_the_policy_retries_a_slot_timeout_and_never_counts_it() -> None:
    row = policy_for(SlotTimeout("x"))
    assert row.same_node is SameNode.BACKOFF
    assert not row.counts_for_health
    assert row.fleet is FleetOutcome.BUSY


def test_one_gate_per_bmc_and_the_strictest_ask_wins(clock: FakeClock) -> None:
    gates = GateRegistry(environ={}, clock=clock, sleep=clock.sleep)
    first = gates.gate("redfish:https://chassis", cap=4, spacing=0.05)
    again = gates.gate("redfish:https://chassis", cap=2, spacing=0.01)
    assert again is first
    assert (first.cap, first.spacing) == (2, 0.05)
    gates.gate("redfish:https://chassis", cap=8, spacing=0.0)  # never loosens
    assert (first.cap, first.spacing) == (2, 0.05)
    assert gates.gate("ipmi:10.0.0.1:623", cap=1, spacing=0.1) is not first


def test_process_wide_limits_from_the_environment_and_configure(clock: FakeClock) -> None:
    gates = GateRegistry(
        environ={"BMAAS_BMC_MAX_REQUESTS": "1", "BMAAS_BMC_MIN_INTERVAL": "0.3"}, clock=clock
    )
    gate = gates.gate("redfish:https://a", cap=4, spacing=0.05)
    assert (gate.cap, gate.spacing) == (1, 0.3)
    quiet = GateRegistry(environ={}, clock=clock)
    other = quiet.gate("redfish:https://b", cap=4, spacing=0.05)
    quiet.configure(cap=3, spacing=0.2)
    assert (other.cap, other.spacing) == (3, 0.2)


def test_configure_with_the_same_limits_walks_no_gate(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Ironic conductor configures on every call: walking 10,000 gates each
    time made its sync pass quadratic (seen: no 10,000-node pass in 11 min)."""
    gates = GateRegistry(environ={}, clock=clock)
    made = [gates.gate(f"ipmi:10.0.0.{i}:623", cap=1, spacing=0.1) for i in range(3)]
    tightened: list[str] = []
    original = Gate.tighten

    def counting(self: Gate, cap: int, spacing: float) -> None:
        tightened.append(self.label)
        original(self, cap, spacing)

    monkeypatch.setattr(Gate, "tighten", counting)
    gates.configure(cap=None, spacing=None)  # what it was: nothing to do
    gates.configure(cap=None, spacing=None)
    assert tightened == []
    gates.configure(cap=None, spacing=0.5)  # a change still reaches every gate
    assert len(tightened) == 3
    assert all(g.spacing == 0.5 for g in made)
    gates.configure(cap=None, spacing=0.5)
    assert len(tightened) == 3


def test_bad_environment_names_every_problem_at_once(clock: FakeClock) -> None:
    gates = GateRegistry(
        environ={"BMAAS_BMC_MAX_REQUESTS": "0", "BMAAS_BMC_MIN_INTERVAL": "soon"}, clock=clock
    )
    with pytest.raises(InputError) as info:
        gates.gate("redfish:https://a", cap=4, spacing=0.05)
    lines = str(info.value).splitlines()
    assert len(lines) == 2
    assert "BMAAS_BMC_MAX_REQUESTS" in lines[0]
    assert "BMAAS_BMC_MIN_INTERVAL" in lines[1]


def test_driver_info_lowers_the_cap_and_widens_the_spacing() -> None:
    info = DriverInfo.parse({"bmc_max_requests": 2, "bmc_min_interval": 0.5})
    assert (info.bmc_max_requests, info.bmc_min_interval) == (2, 0.5)
    problems = DriverInfo.problems({"bmc_max_requests": 0, "bmc_min_interval": -1})
    assert [p.field for p in problems] == [
        "driver_info.bmc_max_requests",
        "driver_info.bmc_min_interval",
    ]


def test_retry_after_holds_every_caller_of_the_bmc(clock: FakeClock) -> None:
    gate = Gate("redfish:https://chassis", cap=4, spacing=0, clock=clock, sleep=clock.sleep)
    gate.defer(2.0)  # one system's call got 503 Retry-After: 2
    with gate.hold(Deadline.after(5, clock=clock), node="another-system"):
        pass
    assert clock.sleeps == [2.0]
    gate.defer(3.0)
    with pytest.raises(SlotTimeout):  # not before the BMC's time is up
        gate.pace(Deadline.after(1.0, clock=clock))


def test_a_wait_that_would_leave_the_request_no_time_is_not_taken(clock: FakeClock) -> None:
    """bmaas's own spacing must not spend the request's budget: a turn that
    would leave less than PACE_RESERVE is refused before sleeping (a
    SlotTimeout, never a BMC timeout counted against the node, issue 36);
    a request that needs no wait is sent whatever is left."""
    gate = Gate("redfish:https://bmc", cap=4, spacing=1.0, clock=clock, sleep=clock.sleep)
    gate.pace(Deadline.after(5, clock=clock))
    almost = Deadline.after(1.0 + PACE_RESERVE / 2, clock=clock)  # the turn fits, barely
    with pytest.raises(SlotTimeout):
        gate.pace(almost)
    assert clock.sleeps == []  # refused before waiting
    gate.pace(Deadline.after(1.0 + 2 * PACE_RESERVE, clock=clock))  # leaves the reserve: taken
    assert clock.sleeps == [1.0]
    clock.advance(5.0)
    gate.pace(Deadline.after(PACE_RESERVE / 10, clock=clock))  # no wait: sent at once
    assert gate.stats.refused == 1


def test_a_driver_call_refused_by_the_spacing_is_a_slot_timeout_never_counted(
    clock: FakeClock,
) -> None:
    """The driver's "deadline passed before the call: nothing sent" is
    bmaas's own budget: SlotTimeout naming the node, driver and BMC, a row
    that is retried on the same node, never counted, never fenced (it was a
    BMCTimeout, and sync fenced healthy nodes with it)."""
    from bmaas.fakes.driver import FakeDriver
    from bmaas.fakes.machine import FakeMachine

    machine = FakeMachine("n1", clock=clock)
    driver = FakeDriver("n1", machine=machine, clock=clock, sleep=clock.sleep)
    fault = driver.too_late("power.get", clock())
    assert isinstance(fault, SlotTimeout)
    assert not isinstance(fault, BMCFault)
    assert (fault.node, fault.driver, fault.operation) == ("n1", "fake", "power.get")
    assert "nothing sent" in str(fault)
    row = policy_for(fault)
    assert (row.counts_for_health, row.fences, row.same_node) == (False, False, SameNode.BACKOFF)
    assert row.fleet is FleetOutcome.BUSY
    # inside Ironic: a power read in Ironic's sync retries it within
    # sync_deadline instead of failing at once (a counted fault would), and
    # the Ironic backend's release reads the same row's ``fences``
    from bmaas.retry import RetryLimits

    assert RetryLimits(sync=True).limit_for(fault, idempotent=True) > 1
