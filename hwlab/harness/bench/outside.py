"""Outside power changes and requests counted at the BMCs: what every row
of ``hwlab bench events`` shares, the bmaas sync rows
(:mod:`bmaas.hwlab.harness.bench.events`) and the Ironic rows
(:mod:`bmaas.hwlab.harness.bench.events_ironic`) alike.

A change is made through the lab's control API (the console power-off no
client asked for) and watched for in the client's own record; requests are
counted by rules at the lab's BMCs that fire on every request and change
nothing.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from bmaas.hwlab.limits import SSE_KEEPALIVE

__all__ = [
    "BREAKDOWN",
    "COUNT_ALL",
    "COUNT_SUBSCRIBE",
    "WARMUP",
    "WATCH_TICK",
    "Measured",
    "Options",
    "by_operation",
    "count_requests",
    "counted",
    "fired",
    "first_passes",
    "late_grace",
    "outside_changes",
    "steady_window",
]

#: seconds between looks at the store for a change (the detection clock's tick)
WATCH_TICK = 0.02
#: seconds after the sync's first pass before the steady figures start
WARMUP = 3.0
COUNT_ALL = "bench-count-requests"
COUNT_SUBSCRIBE = "bench-count-subscribe"
#: the operations a row's steady requests are broken down by (each counted
#: by a zero-delay rule of its own beside COUNT_ALL): the service root, a
#: session's POST or DELETE, the system's GET (the power read); the rest is
#: "other", the subscriptions and SSE opens "subscribe"
BREAKDOWN = ("probe", "login", "power.get")


def late_grace(interval: float) -> float:
    """Seconds a change still pending at a row's end is waited for (outside
    the measured window) before it counts as missed: two of the client's
    intervals and 10 s. The last change comes at least one interval and 5 s
    before the end; a client starved on a loaded host (CI's run 54: a
    conductor's 3 s power sync at load ~20) may see it later than that, and
    says so in its latency; a client that never sees it misses it."""
    return 2 * interval + 10.0


@dataclasses.dataclass(frozen=True)
class Options:
    nodes: int = 20
    #: seconds each mode runs
    duration: float = 300.0
    #: the sync's --interval (Ironic's default is 120 s, bmaas's usual 60 s)
    interval: float = 60.0
    #: seconds between outside power changes, on average
    every: float = 8.0
    #: the sync's --safety-interval (seconds; its default is 2400)
    safety_interval: float = 2400.0
    #: the sync's --liveness-interval (seconds; None: its default, 300 s, 12
    #: reads per node-hour of a streamed node's API)
    liveness_interval: float | None = None
    seed: int = 37
    #: seconds between SSE keepalive comments of the lab's BMCs (0: none, as
    #: OpenBMC's bmcweb; hwlab's own default otherwise)
    sse_keepalive: float = SSE_KEEPALIVE
    #: rows through a real Ironic (bmaas.hwlab.harness.bench.events_ironic:
    #: "redfish", "bmaas-polling", "bmaas-events", "bmaas-push"), after the
    #: bmaas sync rows; needs scripts/ironic-env.sh
    ironic: tuple[str, ...] = ()
    #: only the Ironic rows (no bmaas sync rows)
    ironic_only: bool = False
    #: the bmaas sync rows: polling, events, push, adversary (empty: the
    #: default rows, bmaas.hwlab.harness.bench.events.MODES)
    mode: tuple[str, ...] = ()

    @classmethod
    def smoke(cls) -> Options:
        """40 s rows, a change every 3 s among 3 nodes: each node changes
        about every 9 s, three of the sync's 3 s intervals, so events read
        less than polling even when a loaded runner slows the polling passes
        (at a change every 1.5 s each node changed about as often as it was
        polled: at load 28 the two rows counted 21 requests each); and the
        changes' window, what start-up leaves of a row, still holds some
        (at 30 s rows and one every 4 s, load 20 left a row with none)."""
        return cls(nodes=3, duration=40.0, interval=3.0, every=3.0, safety_interval=30.0)


@dataclasses.dataclass
class Measured:
    mode: str
    changes: int = 0
    latencies: list[float] = dataclasses.field(default_factory=list)
    missed: int = 0
    requests: int = 0
    subscribes: int = 0
    cpu: float = 0.0
    seconds: float = 0.0
    steady_requests: int = 0
    #: the steady window's requests by operation (:func:`by_operation`)
    steady_by_operation: dict[str, int] = dataclasses.field(default_factory=dict)
    steady_cpu: float = 0.0
    steady_seconds: float = 0.0
    #: the client process's threads, fds and RSS: start, end and peak of
    #: the steady window (bmaas.hwlab.harness.bench.common.sampled)
    footprint: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    #: the adversary row's attack and what it got (bench.adversary)
    adversary: dict[str, Any] = dataclasses.field(default_factory=dict)


def fired(lab: Any, names: list[str], *rules: str) -> dict[str, int]:
    """Per node, how often ``rules`` (by name) fired at its BMC: one look at
    the lab's status."""
    status = lab.status()["nodes"]
    return {n: sum(int(status[n]["fired"].get(rule, 0)) for rule in rules) for n in names}


def counted(lab: Any, names: list[str]) -> int:
    """Requests the BMCs of ``names`` served since :func:`count_requests`."""
    return sum(fired(lab, names, COUNT_ALL, COUNT_SUBSCRIBE).values())


def by_operation(lab: Any, names: list[str]) -> dict[str, int]:
    """Requests the BMCs of ``names`` served since :func:`count_requests`, by
    operation (:data:`BREAKDOWN`, "subscribe" and "other"): one look at the
    lab's status. Where a row's requests beyond its reads went; their sum is
    :func:`counted`'s."""
    status = lab.status()["nodes"]

    def total(rule: str) -> int:
        return sum(int(status[n]["fired"].get(rule, 0)) for n in names)

    out = {op: total(f"bench-count-{op}") for op in BREAKDOWN}
    out["subscribe"] = total(COUNT_SUBSCRIBE)
    out["other"] = total(COUNT_ALL) - sum(out[op] for op in BREAKDOWN)
    return out


def count_requests(lab: Any, names: list[str]) -> None:
    """Counters at the BMCs from zero: a zero-second ``delay`` rule on every
    request and one on ``event.subscribe`` (they change nothing; their fired
    counts are the counts)."""
    for name in names:
        lab.clear_faults(name)
        lab.add_faults(
            name,
            [
                {"effect": "delay", "seconds": 0, "operation": "*", "name": COUNT_ALL},
                {
                    "effect": "delay",
                    "seconds": 0,
                    "operation": "event.subscribe",
                    "name": COUNT_SUBSCRIBE,
                },
                *(
                    {"effect": "delay", "seconds": 0, "operation": op, "name": f"bench-count-{op}"}
                    for op in BREAKDOWN
                ),
            ],
        )


def first_passes(
    lab: Any,
    names: list[str],
    streamed: bool,
    interval: float,
    by: float,
    alive: Callable[[], None] = lambda: None,
) -> None:
    """Every row's start-up: until the client has read every node once
    since now (polling), or every node's stream has opened (its SSE GET or
    push subscription, counted at the BMC) and one more pass has reconciled
    it (``interval`` + :data:`WARMUP` after the last open); never past
    ``by`` (a monotonic time). ``alive()`` raises once the client is gone
    (a row whose client died ends then, not at ``by``)."""
    rule = COUNT_SUBSCRIBE if streamed else COUNT_ALL
    base = {} if streamed else fired(lab, names, rule)
    while time.monotonic() < by:
        alive()
        found = fired(lab, names, rule)
        if all(found[n] > base.get(n, 0) for n in names):
            break
        time.sleep(0.5)
    time.sleep(max(0.0, min(interval if streamed else 0.0, by - time.monotonic()) + WARMUP))


def steady_window(
    lab: Any,
    names: list[str],
    measured: Measured,
    cpu: Callable[[], float],
    started: float,
    during: Callable[[Callable[[], None]], int],
) -> None:
    """Every row's measurement: the client's CPU (``cpu()``) and the
    requests counted at the BMCs from now (the steady window) and in
    total, around ``during(end)`` (the outside changes, or a quiet wait; it
    returns the changes missed). ``during`` calls ``end()`` when its window
    ends, before it waits for late changes: that wait is not measured.
    ``started``: when the row began."""
    # one look at the lab's status at each edge (10,000 nodes' counters)
    cpu0, ops0, steady_at = cpu(), by_operation(lab, names), time.monotonic()
    ended = False

    def end() -> None:
        nonlocal ended
        if not ended:
            ended = True
            now = time.monotonic()
            measured.seconds, measured.steady_seconds = now - started, now - steady_at
            measured.cpu, ops = cpu(), by_operation(lab, names)
            measured.requests, measured.subscribes = sum(ops.values()), ops["subscribe"]
            measured.steady_cpu = measured.cpu - cpu0
            measured.steady_requests = measured.requests - sum(ops0.values())
            measured.steady_by_operation = {k: ops[k] - ops0[k] for k in ops}

    measured.missed = during(end)
    end()


def outside_changes(
    lab: Any,
    names: list[str],
    rng: random.Random,
    measured: Measured,
    recorded: Callable[[list[str]], dict[str, str]],
    every: float,
    end: float,
    last_change: float,
    tick: float,
    ended: Callable[[], None] = lambda: None,
    grace: float = 0.0,
) -> int:
    """Until ``end``: at random times (``every`` seconds on average, none
    after ``last_change``) power a random node the other way through the lab's
    control API (the console: no client asked), and watch ``recorded`` (the
    client's record: ``{name: "on" | "off"}``, every ``tick`` seconds) for each
    change to show. Latencies and changes go to ``measured``. At ``end``,
    ``ended()`` (the window's figures are taken), then up to ``grace`` more
    seconds for the changes still pending: a client on a loaded host may see a
    change late, which its latency says; only one never seen is returned
    (missed)."""
    pending: dict[str, tuple[str, float]] = {}
    lock = threading.Lock()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            with lock:
                wanted = dict(pending)
            if wanted:
                found = recorded(list(wanted))
                for name, (state, at) in wanted.items():
                    if found.get(name) == state:
                        with lock:
                            if pending.get(name, (None, 0.0))[1] == at:
                                del pending[name]
                                measured.latencies.append(time.monotonic() - at)
            done.wait(tick)

    watcher = threading.Thread(target=watch, name="bench watcher", daemon=True)
    watcher.start()
    next_change = time.monotonic() + rng.expovariate(1 / every)
    try:
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_change and now < last_change:
                name = rng.choice(names)
                with lock:
                    busy = name in pending
                if not busy:
                    target = "off" if recorded([name]).get(name) == "on" else "on"
                    with lock:
                        pending[name] = (target, time.monotonic())
                    lab.power(name, target)  # the console: no client asked
                    measured.changes += 1
                next_change = now + rng.expovariate(1 / every)
            time.sleep(0.05)
        ended()
        late_until = time.monotonic() + grace
        while time.monotonic() < late_until:
            with lock:
                if not pending:
                    break
            time.sleep(0.05)
    finally:
        done.set()
        watcher.join(5)
    with lock:
        return len(pending)
