"""The ``overload`` and ``session_limit`` effects in the engine: triggered by
the load and sessions a BMC sees, not by chance; one trigger firing per
silent window (carrying what set it off), the lost requests after it. Fake
clock, no sleeping."""

from __future__ import annotations

import pytest

from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.effects import EFFECTS, Effect
from bmaas.fakes.faults import FaultPlan, FaultRule
from bmaas.fakes.machine import FakeMachine
from bmaas.faults import BMCTimeout
from tests.budgets import ask


def plan(clock: FakeClock, **params: float) -> FaultPlan:
    fp = FaultPlan(node="n1", clock=clock)
    fp.add(FaultRule.from_dict({"effect": "overload", **params}))
    return fp


def test_more_requests_per_second_than_the_bmc_takes_silence_it_for_the_duration() -> None:
    clock = FakeClock(start=0.0)
    fp = plan(clock, max_rate=5, duration=10)
    for _ in range(5):  # five within a second: coped with
        assert fp.evaluate("power.get") == []
        clock.advance(0.1)
    (trigger,) = fp.evaluate("power.get")  # the sixth
    assert trigger.effect is Effect.OVERLOAD
    assert trigger.params["trigger"] == "6 requests within 1s > max_rate 5"
    clock.advance(5)
    (lost,) = fp.evaluate("power.get")  # still silent, no new trigger
    assert "trigger" not in lost.params
    clock.advance(5)
    assert fp.evaluate("power.get") == []  # back, its count started afresh


def test_requests_spaced_within_the_rate_never_trigger() -> None:
    clock = FakeClock(start=0.0)
    fp = plan(clock, max_rate=5, duration=10)
    for _ in range(100):
        assert fp.evaluate("power.get") == []
        clock.advance(0.25)  # bmaas's gate spacing for such a BMC: 4 per second


def test_more_requests_in_flight_than_the_bmc_takes() -> None:
    clock = FakeClock(start=0.0)
    fp = plan(clock, max_concurrent=2, duration=3)
    assert fp.evaluate("power.get", in_flight=2) == []
    (trigger,) = fp.evaluate("power.get", in_flight=3)
    assert trigger.params["trigger"] == "3 requests in flight > max_concurrent 2"
    clock.advance(3)
    assert fp.evaluate("power.get") == []  # a server that cannot count never triggers it


def test_times_limits_the_windows() -> None:
    clock = FakeClock(start=0.0)
    fp = plan(clock, max_rate=0, duration=1, times=1)
    assert len(fp.evaluate("power.get")) == 1
    clock.advance(2)
    assert fp.evaluate("power.get") == []


def test_session_limit_fires_only_at_the_limit_and_only_on_a_login() -> None:
    fp = FaultPlan(node="n1", clock=FakeClock())
    fp.add(FaultRule.from_dict({"effect": "session_limit", "sessions": 2, "operation": "login"}))
    assert fp.evaluate("login", sessions=1) == []
    (refused,) = fp.evaluate("login", sessions=2)
    assert refused.effect is Effect.SESSION_LIMIT
    assert fp.evaluate("login") == []  # a proxy cannot count sessions: never fires


def test_an_overloaded_fake_bmc_times_out_then_answers_again() -> None:
    clock = FakeClock(start=0.0)
    machine = FakeMachine("n1", clock=clock)
    machine.plan.add(
        FaultRule.from_dict({"effect": "overload", "max_rate": 0, "duration": 5, "times": 1})
    )
    driver = FakeDriver("n1", machine=machine, clock=clock, sleep=clock.sleep, bmc_timeout=2.0)
    with pytest.raises(BMCTimeout):
        ask(driver.get_power_state)
    clock.advance(5)
    assert ask(driver.get_power_state) is not None
    assert EFFECTS[Effect.OVERLOAD].fault is BMCTimeout
