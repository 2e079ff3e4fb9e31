"""The one budget type: shares never outlive their parent, sleeps never cross it."""

from __future__ import annotations

import math

import pytest

from bmaas.deadline import Deadline
from bmaas.fakes.clock import FakeClock


def test_after_and_left_follow_the_injected_clock() -> None:
    clock = FakeClock()
    d = Deadline.after(10.0, clock=clock)
    assert d.left() == 10.0
    clock.advance(4.0)
    assert d.left() == 6.0
    assert not d.expired
    clock.advance(7.0)
    assert d.left() == 0.0
    assert d.expired


def test_share_by_cap_never_exceeds_parent() -> None:
    clock = FakeClock()
    parent = Deadline.after(5.0, clock=clock)
    assert parent.share(cap=2.0).left() == 2.0
    assert parent.share(cap=60.0).left() == 5.0
    clock.advance(4.5)
    assert parent.share(cap=2.0).left() == 0.5


def test_share_by_fraction_of_what_is_left() -> None:
    clock = FakeClock()
    parent = Deadline.after(8.0, clock=clock)
    clock.advance(4.0)
    assert parent.share(fraction=0.5).left() == 2.0
    assert parent.share(cap=1.0, fraction=0.5).left() == 1.0


def test_share_is_a_new_value_parent_unchanged() -> None:
    clock = FakeClock()
    parent = Deadline.after(5.0, clock=clock)
    parent.share(cap=1.0)
    assert parent.left() == 5.0


def test_sleep_is_clipped_to_the_deadline() -> None:
    clock = FakeClock()
    d = Deadline.after(3.0, clock=clock)
    assert d.sleep(2.0, clock.sleep)
    assert d.sleep(2.0, clock.sleep)
    assert not d.sleep(2.0, clock.sleep)
    assert clock.sleeps == [2.0, 1.0]


def test_allows() -> None:
    clock = FakeClock()
    d = Deadline.after(3.0, clock=clock)
    assert d.allows(3.0)
    assert not d.allows(3.1)


@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_after_refuses_negative_or_nan(bad: float) -> None:
    with pytest.raises(ValueError, match="non-negative"):
        Deadline.after(bad, clock=FakeClock())


@pytest.mark.parametrize(("cap", "fraction"), [(-1.0, None), (None, 1.5), (None, -0.1)])
def test_share_refuses_bad_arguments(cap: float | None, fraction: float | None) -> None:
    with pytest.raises(ValueError, match="must be"):
        Deadline.after(3.0, clock=FakeClock()).share(cap, fraction=fraction)


def test_infinite_budget_is_allowed_and_shares_are_finite() -> None:
    d = Deadline.after(math.inf, clock=FakeClock())
    assert d.share(cap=2.0).left() == 2.0
