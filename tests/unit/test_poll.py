"""poll_until: the one loop behind the deploy's restart, settle and ready waits."""

from __future__ import annotations

from typing import Literal

import pytest

from bmaas.deadline import Deadline
from bmaas.fakes.clock import FakeClock
from bmaas.poll import PENDING, Pending, poll_until


class Spent(Exception):
    pass


def test_sleeps_the_interval_between_asks_and_returns_the_answer() -> None:
    fake = FakeClock(start=0.0)
    asks: list[float] = []
    answers: list[str | Literal[Pending.PENDING]] = [PENDING, PENDING, "up"]

    def predicate() -> str | Literal[Pending.PENDING]:
        asks.append(fake.monotonic())
        return answers.pop(0)

    checks: list[float] = []
    got = poll_until(
        predicate,
        Deadline.after(60, clock=fake),
        2.0,
        sleep=fake.sleep,
        spent=Spent,
        before_wait=lambda: checks.append(fake.monotonic()),
    )
    assert got == "up"
    assert fake.sleeps == [2.0, 2.0]
    assert asks == [0.0, 2.0, 4.0]
    assert checks == [0.0, 2.0]  # the caller's check before each wait, never after the answer


def test_none_is_an_answer_not_a_pending() -> None:
    fake = FakeClock(start=0.0)
    assert (
        poll_until(lambda: None, Deadline.after(5, clock=fake), 1.0, sleep=fake.sleep, spent=Spent)
        is None
    )
    assert fake.sleeps == []


def test_the_last_wait_is_cut_to_the_deadline_then_spent_is_raised() -> None:
    fake = FakeClock(start=0.0)
    asks = 0

    def never() -> Literal[Pending.PENDING]:
        nonlocal asks
        asks += 1
        return PENDING

    with pytest.raises(Spent):
        poll_until(never, Deadline.after(5, clock=fake), 2.0, sleep=fake.sleep, spent=Spent)
    assert fake.sleeps == [2.0, 2.0, 1.0]
    assert asks == 4  # once more after the cut wait, then no sleep past the deadline


def test_a_failing_check_before_the_wait_stops_the_poll() -> None:
    fake = FakeClock(start=0.0)

    def lost() -> None:
        raise RuntimeError("lease lost")

    with pytest.raises(RuntimeError, match="lease lost"):
        poll_until(
            lambda: PENDING,
            Deadline.after(60, clock=fake),
            1.0,
            sleep=fake.sleep,
            spent=Spent,
            before_wait=lost,
        )
    assert fake.sleeps == []
