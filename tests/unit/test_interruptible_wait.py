"""The interruptible wait: every sleep in a command's path sleeps on the
CancelToken, so a signal ends it at once (a wait in flight on the second
signal, a wait before new work on the first).

Signals are scripted on a fake clock (:class:`ScriptedSignals`): the token
waits through it, time moves only as far as the wait or the next signal,
and the tests assert the exact sleep sequence. Nothing sleeps for real.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from bmaas import retry
from bmaas.deadline import Deadline
from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCBusy
from bmaas.provision import (
    CancelToken,
    Interrupted,
    Provisioner,
    ProvisionFailed,
    Request,
    status_of,
)
from bmaas.retry import RetryLimits
from bmaas.store import Store
from tests.unit.test_provision import SETTINGS, Rack


class ScriptedSignals:
    """A :data:`~bmaas.provision.cancel.WaitFn` on a fake clock: a wait lasts
    its seconds, unless one of the scripted signals (fake instants, each a
    ``token.cancel`` like the CLI's handler) arrives first and sets what the
    wait is waiting for."""

    def __init__(self, clock: FakeClock, at: list[float]) -> None:
        self.clock = clock
        self.pending = sorted(at)
        self.token = CancelToken(wait=self)

    def __call__(self, event: threading.Event, seconds: float) -> bool:
        end = self.clock() + seconds
        while self.pending and self.pending[0] <= end:
            self.clock.sleep(self.pending.pop(0) - self.clock())
            self.token.cancel("SIGINT received", signum=2)
            if event.is_set():
                return True
        self.clock.sleep(end - self.clock())
        return event.is_set()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=0.0)


def test_a_wait_in_flight_outlasts_the_first_signal_and_ends_at_the_second(
    clock: FakeClock,
) -> None:
    signals = ScriptedSignals(clock, at=[3.0, 13.0])
    sleep = signals.token.sleeper()
    sleep(10.0)  # the first signal (t=3) starts nothing new; work in flight goes on
    assert clock() == 10.0
    with pytest.raises(Interrupted, match="SIGINT received: stopped waiting"):
        sleep(10.0)  # the second (t=13) rolls back: the wait ends there, not at t=20
    assert clock() == 13.0
    assert clock.sleeps == [3.0, 7.0, 3.0]


def test_a_wait_before_new_work_ends_at_the_first_signal(clock: FakeClock) -> None:
    signals = ScriptedSignals(clock, at=[2.5])
    with pytest.raises(Interrupted):
        signals.token.sleeper(in_flight=False)(60.0)
    assert clock.sleeps == [2.5]
    assert signals.token.wait(60.0)  # already cancelled: returns at once
    assert clock.sleeps == [2.5]


def test_after_a_roll_back_a_wait_does_not_sleep_at_all(clock: FakeClock) -> None:
    signals = ScriptedSignals(clock, at=[])
    signals.token.cancel("SIGTERM received", roll_back=True)
    with pytest.raises(Interrupted):
        signals.token.sleeper()(5.0)
    assert clock.sleeps == []


def test_without_signals_it_sleeps_like_sleep(clock: FakeClock) -> None:
    sleep = ScriptedSignals(clock, at=[]).token.sleeper()
    sleep(1.5)
    sleep(0.0)
    assert clock.sleeps == [1.5, 0.0]


def test_the_retry_layers_busy_backoff_ends_at_the_second_signal(clock: FakeClock) -> None:
    """The reproduced bug: a second SIGINT during a busy backoff used to be
    slept through (33.6 s more, then FAILED BMCBusy)."""
    signals = ScriptedSignals(clock, at=[0.7, 0.9])
    policy = RetryLimits(
        sleep=signals.token.sleeper(),
        clock=clock,
        jitter=0.0,
        rng=random.Random(0),
        busy_initial=0.5,
        busy_multiplier=2.0,
    )
    calls: list[float] = []

    def busy(*, deadline: Deadline) -> None:
        calls.append(clock())
        raise BMCBusy("BMC says later", node="n1", operation="power.set")

    with pytest.raises(Interrupted):
        retry.call(policy, busy, deadline=Deadline.after(60, clock=clock))
    assert calls == [0.0, 0.5]  # the third call, due at t=1.5, was never made
    # 0.5, then a 1.0 wait cut by the signals at t=0.7 and t=0.9
    assert clock.sleeps == pytest.approx([0.5, 0.2, 0.2])
    assert clock() == pytest.approx(0.9)


def test_a_deploy_in_a_busy_backoff_is_rolled_back_at_the_second_signal(store: Store) -> None:
    """On the provisioner: the BMC answers busy to every power change; the
    operator presses Ctrl-C twice a second apart. The request ends
    INTERRUPTED right there, its node released, instead of retrying busy
    until the operation's 30 s were gone."""
    busy = [{"effect": "busy", "operation": "power.set"}]
    rack = Rack(store, count=2, rules={"n01": busy, "n02": busy})
    clock = rack.fleet.clock
    start = clock()
    signals = ScriptedSignals(clock, at=[start + 1.0, start + 2.0])
    options: dict[str, Any] = {"settings": SETTINGS, "keep_leases": False}
    provisioner = Provisioner(
        store,
        driver_factory=rack.factory,
        limits=rack.policy.replace(sleep=signals.token.sleeper()),
        cancel=signals.token,
        **options,
    )
    with provisioner:
        (result,) = provisioner.provision_many([Request("r1")])
    assert isinstance(result, ProvisionFailed)
    assert status_of(result) == "interrupted"
    assert [(a.node, a.fault_class) for a in result.attempts] == [("n01", "Interrupted")]
    assert clock() - start == pytest.approx(2.0)  # ended at the second signal
    assert "n02" not in rack.drivers  # nothing new after the first
    assert store.owners.allocations() == []
