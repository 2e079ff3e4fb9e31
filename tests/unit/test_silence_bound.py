"""The silence bound (bmaas.silence, issue 35): a periodic read of a BMC
whose answer times are known waits for its answer at most a few times the
slowest of them, so the first pass after BMCs hang is not held by them;
what it costs a slow but healthy BMC (one cut read, never two in a row);
and a pass over 200 BMCs, 5 % of them hung, as Ironic's power sync runs it.

No threads and no real time: the clock is a FakeClock, the fake BMCs
advance it by their answer time (a hung one by the whole wait it was
given), the pool's background logouts and the book's probes are collected
and run by the test."""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.drivers.ironic import rules
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.fleet import FakeFleet
from bmaas.faults import BmaasError, BMCBusy, BMCTimeout, BMCUnreachable
from bmaas.policy import policy_for
from bmaas.pool import DriverPool, PoolKey
from bmaas.retry import call
from bmaas.silence import BOUND_FACTOR, BOUND_FLOOR, SilentBMCs

#: the README's [bmaas] defaults: each request 5 s, a sync read 15 s in all
CALL, SYNC = 5.0, 15.0
#: Ironic's [conductor]sync_power_state_workers
WORKERS = 8
#: what one node of Ironic's pass costs a worker besides the BMC's answer
#: (task lock, node load, database): 1000 bmaas-redfish nodes took 12.5 s a
#: pass on 8 workers (docs/benchmarks.md), 0.1 s a node; the lab's BMCs
#: answer in about 20 ms
IRONIC_PER_NODE, ANSWER = 0.08, 0.02


class Clock(FakeClock):
    """A fake clock that background jobs run on side by side: each job of a
    batch starts at the batch's start, the batch ends with its slowest."""

    def rewind(self, to: float) -> None:
        with self._lock:
            self._now = to


class Jobs:
    """What the book and the pool start in the background; the test runs
    them, in parallel on ``clock`` (as their threads do), batch by batch: a
    batch's jobs may start more (a probe's no-answer, its logout)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock
        self.jobs: list[Callable[[], None]] = []

    def __call__(self, job: Callable[[], None]) -> None:
        self.jobs.append(job)

    def run_all(self) -> int:
        done = 0
        while self.jobs:
            ran, self.jobs = self.jobs, []
            start = self.clock() if self.clock is not None else 0.0
            ends = [start]
            for job in ran:
                if self.clock is not None:
                    self.clock.rewind(start)
                job()
                if self.clock is not None:
                    ends.append(self.clock())
            if self.clock is not None:
                self.clock.rewind(max(ends))
            done += len(ran)
        return done


class Conductor:
    """A conductor's silent-BMC book and pool over a fake fleet, read as
    bmaas's power interface reads for Ironic's sync (drivers/ironic/power.py
    and calls.session with ``read=True``): known silent, fail at once;
    else through the pool, each request capped at the BMC's silence bound,
    under the sync rule's retry."""

    def __init__(self, nodes: int, *, answer: float = ANSWER) -> None:
        self.clock = Clock(start=0.0)
        self.fleet = FakeFleet(clock=self.clock, seed=35)
        self.names = [f"n{i:03d}" for i in range(nodes)]
        self.answer = answer
        for name in self.names:
            self.fleet.add(name, rules=[self._delay(answer)], power=PowerState.ON)
        self.background = Jobs(self.clock)
        self.book = SilentBMCs(first=10.0, cap=120.0, clock=self.clock, start=self.background)
        self.pool = DriverPool(clock=self.clock, silence=self.book, start=self.background)
        self.keys = {n: PoolKey.of("fake", n, {"fake_machine": n}) for n in self.names}
        self.drivers: dict[str, FakeDriver] = {}
        #: each read's wait for an answer (its silence bound), by node, in order
        self.waits: dict[str, list[float]] = {n: [] for n in self.names}
        self.sleeps: list[float] = []

    @staticmethod
    def _delay(seconds: float) -> FaultRule:
        return FaultRule.from_dict({"effect": "delay", "seconds": seconds})

    def hang(self, name: str) -> None:
        self.fleet.machine(name).plan.add(FaultRule.from_dict({"effect": "hang"}))

    def slow(self, name: str, seconds: float) -> None:
        plan = self.fleet.machine(name).plan
        plan.clear()
        plan.add(self._delay(seconds))

    def between_passes(self) -> int:
        """Start the probes that are due (the book's scheduler thread does
        it in a conductor) and run everything started in the background,
        side by side: the logouts, then the probes (each waits for its
        BMC's logout), then the logouts of the probes' sessions."""
        done = self.background.run_all()
        self.book.run_due()
        return done + self.background.run_all()

    def wire(self, name: str) -> int:
        driver = self.drivers.get(name)
        return len(driver.wire_calls) if driver is not None else 0

    def _build(self, name: str) -> FakeDriver:
        driver = self.drivers.get(name)
        wire = driver.wire_calls if driver is not None else []
        driver = FakeDriver(name, fleet=self.fleet, bmc_timeout=CALL)
        driver.wire_calls = wire  # one count per node across sessions
        self.drivers[name] = driver
        return driver

    def _sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.clock.sleep(seconds)

    def read(self, name: str) -> PowerState:
        key = self.keys[name]
        deadline = Deadline.after(SYNC, clock=self.clock.monotonic)
        known = self.book.evidence(key)
        if known is not None:  # calls.session(read=True): not asked again
            raise type(known.fault)("known silent", node=name)
        with (
            self.pool.session(key, lambda: self._build(name), deadline=deadline) as drv,
            self.book.bounded(key, CALL) as wait,
        ):
            self.waits[name].append(wait)
            limits = rules.limits(rules.Rule.SYNC, call=wait, operation=SYNC).replace(
                sleep=self._sleep, clock=self.clock.monotonic, jitter=0.0, rng=random.Random(0)
            )
            return call(limits, drv.get_power_state, deadline=deadline)

    def sync_pass(self) -> tuple[float, dict[str, PowerState | BmaasError]]:
        """One pass of Ironic's power sync: every node's read, in order, on
        ``WORKERS`` workers that each take the next node when free. Each
        read runs alone on the fake clock (the fake BMCs do not contend), so
        its time is exact; the pass's length is what the workers' queue
        makes of those times."""
        took: list[float] = []
        seen: dict[str, PowerState | BmaasError] = {}
        for name in self.names:
            start = self.clock()
            try:
                seen[name] = self.read(name)
            except BmaasError as fault:
                seen[name] = fault
            took.append(IRONIC_PER_NODE + self.clock() - start)
        free = [0.0] * WORKERS  # when each worker is next free
        for seconds in took:
            heapq.heappush(free, heapq.heappop(free) + seconds)
        return max(free), seen


def test_the_bound_is_the_call_deadline_until_answers_are_known() -> None:
    clock = FakeClock(start=0.0)
    book = SilentBMCs(clock=clock, start=Jobs())
    assert book.bound("n1", CALL) == CALL  # nothing known: the whole deadline
    book.answered("n1", 0.02)
    assert book.bound("n1", CALL) == CALL  # one answer is not enough to go by
    book.answered("n1", 0.03)
    assert book.bound("n1", CALL) == BOUND_FLOOR  # 4 x 0.03 s, raised to the floor
    book.answered("n1", 0.4)
    assert book.bound("n1", CALL) == pytest.approx(BOUND_FACTOR * 0.4)
    book.answered("n1", 3.0)
    assert book.bound("n1", CALL) == CALL  # never past the call deadline
    assert book.bound("n2", CALL) == CALL  # per BMC


def test_the_bound_follows_the_last_answers_and_a_cut_read_owes_the_next_the_whole_deadline() -> (
    None
):
    clock = FakeClock(start=0.0)
    book = SilentBMCs(clock=clock, start=Jobs(), history=3)
    for seconds in (1.0, 0.1, 0.1):
        book.answered("n1", seconds)
    assert book.bound("n1", CALL) == pytest.approx(4.0)
    book.answered("n1", 0.1)  # the slow one has left the window of three
    assert book.bound("n1", CALL) == pytest.approx(0.5)

    def no_answer() -> None:
        with book.bounded("n1", CALL) as wait:
            clock.advance(wait)
            raise BMCTimeout("no answer", node="n1")

    with pytest.raises(BMCTimeout, match=r"silence bound of 0\.50s"):
        no_answer()
    assert book.bound("n1", CALL) == CALL  # cut: its next read waits the whole deadline
    with pytest.raises(BMCTimeout) as whole:
        no_answer()
    assert "silence bound" not in str(whole.value)
    # silent with the whole deadline too, not slow: the answers still bound the next
    assert book.bound("n1", CALL) == pytest.approx(0.5)
    book.silent("n1", BMCTimeout("no answer", node="n1"), lambda: None)  # a keepalive's
    assert book.bound("n1", CALL) == pytest.approx(0.5)


def test_a_read_cut_at_the_bound_says_so_and_counts_as_a_no_answer() -> None:
    rig = Conductor(1)
    for _ in range(2):
        assert rig.read("n000") is PowerState.ON
    assert rig.waits["n000"] == [CALL, CALL]  # no answer times known yet
    rig.hang("n000")
    with pytest.raises(BMCTimeout) as raised:
        rig.read("n000")
    assert rig.waits["n000"][-1] == BOUND_FLOOR
    text = str(raised.value)
    assert "no answer within this BMC's silence bound of 0.50s" in text
    assert "the call deadline is 5s" in text
    assert "background" in text
    assert isinstance(raised.value.__cause__, BMCTimeout)  # the driver's own fault, chained
    row = policy_for(raised.value)
    assert row.counts_for_health  # Ironic's sync counts it, as any timeout
    assert row.no_answer  # and the BMC is probed at once
    assert rig.wire("n000") == 3
    assert len(rig.background.jobs) == 1  # the logout of the dropped session ...
    rig.book.run_due()
    assert len(rig.background.jobs) == 2  # ... and the probe, due at once


def test_an_unreachable_bmc_that_refused_at_once_is_not_called_cut() -> None:
    """A refusal within the bound is its own fault, not the bound's."""
    book = SilentBMCs(clock=FakeClock(start=0.0), start=Jobs())
    for _ in range(2):
        book.answered("n1", 0.02)
    refused = BMCUnreachable("connection refused", node="n1")
    with pytest.raises(BMCUnreachable) as raised, book.bounded("n1", CALL):
        raise refused
    assert raised.value is refused


def test_a_busy_bmc_is_retried_within_the_sync_deadline_each_try_within_the_bound() -> None:
    rig = Conductor(1)
    for _ in range(2):
        rig.read("n000")
    rig.fleet.machine("n000").plan.add(
        FaultRule.from_dict({"effect": "busy", "times": 2, "operation": "power.get"})
    )
    assert rig.read("n000") is PowerState.ON  # busy twice, then the answer
    assert rig.wire("n000") == 5
    assert rig.waits["n000"][-1] == BOUND_FLOOR
    assert rig.sleeps == [0.5, 1.0]  # the sync rule's busy back-off, as before
    # the read's whole time (back-off included) is its answer time: a bound
    # only ever too long, never too short (4 x 1.56 s, capped)
    assert rig.book.bound(rig.keys["n000"], CALL) == CALL


def test_a_slow_healthy_bmc_is_cut_once_then_asked_with_the_whole_deadline() -> None:
    """Its read fails at most once in a row (Ironic fences after
    power_state_sync_max_retries + 1 = 4), and the bound learns its time."""
    rig = Conductor(1)
    outcomes: list[str] = []

    def sync() -> None:
        try:
            rig.read("n000")
            outcomes.append("ok")
        except BMCTimeout:
            outcomes.append("timeout")
        rig.between_passes()  # the logout and the probe
        rig.clock.advance(60.0)

    sync()
    sync()
    rig.slow("n000", 0.8)  # 40x slower than it was, but it answers
    for _ in range(5):
        sync()
    assert outcomes == ["ok", "ok", "timeout", "ok", "ok", "ok", "ok"]
    # the read after the cut waits it all and its answer (0.8 s) teaches the bound
    assert rig.waits["n000"] == pytest.approx([CALL, CALL, BOUND_FLOOR, CALL, 3.2, 3.2, 3.2])
    assert len(rig.book) == 0  # the probe heard it: not silent
    assert rig.book.evidence(rig.keys["n000"]) is None


def test_the_first_pass_after_5_percent_of_200_bmcs_hang_is_within_1_5x_a_healthy_one() -> None:
    rig = Conductor(200)
    first, _ = rig.sync_pass()  # cold: no answer times known yet
    healthy = [rig.sync_pass()[0] for _ in range(3)]
    assert healthy[0] == pytest.approx(200 * (IRONIC_PER_NODE + ANSWER) / WORKERS)
    base = max(healthy)
    hung = rig.names[::20]
    assert len(hung) == 10
    for name in hung:
        rig.hang(name)
    wire = {n: rig.wire(n) for n in rig.names}

    took, seen = rig.sync_pass()
    assert took <= 1.5 * base, (took, base)
    failed = {n for n, v in seen.items() if isinstance(v, BmaasError)}
    assert failed == set(hung)  # every hung BMC counted, no healthy one
    assert all(isinstance(seen[n], BMCTimeout) for n in hung)
    assert all(rig.waits[n][-1] == BOUND_FLOOR for n in hung)  # cut at the bound
    assert all(rig.wire(n) == wire[n] + 1 for n in rig.names)  # one request each
    # the silence is learnt in parallel: one probe per hung BMC, started at
    # once, not one pass's read at a time
    assert len(rig.book) == len(hung)
    # their logouts, their probes, and the logouts of the probes' sessions
    assert rig.between_passes() == 3 * len(hung)
    assert all(rig.book.evidence(rig.keys[n]) is not None for n in hung)

    rig.clock.advance(60.0)
    again, seen = rig.sync_pass()
    assert again <= base  # the hung ones fail at once now
    assert {n for n, v in seen.items() if isinstance(v, BmaasError)} == set(hung)
    assert all(rig.wire(n) == wire[n] + 2 for n in hung)  # their probes only: not asked
    assert first >= base  # the cold pass: every read given the whole deadline


def test_without_answer_times_a_hung_bmc_holds_its_read_for_the_whole_deadline() -> None:
    """What the bound does not cover: a conductor that just started knows
    no answer times, so its first pass waits for a hung BMC as before."""
    rig = Conductor(20)
    hung = rig.names[::10]
    for name in hung:
        rig.hang(name)
    took, seen = rig.sync_pass()
    assert all(rig.waits[n] == [CALL] for n in hung)
    assert all(isinstance(seen[n], BMCTimeout) for n in hung)
    assert took >= CALL


def test_busy_is_not_cut_short() -> None:
    """A busy answer within the bound is an answer: raised as it is."""
    book = SilentBMCs(clock=FakeClock(start=0.0), start=Jobs())
    for _ in range(2):
        book.answered("n1", 0.02)
    busy = BMCBusy("later", node="n1")
    with pytest.raises(BMCBusy) as raised, book.bounded("n1", CALL):
        raise busy
    assert raised.value is busy
