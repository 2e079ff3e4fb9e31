"""bmaas.keeper: sessions kept alive for a host with no loop of its own
(Ironic's conductor), on a FakeClock: no real sleep."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from bmaas.fakes.clock import FakeClock
from bmaas.keeper import SessionKeeper, keepalives_pay
from bmaas.pool import DriverPool, idle_for_interval
from tests.unit.test_pool import KeptAlive, key, read

#: Ironic's default [conductor]sync_power_state_interval
INTERVAL = 120.0


def _builder(clock: FakeClock) -> tuple[dict[str, KeptAlive], Callable[[str], KeptAlive]]:
    """A driver factory for the pool, and the drivers it built, by node."""
    drivers: dict[str, KeptAlive] = {}

    def build(node: str) -> KeptAlive:
        drivers[node] = KeptAlive(node, clock)
        return drivers[node]

    return drivers, build


def _run(keeper: SessionKeeper, clock: FakeClock, until: float) -> list[float]:
    """The keeper's loop on the fake clock: step, sleep what it says."""
    waits = []
    while clock() < until:
        wait = keeper.step()
        waits.append(wait)
        clock.advance(max(wait, 0.001))
    return waits


def test_a_session_read_once_a_sync_interval_logs_in_once_over_three_cycles() -> None:
    """Issue 26: bmaas-ipmi logged in to every BMC every Ironic sync cycle.
    With the keeper, one login for three cycles of 120 s, a keepalive every
    10 s of idleness in between (the driver's session_keepalive)."""
    clock = FakeClock(start=0.0)
    drivers, build = _builder(clock)

    with DriverPool(clock=clock, idle=idle_for_interval(INTERVAL)) as pool:
        keeper = SessionKeeper(pool, tick=5.0, clock=clock)
        for cycle in range(3):
            read(pool, build, key("n1"))
            _run(keeper, clock, until=(cycle + 1) * INTERVAL)
        read(pool, build, key("n1"))
        assert pool.stats.logins == 1
        assert len(drivers) == 1
        kept = drivers["n1"].kept
        assert len(kept) == 33  # 11 a cycle: at 10, 20, ... 110 s after each read
        assert kept[:3] == [10.0, 20.0, 30.0]
        assert all(b - a >= 10.0 for a, b in itertools.pairwise(kept))


def test_without_the_keeper_every_cycle_logs_in_again() -> None:
    """The control: the same cycles, nobody keeping the session alive."""
    clock = FakeClock(start=0.0)

    def build(node: str) -> KeptAlive:
        return KeptAlive(node, clock)

    with DriverPool(clock=clock, idle=idle_for_interval(INTERVAL)) as pool:
        for _ in range(4):
            read(pool, build, key("n1"))
            clock.advance(INTERVAL)
        assert pool.stats.logins == 4


def test_a_dead_bmc_is_logged_out_and_the_keeper_sleeps_until_the_next_due() -> None:
    clock = FakeClock(start=0.0)
    drivers, build = _builder(clock)

    with DriverPool(clock=clock, idle=idle_for_interval(INTERVAL)) as pool:
        keeper = SessionKeeper(pool, tick=30.0, clock=clock)
        assert keeper.step() == 30.0  # nothing pooled: the tick
        read(pool, build, key("n1"))
        clock.advance(3.0)
        read(pool, build, key("n2"))
        assert keeper.step() == 7.0  # n1 is due 10 s after its read
        drivers["n2"].dead = True
        clock.advance(7.0)
        assert keeper.step() == 3.0  # n1 kept; n2 due at 13 s
        clock.advance(3.0)
        keeper.step()
        assert drivers["n2"].closed == 1  # no answer: logged out, never reused
        assert pool.open_sessions() == 1
        assert (pool.stats.keepalives, pool.stats.dropped) == (1, 1)


def test_the_thread_starts_once_and_stops_at_once() -> None:
    with DriverPool() as pool:
        keeper = SessionKeeper(pool, tick=3600.0)
        keeper.start()
        keeper.start()
        assert keeper.running
        keeper.stop(timeout=5.0)  # wakes the hour-long wait
        assert not keeper.running


@pytest.mark.parametrize(("tick", "budget"), [(0.0, 30.0), (5.0, -1.0)])
def test_nonsense_settings_are_refused(tick: float, budget: float) -> None:
    with DriverPool() as pool, pytest.raises(ValueError, match="must be positive"):
        SessionKeeper(pool, tick=tick, round_budget=budget)


@pytest.mark.parametrize(
    ("interval", "pays"),
    [
        (30.0, True),  # 2 keepalives instead of a 5-exchange login
        (60.0, True),  # 5 keepalives: a login's worth, and the session lasts
        (61.0, False),  # 6
        (120.0, False),  # Ironic's default: 11 keepalives, twice a login
        (0.0, True),  # no interval known: keep sessions alive
    ],
)
def test_keepalives_are_sent_only_where_they_cost_no_more_than_a_login(
    interval: float, pays: bool
) -> None:
    assert keepalives_pay(interval, 10.0) is pays
