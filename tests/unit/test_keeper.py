"""bmaas.keeper: sessions kept alive for a host with no loop of its own
(Ironic's conductor), on a FakeClock: no real sleep."""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable

import pytest

from bmaas.fakes.clock import FakeClock
from bmaas.keeper import SessionKeeper, keepalives_pay
from bmaas.pool import DriverPool, idle_for_interval
from tests.unit.test_pool import Builder, KeptAlive, key, read

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


class _Counted(KeptAlive):
    """A kept-alive driver that counts how often the pool asks its limits."""

    asked = 0

    @property
    def session_idle(self) -> float:  # type: ignore[override]
        type(self).asked += 1
        return 20.0


def test_rounds_with_nothing_due_walk_no_session() -> None:
    """A quiet events sync holds hundreds of sessions; the keeper's round
    every 5 s walked all of them twice, its largest CPU at rest. Now a
    round before the soonest due time asks no session anything, and every
    keepalive still comes on time."""
    clock = FakeClock(start=0.0)
    with DriverPool(clock=clock, idle=idle_for_interval(INTERVAL)) as pool:
        built: dict[str, _Counted] = {}

        def build(node: str) -> _Counted:
            built[node] = _Counted(node, clock)
            return built[node]

        for n in range(50):
            read(pool, build, key(f"n{n}"))
        keeper = SessionKeeper(pool, tick=1.0, clock=clock)
        assert keeper.step() == 1.0  # the first round walks and learns when: 10 s on
        _Counted.asked = 0
        for _ in range(8):  # rounds at 1 .. 8 s: nothing due
            clock.advance(1.0)
            keeper.step()
        assert _Counted.asked == 0
        _run(keeper, clock, until=31.0)
        assert [len(d.kept) for d in built.values()] == [3] * 50  # at 10, 20, 30 s
        assert all(d.kept == [10.0, 20.0, 30.0] for d in built.values())


def test_a_shorter_limit_or_a_node_no_longer_held_is_expired_on_time() -> None:
    """The bound is a lower bound: a change that brings a due time nearer
    (a shorter pool idle, a node dropped from the held set) resets it."""
    clock = FakeClock(start=0.0)
    with DriverPool(clock=clock, idle=600.0) as pool:
        build = Builder()
        pool.hold(["n1"], 3600.0)
        for node in ("n1", "n2"):
            read(pool, build, key(node))
        assert pool.expire_idle() == 0  # hold() asked for a walk: it learns when
        assert pool.due_in() == 30.0  # n2: its driver's own session_idle
        clock.advance(30.0)
        assert pool.expire_idle() == 1
        assert pool.due_in() == 3570.0  # n1, held
        pool.hold([], 0.0)
        assert pool.due_in() == 0.0
        assert pool.expire_idle() == 1  # n1's own limit (30 s) has passed
        assert pool.due_in() == math.inf
        read(pool, build, key("n3"))
        pool.idle = 5.0
        clock.advance(5.0)
        assert pool.expire_idle() == 1


def test_holding_the_same_nodes_again_keeps_the_bound() -> None:
    """An events sync holds its streamed nodes again every pass; when the
    held set and its idle stay or grow, no limit comes nearer, so the pass
    after it walks no session (every pass did: a reset bound)."""
    clock = FakeClock(start=0.0)
    with DriverPool(clock=clock, idle=600.0) as pool:
        built: dict[str, _Counted] = {}

        def build(node: str) -> _Counted:
            built[node] = _Counted(node, clock)
            return built[node]

        names = [f"n{n}" for n in range(20)]
        pool.hold(names[:10], 3600.0)
        for name in names:
            read(pool, build, key(name))
        assert pool.expire_idle() == 0  # learns when: the unheld ones' 20 s
        _Counted.asked = 0
        for _ in range(5):  # passes holding the same nodes, then more of them
            pool.hold(names[:10], 3600.0)
            assert pool.expire_idle() == 0
        pool.hold(names[:15], 7200.0)
        assert pool.expire_idle() == 0
        assert _Counted.asked == 0
        pool.hold(names[:5], 7200.0)  # five no longer held: a walk, on time
        clock.advance(20.0)
        assert pool.expire_idle() == 15  # n5 .. n19, at their own 20 s
        assert _Counted.asked > 0


def test_the_pool_wakes_its_keeper_only_for_a_session_due_sooner_than_it_was_told() -> None:
    """The keeper sleeps until the pool's bound (``due_in``), not in ticks:
    a quiet events sync woke it every 5 s to learn nothing was due. The
    pool calls ``on_sooner``'s wake when a session becomes due before what
    it last told, and only then: not for one due later, not twice for one."""
    clock = FakeClock(start=0.0)
    with DriverPool(clock=clock, idle=600.0) as pool:
        woken: list[float] = []
        pool.on_sooner(lambda: woken.append(clock()))
        build = Builder()
        assert pool.due_in() == math.inf  # told: nothing pooled
        read(pool, build, key("n1"))  # due in its driver's 30 s: sooner
        assert woken == [0.0]
        assert pool.due_in() == 30.0  # told again
        clock.advance(10.0)
        read(pool, build, key("n2"))  # due at 40 s: after 30 s, no wake
        assert woken == [0.0]
        pool.hold(["n1"], 3600.0)  # a longer hold: no limit nearer
        assert woken == [0.0]
        pool.hold([], 0.0)  # n1 no longer held: its own limit, maybe sooner
        assert woken == [0.0, 10.0]
        pool.hold([], 0.0)  # the same again: already told "now"
        assert woken == [0.0, 10.0]


def test_a_keeper_asleep_past_every_due_wakes_for_a_session_given_back() -> None:
    """The keeper's thread, with nothing pooled, sleeps its whole tick (an
    hour here); a session given back wakes it for a round at once. Its
    rounds are counted; the waits are bounded (5 s), never slept."""
    clock = FakeClock(start=0.0)
    with DriverPool(clock=clock, idle=600.0) as pool:
        keeper = SessionKeeper(pool, tick=3600.0, clock=clock)
        rounds: list[float] = []
        round_done = threading.Event()
        step = keeper.step

        def counted() -> float:
            wait = step()
            rounds.append(wait)
            round_done.set()
            return wait

        keeper.step = counted  # type: ignore[method-assign]
        keeper.start()
        try:
            assert round_done.wait(5.0)
            assert rounds == [3600.0]  # nothing pooled: the whole tick
            round_done.clear()
            read(pool, Builder(), key("n1"))
            assert round_done.wait(5.0)  # woken, not an hour later
            assert rounds == [3600.0, 30.0]  # and it now sleeps until n1 is due
        finally:
            keeper.stop()
        assert not keeper.running
