"""Opening thousands of streams at a steady rate (issue 46, the 10,000-stream row).

``hwlab bench events --nodes 10000`` opened its streams in bursts of about
1,000 a minute: every open was queued on the reactor's pool at once, each
with a Deadline counted from the moment it was queued, so all but the first
few hundred found their time spent before their turn came ("no time
left"), were lost and backed off together, and came back as one herd.

Here the pool is the test's: ``OPENS`` workers share the fake clock, an
open costs ``COST`` seconds of it (BMCs slowed by a pass reading them),
and a stream refuses an open whose deadline is spent, as
``ServiceStream.open`` does. The streams ride Inboxes: no descriptor each."""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import Any

from bmaas.deadline import Deadline
from bmaas.events import Backoff, News, Pacing
from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCTimeout
from bmaas.reactor import OPENS, Inbox, Reactor

#: seconds one open takes (a BMC answering slowly while a pass reads it)
COST = 0.5
#: the open's deadline (``bmc_timeout``): far shorter than the queue's length
PACING = Pacing(open_deadline=3.0, idle=300.0, backoff=Backoff(first=1.0), absent_retry=600.0)


class SlowStream:
    """An open that costs ``COST`` seconds on the shared clock and fails if
    its deadline is spent, at its start or its end."""

    def __init__(self, n: int, clock: FakeClock) -> None:
        self.nodes = {"*": f"n{n}"}
        self.key = f"http://bmc{n}"
        self.clock = clock
        self.inbox: Inbox | None = None

    def open(self, deadline: Deadline) -> None:
        if deadline.left() <= 0:
            raise BMCTimeout("no time left to open the event stream", node=self.nodes["*"])
        self.clock.advance(COST / OPENS)  # OPENS of them at once share the clock
        if deadline.expired:
            raise BMCTimeout("the open's deadline passed", node=self.nodes["*"])
        self.inbox = Inbox(quiet=1e9, check=lambda deadline: None)

    def selectable(self) -> Inbox | None:
        return self.inbox

    def read_ready(self) -> Sequence[News] | None:
        return []

    keeps_alive = True  # an Inbox: checked when quiet, never timed by silence

    def silent(self, idle: float) -> Exception:
        return BMCTimeout("silent", node=self.nodes["*"])

    def close(self) -> None:
        self.inbox = None


class Host:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.opened_at: list[float] = []
        self.faults: list[str] = []

    def opened(self, who: Any) -> None:
        self.opened_at.append(self.clock())

    def lost(self, who: Any, fault: Exception, wait: float, *, opening: bool) -> None:
        self.faults.append(str(fault))

    def news(self, who: Any, trusted: Sequence[News], flood: Sequence[News]) -> None:
        pass


def run_fleet(n: int) -> tuple[Host, Reactor, FakeClock, collections.deque[Callable[[], None]]]:
    """``n`` streams added at once, the pool drained one piece of work at a
    time, the reactor stepped after each (its timers on the fake clock)."""
    clock = FakeClock(start=0.0)
    queued: collections.deque[Callable[[], None]] = collections.deque()
    reactor = Reactor(clock=clock, submit=queued.append, spawn=lambda *a: None)
    host = Host(clock)
    for i in range(n):
        s = SlowStream(i, clock)
        reactor.add(s, s, host, PACING)
    reactor.step(0.0)
    most = 0
    for _ in range(50 * n):  # bounded: far more than the opens need
        most = max(most, len(queued))
        if queued:
            queued.popleft()()
        else:
            clock.advance(0.25)  # nothing to run: time passes (back-offs)
        reactor.step(0.0)
        if len(host.opened_at) == n:
            break
    host.most_queued = most  # type: ignore[attr-defined]
    return host, reactor, clock, queued


def test_a_thousand_opens_at_the_pool_s_rate_none_lost() -> None:
    n = 1000
    host, reactor, _, _ = run_fleet(n)
    try:
        assert host.faults == []  # no open expired waiting for its turn
        assert len(host.opened_at) == n
        # the pool's rate: OPENS at once, COST seconds each (+1 s of slack)
        assert host.opened_at[-1] <= n * COST / OPENS + 1.0
    finally:
        reactor.close()


def test_opens_are_steady_not_bursts() -> None:
    n = 1000
    host, reactor, _, _ = run_fleet(n)
    try:
        rate = OPENS / COST
        at = host.opened_at
        for second in range(int(at[-1])):  # every second until the last: near the rate
            done = sum(1 for t in at if second <= t < second + 1)
            assert done >= rate * 0.9, (second, done)
    finally:
        reactor.close()


def test_the_pool_holds_no_more_than_its_workers() -> None:
    """Opens wait in the reactor's queue, not the pool's: at most OPENS are
    handed to the pool at once (a dropped stream leaves the queue unopened)."""
    host, reactor, _, _ = run_fleet(200)
    try:
        assert host.most_queued <= OPENS  # type: ignore[attr-defined]
    finally:
        reactor.close()


def test_a_stream_dropped_while_queued_is_never_opened() -> None:
    clock = FakeClock(start=0.0)
    queued: collections.deque[Callable[[], None]] = collections.deque()
    reactor = Reactor(clock=clock, submit=queued.append, spawn=lambda *a: None)
    host = Host(clock)
    streams = [SlowStream(i, clock) for i in range(OPENS + 5)]
    entries = [reactor.add(s, s, host, PACING) for s in streams]
    reactor.step(0.0)
    reactor.drop(entries[-1])
    reactor.step(0.0)
    for _ in range(100):
        if queued:
            queued.popleft()()
        reactor.step(0.0)
    try:
        assert len(host.opened_at) == OPENS + 4
        assert streams[-1].inbox is None  # never opened
        assert reactor.count() == OPENS + 4
    finally:
        reactor.close()
