"""Which rule a BMC call inside Ironic runs under (bmaas.drivers.ironic.rules),
and what each rule does with a busy or rebooting BMC: on FakeDriver and a
FakeClock, nothing sleeps for real. No Ironic needed (tests/ironic/ drive
the same through a real one)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.drivers.ironic import rules
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.fleet import FakeFleet
from bmaas.faults import BMCBusy, BMCUnreachable
from bmaas.retry import RetryLimits, call
from bmaas.runtime import JOIN, RequestDeadlines

#: the [bmaas] defaults: call 5, operation 180, sync 15
CALL, OPERATION, SYNC = 5.0, 180.0, 15.0


@dataclasses.dataclass(eq=False)
class Task:
    """What rule_of looks at on Ironic's TaskManager: its public ``shared``."""

    shared: bool


class Rig:
    """One fake node on a fake clock, read as Ironic's conductor reads it."""

    def __init__(self, *rules_: dict[str, Any], power: PowerState = PowerState.OFF) -> None:
        self.fleet = FakeFleet(clock=FakeClock(start=0.0), seed=3)
        self.fleet.add("n1", rules=rules_, power=power)
        self.driver = FakeDriver("n1", fleet=self.fleet, bmc_timeout=CALL)
        self.clock = self.fleet.clock
        #: the retry's waits (the fake clock's ``sleeps`` also holds the
        #: fake BMC's own answer times)
        self.waits: list[float] = []

    def _wait(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.sleep(seconds)

    def limits(self, rule: rules.Rule) -> RetryLimits:
        return rules.limits(rule, call=CALL, operation=OPERATION).replace(
            sleep=self._wait, clock=self.clock.monotonic, jitter=0.0, rng=random.Random(0)
        )

    def read(self, rule: rules.Rule) -> PowerState:
        """One get_power_state as the Ironic interface makes it under ``rule``."""
        seconds = SYNC if rule is rules.Rule.SYNC else OPERATION
        deadline = Deadline.after(seconds, clock=self.clock.monotonic)
        return call(self.limits(rule), self.driver.get_power_state, deadline=deadline)


def test_a_shared_lock_is_ironics_periodic_read_anything_else_an_action() -> None:
    assert rules.rule_of(Task(shared=True)) is rules.Rule.SYNC  # _sync_power_states
    assert rules.rule_of(Task(shared=False)) is rules.Rule.ACTION  # node_power_action
    assert rules.rule_of(object()) is rules.Rule.ACTION  # not a task: never the fast-fail


def test_six_busy_answers_before_an_action_are_waited_out_under_the_action_rule() -> None:
    rig = Rig({"effect": "busy", "operation": "power.get", "nth": [1, 2, 3, 4, 5, 6]})
    assert rig.read(rules.Rule.ACTION) is PowerState.OFF
    assert rig.waits == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert rig.driver.wire_calls == ["power.get"] * 7
    assert rig.clock.monotonic() < OPERATION


def test_six_busy_answers_outlast_the_sync_rule() -> None:
    """What the trial saw: the pre-action read under the sync rule ran its
    back-off out inside sync_deadline."""
    rig = Rig({"effect": "busy", "operation": "power.get", "nth": [1, 2, 3, 4, 5, 6]})
    with pytest.raises(BMCBusy):
        rig.read(rules.Rule.SYNC)
    assert rig.waits == [0.5, 1.0, 2.0, 4.0]  # the next wait would cross 15 s
    assert len(rig.driver.wire_calls) == 5


@pytest.mark.parametrize("window", [10.0, 45.0, 120.0])
def test_a_rebooting_bmc_is_asked_through_its_window_under_the_action_rule(window: float) -> None:
    """Issue 48: a BMC that refuses connections at once (a Redfish BMC
    rebooting: nothing listens) was asked 12 times in all, the waits 1, 1,
    2, 4 and then 8 s: the window ended 64 s in, and a 120 s reset failed
    ``bmc_unreachable`` where stock Ironic waited it out. The window is time
    (the budget), its asks one per 8 s at most once the waits have grown."""
    # the request that starts the reboot is lost with the BMC (as in hwlab)
    rig = Rig({"effect": "bmc_reboot", "duration": window, "times": 1})
    assert rig.read(rules.Rule.ACTION) is PowerState.OFF
    # two brief asks a second apart, then doubling up to 8 s, until it answers
    brief = [1.0, 1.0]
    assert rig.waits[:2] == brief
    assert rig.waits[2:5] == [2.0, 4.0, 8.0][: len(rig.waits) - 2]
    assert max(rig.waits) <= 8.0
    assert rig.clock.monotonic() >= window  # it answered once back, not before
    assert rig.clock.monotonic() < window + 8.0 + 1.0  # no later than one wait after
    assert rig.driver.wire_calls[-1] == "power.get"
    assert len(rig.driver.wire_calls) == len(rig.waits) + 1
    assert rig.waits[5:] == [8.0] * len(rig.waits[5:])  # the window's asks: 8 s apart


def test_a_rebooting_bmc_fails_a_sync_read_at_once() -> None:
    """The sync counts unreachable: Ironic's failure counting must see it."""
    rig = Rig({"effect": "bmc_reboot", "duration": 10.0, "times": 1})
    with pytest.raises(BMCUnreachable):
        rig.read(rules.Rule.SYNC)
    assert rig.waits == []
    assert len(rig.driver.wire_calls) == 1


def test_a_bmc_that_never_comes_back_fails_an_action_typed_by_its_budget() -> None:
    rig = Rig({"effect": "bmc_reboot", "duration": 600.0, "times": 1})
    with pytest.raises(BMCUnreachable):
        rig.read(rules.Rule.ACTION)
    # asked through the whole budget, not cut short by a count of attempts
    assert OPERATION - 8.0 - 1.0 < rig.clock.monotonic() <= OPERATION
    # what that costs: the brief asks, then one every 8 s
    assert len(rig.driver.wire_calls) <= 3 + 2 + OPERATION / 8.0


def test_the_window_never_resends_what_is_not_idempotent() -> None:
    """A timeout on a reset is not asked again blindly, window or not (the
    table: timeouts are retried for idempotent calls only)."""
    limits = rules.limits(rules.Rule.ACTION, call=CALL, operation=OPERATION)
    timeout = _fault("BMCTimeout")
    assert limits.windowed(timeout, idempotent=True)
    assert not limits.windowed(timeout, idempotent=False)
    assert not limits.windowed(_fault("BMCBusy"), idempotent=True)  # busy has its own back-off
    sync = rules.limits(rules.Rule.SYNC, call=CALL, operation=OPERATION)
    assert not sync.windowed(_fault("BMCUnreachable"), idempotent=True)
    assert not RetryLimits().windowed(_fault("BMCUnreachable"), idempotent=True)  # library: brief


def _fault(name: str) -> BaseException:
    import bmaas.faults

    cls = getattr(bmaas.faults, name)
    return cls("x", node="n1", driver="fake", operation="power.get")  # type: ignore[no-any-return]


# -- one budget for the read before an action and the action ------------------------


def test_the_action_continues_the_deadline_its_read_opened() -> None:
    clock = FakeClock(start=0.0)
    book = RequestDeadlines(clock=clock.monotonic)
    task = Task(shared=False)
    read = book.open(task, OPERATION)
    clock.advance(40.0)  # a read through a 40 s BMC reboot
    book.idle(task)
    clock.advance(0.2)  # Ironic saves the node
    action = book.open(task, OPERATION)
    assert action is read
    assert action.left() == pytest.approx(OPERATION - 40.2)
    book.close(task)
    assert book.open(task, OPERATION) is not read  # the next request starts afresh


def test_a_request_not_continued_within_join_seconds_is_a_new_one() -> None:
    clock = FakeClock(start=0.0)
    book = RequestDeadlines(clock=clock.monotonic)
    task, other = Task(shared=False), Task(shared=False)
    read = book.open(task, OPERATION)
    book.idle(task)
    assert book.open(other, OPERATION) is not read  # another task's request
    clock.advance(JOIN + 1)  # a deploy step read it long before acting
    assert book.open(task, OPERATION).left() == pytest.approx(OPERATION)
