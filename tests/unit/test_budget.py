"""One budget, passed down: each layer's Deadline is a share of its parent's,
and no BMC call is handed more than what is left. FakeClock only."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import Operation, PowerAction, PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.faults import Firing
from bmaas.fakes.fleet import FakeFleet
from bmaas.fakes.machine import Hardware
from bmaas.faults import BMCBusy, BMCTimeout, PowerFailure, PowerPending, SlotTimeout
from bmaas.retry import RetryingDriver, RetryLimits, call, reboot

T = TypeVar("T")
HW = Hardware(power_on_time=2, power_off_time=1, soft_off_time=5, os_boot_time=10)


class Recording(FakeDriver):
    """A FakeDriver that notes, for every BMC call, when it started and the
    deadline it was handed."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.handed: list[tuple[str, float, float]] = []  # (operation, now, deadline.at)

    def _call(
        self, operation: Operation, deadline: Deadline, act: Callable[[list[Firing]], T]
    ) -> T:
        bound = self._deadline(deadline)
        self.handed.append((str(operation), self._clock(), bound.at))
        return super()._call(operation, bound, act)


def rig(
    *rules: dict[str, Any], power: PowerState = PowerState.OFF, bmc_timeout: float = 5.0
) -> tuple[Recording, FakeClock, RetryLimits]:
    clock = FakeClock(start=0.0)
    fleet = FakeFleet(clock=clock, seed=5)
    machine = fleet.add("n1", hardware=HW, rules=rules, power=power)
    driver = Recording(
        "n1", machine=machine, bmc_timeout=bmc_timeout, clock=clock.monotonic, sleep=clock.sleep
    )
    policy = RetryLimits(sleep=clock.sleep, clock=clock.monotonic, jitter=0.0, rng=random.Random(0))
    return driver, clock, policy


def assert_within(driver: Recording, parent: Deadline, cap: float) -> None:
    """Every call's deadline is inside the parent's and at most ``cap`` long."""
    assert driver.handed, "no BMC call was made"
    for operation, started, at in driver.handed:
        assert at <= parent.at + 1e-9, f"{operation} at {started} outlives its parent"
        assert at - started <= cap + 1e-9, f"{operation} at {started} got more than {cap}s"


def test_a_share_never_outlives_its_parent() -> None:
    clock = FakeClock(start=0.0)
    command = Deadline.after(100.0, clock=clock)
    request = command.share(cap=30.0)
    clock.advance(25.0)
    step = request.share(cap=20.0)
    assert request.at == 30.0
    assert step.at == 30.0  # 20 s asked, 5 s left: the parent's instant wins
    assert step.left() == pytest.approx(5.0)
    assert command.share(fraction=0.5).at == pytest.approx(25.0 + 75.0 / 2)


def test_each_attempt_is_a_capped_share_of_the_operation_deadline() -> None:
    driver, clock, policy = rig({"effect": "hang", "operation": "power.get", "nth": [1]})
    operation = Deadline.after(8.0, clock=clock)
    got = call(policy, driver.get_power_state, deadline=operation, bmc_timeout=5.0)
    assert got is PowerState.OFF
    # hang for 5 s (the cap), wait 0.5 s; 2.5 s are left, less than the cap, so
    # the second attempt is handed exactly what is left
    assert [(started, at) for _, started, at in driver.handed] == [(0.0, 5.0), (5.5, 8.0)]
    assert_within(driver, operation, cap=5.0)


def test_the_operation_total_is_the_deadline_passed_in_not_the_policys() -> None:
    driver, clock, policy = rig({"effect": "busy", "operation": "power.get"})
    operation = Deadline.after(2.0, clock=clock)
    with pytest.raises(BMCBusy):
        call(policy.replace(total=600.0), driver.get_power_state, deadline=operation)
    # 0.5 + 1.0 = 1.5 s of backoff; the next 2 s wait would cross the 2 s deadline
    assert clock.sleeps == [0.5, 1.0]
    assert clock.monotonic() <= operation.at


def test_retrying_driver_power_on_and_wait_stay_inside_one_deadline() -> None:
    driver, clock, policy = rig({"effect": "busy", "operation": "power.get", "nth": [2, 3]})
    step = Deadline.after(30.0, clock=clock)
    rd = RetryingDriver(driver, policy)
    assert rd.set_power_state(PowerAction.ON, wait=True, timeout=20, deadline=step) is PowerState.ON
    assert_within(driver, step, cap=driver.bmc_timeout)
    assert clock.monotonic() <= step.at


def test_waiting_for_power_ends_at_the_deadline_with_a_timeout() -> None:
    driver, clock, policy = rig({"effect": "power_stuck", "operation": "power.set"})
    rd = RetryingDriver(driver, policy)
    step = Deadline.after(7.0, clock=clock)
    # bmaas's budget ended before the node's own power window: not the
    # node's fault (SlotTimeout, never counted against it)
    with pytest.raises(SlotTimeout) as info:
        rd.set_power_state(PowerAction.ON, wait=True, timeout=60, deadline=step)
    assert "deadline passed while waiting" in str(info.value)
    assert clock.monotonic() == pytest.approx(7.0)
    assert_within(driver, step, cap=driver.bmc_timeout)


def test_the_hardware_window_ending_first_is_a_power_failure() -> None:
    driver, clock, _ = rig({"effect": "power_stuck", "operation": "power.set"})
    step = Deadline.after(60.0, clock=clock)
    with pytest.raises(PowerFailure):
        driver.set_power_state(PowerAction.ON, wait=True, timeout=4, deadline=step)
    assert clock.monotonic() == pytest.approx(4.0)
    assert_within(driver, step, cap=driver.bmc_timeout)


def slow_reader(clock: FakeClock, lands_at: float, takes: float, asked: list[float]) -> Any:
    """A slow BMC's power read: the state when it was asked, answered
    ``takes`` seconds later."""

    def read(*, deadline: Deadline) -> PowerState:
        asked.append(clock.monotonic())
        state = PowerState.ON if clock.monotonic() >= lands_at else PowerState.OFF
        clock.advance(takes)
        return state

    return read


def test_a_read_asked_inside_the_window_and_answered_after_it_is_not_the_verdict() -> None:
    """Power lands at 9.5 s of a 10 s window; the read asked at 4.5 s + the
    poll interval still says off and answers after 10 s. One more read,
    asked once the window is over, decides: on."""
    driver, clock, _ = rig()
    driver.poll_interval = 1.0
    asked: list[float] = []
    step = Deadline.after(60.0, clock=clock)
    read = slow_reader(clock, lands_at=9.5, takes=4.5, asked=asked)
    state = driver.wait_for_power(PowerState.ON, timeout=10, deadline=step, start=0.0, read=read)
    assert state is PowerState.ON
    assert asked == [0.0, 5.5, 10.0]
    assert clock.sleeps == [1.0]


def test_power_that_never_lands_fails_after_one_read_asked_past_the_window() -> None:
    driver, clock, _ = rig()
    driver.poll_interval = 1.0
    asked: list[float] = []
    step = Deadline.after(60.0, clock=clock)
    read = slow_reader(clock, lands_at=float("inf"), takes=4.5, asked=asked)
    with pytest.raises(PowerFailure):
        driver.wait_for_power(PowerState.ON, timeout=10, deadline=step, start=0.0, read=read)
    assert asked == [0.0, 5.5, 10.0]  # the last asked at the window's end, and no more


def silent_after(clock: FakeClock, answers: int, asked: list[tuple[float, float]]) -> Any:
    """A power read that says off ``answers`` times, then never answers:
    each unanswered read waits out its deadline (a BMCTimeout). ``asked``:
    (when, the seconds it was given)."""

    def read(*, deadline: Deadline) -> PowerState:
        asked.append((clock.monotonic(), deadline.left()))
        if len(asked) <= answers:
            clock.advance(0.01)
            return PowerState.OFF
        clock.advance(deadline.left())
        raise BMCTimeout("no answer", node="n1", driver="fake", operation="power.get")

    return read


def test_the_last_read_of_a_wait_cut_by_the_budget_is_pending_not_the_bmcs_timeout() -> None:
    """At load 25 a wait's last read got 0.01 s of its budget and ended
    ``BMCTimeout`` -- counted against a BMC that answered every read before
    it. A read the budget cut below ``bmc_timeout``, once the BMC has
    answered this wait, ends it ``PowerPending``."""
    driver, clock, _ = rig(bmc_timeout=5.0)
    driver.poll_interval = 1.0
    asked: list[tuple[float, float]] = []
    step = Deadline.after(2.5, clock=clock)
    read = silent_after(clock, answers=2, asked=asked)
    with pytest.raises(PowerPending, match="power window ended") as info:
        driver.wait_for_power(PowerState.ON, timeout=60, deadline=step, start=0.0, read=read)
    assert isinstance(info.value.__cause__, BMCTimeout)
    assert [round(at, 2) for at, _ in asked] == [0.0, 1.01, 2.02]
    assert round(asked[-1][1], 2) == 0.48  # the sliver it was given
    assert clock.sleeps == [1.0, 1.0]


@pytest.mark.parametrize(
    ("answers", "budget", "why"),
    [
        (0, 2.5, "the first read: nothing says the BMC answers"),
        (2, 60.0, "the read had its whole bmc_timeout: the BMC's silence"),
    ],
)
def test_an_unanswered_read_is_the_bmcs_timeout_unless_the_budget_cut_it(
    answers: int, budget: float, why: str
) -> None:
    driver, clock, _ = rig(bmc_timeout=5.0)
    driver.poll_interval = 1.0
    asked: list[tuple[float, float]] = []
    step = Deadline.after(budget, clock=clock)
    read = silent_after(clock, answers=answers, asked=asked)
    with pytest.raises(BMCTimeout):
        driver.wait_for_power(PowerState.ON, timeout=60, deadline=step, start=0.0, read=read)
    assert len(asked) == answers + 1, why


def test_a_bare_driver_gives_each_request_of_a_wait_at_most_its_bmc_timeout() -> None:
    driver, clock, _ = rig()
    step = Deadline.after(40.0, clock=clock)
    assert driver.set_power_state(PowerAction.ON, wait=True, timeout=30, deadline=step) is (
        PowerState.ON
    )
    assert len(driver.handed) > 2  # the request, then reads until on
    assert {at - started for _, started, at in driver.handed} == {5.0}
    assert_within(driver, step, cap=5.0)


def test_reboot_after_a_lost_answer_stays_inside_the_deadline() -> None:
    driver, clock, policy = rig(
        {"effect": "hang", "operation": "power.set", "nth": 1}, power=PowerState.ON
    )
    step = Deadline.after(45.0, clock=clock)
    assert reboot(driver, policy, timeout=20, deadline=step) is PowerState.ON
    assert_within(driver, step, cap=driver.bmc_timeout)


def test_nothing_is_sent_once_the_deadline_has_passed() -> None:
    driver, clock, policy = rig()
    spent = Deadline.after(1.0, clock=clock)
    clock.advance(1.0)
    with pytest.raises(SlotTimeout, match="nothing sent"):  # bmaas's own budget
        call(policy, driver.get_power_state, deadline=spent)
    assert driver.wire_calls == []


def test_seconds_where_a_deadline_belongs_fail_loudly() -> None:
    driver, _, _ = rig()
    with pytest.raises(TypeError, match=r"Deadline\.after\(seconds\)"):
        driver.get_power_state(deadline=5.0)  # type: ignore[arg-type]
    assert driver.wire_calls == []
