"""The CPU of an event's store write, back to back and after a sleep: what
waking up costs a thread on this machine.

    python scripts/bench_event_write.py --nodes 200 --runs 600 --idle-runs 60 --sleep 0.2

Enrolls N fake nodes into a temporary SQLite store, then times
``bmaas.events.record_news`` of one event (a power change: the locked
SELECT, the UPDATE, the history INSERT, one commit) with the calling
thread's CPU clock, ``--runs`` times back to back and ``--idle-runs`` times
each after ``--sleep`` seconds asleep, as the sync writes an event that
arrives alone; and, for scale, the same two ways, a pool checkout and a
bare ``sqlite3`` ``BEGIN IMMEDIATE``. Issue 46 (2026-12-01, 2 cores):
0.20 ms back to back, about 1 ms after 0.2 s asleep, and the checkout and
the bare BEGIN slow down as much: the difference is the wake-up, not the
statements. Last, the process's CPU for an event that arrives alone after
``--sleep``: its frame parsed and written in the waking thread, against
handed to a second thread that wakes to write it, as ``bmaas sync`` does
(is the second wake the cost, or the CPU cold after idle?). No lab, no
network.
"""

from __future__ import annotations

import argparse
import itertools
import json
import queue
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bmaas.driver import PowerState
from bmaas.events import Applied, record_news
from bmaas.health import HealthRule
from bmaas.inventory import NodeSpec
from bmaas.store import Store


def _cpu(step: Callable[[], object]) -> float:
    started = time.thread_time()
    step()
    return time.thread_time() - started


def _both(step: Callable[[], object], runs: int, idle_runs: int, sleep: float) -> str:
    """Median thread CPU of ``step`` back to back and after ``sleep`` s asleep."""
    warm = [_cpu(step) for _ in range(runs)]
    idle = []
    for _ in range(idle_runs):
        time.sleep(sleep)
        idle.append(_cpu(step))
    return (
        f"{statistics.median(warm) * 1e3:.3f} ms back to back, "
        f"{statistics.median(idle) * 1e3:.3f} ms after {sleep:g} s asleep"
    )


#: an SSE frame's payload as a Redfish service sends a power change
FRAME = json.dumps(
    {
        "Events": [
            {
                "EventType": "ResourceEvent",
                "MessageId": "ResourceEvent.1.0.ResourceChanged",
                "OriginOfCondition": {"@odata.id": "/redfish/v1/Systems/1"},
            }
        ]
    }
)


def _alone(write: Callable[[], None], runs: int, sleep: float, *, handed: bool) -> float:
    """Median process CPU (every thread) of one event after ``sleep``
    asleep: the frame parsed, then written here or by a second thread
    woken for it (``handed``)."""
    todo: queue.SimpleQueue[bool] = queue.SimpleQueue()
    done = threading.Event()

    def writer() -> None:
        while todo.get():
            write()
            done.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    spent = []
    try:
        for _ in range(runs):
            time.sleep(sleep)
            done.clear()
            started = time.process_time()
            json.loads(FRAME)
            if handed:
                todo.put(True)
                if not done.wait(10.0):  # the writer died (its traceback is above)
                    raise SystemExit("the writer thread wrote nothing in 10 s")
            else:
                write()
            spent.append(time.process_time() - started)
    finally:
        todo.put(False)
        thread.join(10.0)
    return statistics.median(spent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200, help="nodes enrolled (default 200)")
    parser.add_argument("--runs", type=int, default=600, help="back-to-back writes (default 600)")
    parser.add_argument("--idle-runs", type=int, default=60, help="writes after a sleep (60)")
    parser.add_argument("--sleep", type=float, default=0.2, help="seconds asleep (default 0.2)")
    args = parser.parse_args()
    if min(args.nodes, args.runs, args.idle_runs) < 1 or args.sleep < 0:
        parser.error("--nodes, --runs and --idle-runs must be at least 1, --sleep not negative")
    with tempfile.TemporaryDirectory(prefix="bench-event-write-") as tmp:
        path = Path(tmp) / "bmaas.sqlite"
        store = Store.open(str(path), create=True)
        try:
            names = [f"n{i:05d}" for i in range(args.nodes)]
            store.nodes.enroll(
                [NodeSpec(name=n, driver="fake", driver_info={"fake_machine": n}) for n in names],
                [],
            )
            rule = HealthRule()
            store.health.record_power_reads([(n, PowerState.ON) for n in names], health_rule=rule)
            turn = itertools.count()
            states = (PowerState.OFF, PowerState.ON)

            def write() -> None:  # each event a change: the next node, the other state
                k = next(turn)
                news = Applied(names[k % len(names)], states[k // len(names) % 2], "bench", 0.0)
                record_news(store, [news], rule)

            def checkout() -> None:
                store.db.engine.connect().close()

            for _ in range(len(names)):  # every statement compiled and cached
                write()
            each = (args.runs, args.idle_runs, args.sleep)
            print(f"record_news of one event: {_both(write, *each)}")
            print(f"a pool checkout: {_both(checkout, *each)}")
            here = _alone(write, args.idle_runs, args.sleep, handed=False)
            handed = _alone(write, args.idle_runs, args.sleep, handed=True)
            print(f"an event alone after {args.sleep:g} s asleep, process CPU: "
                  f"{here * 1e3:.3f} ms parsed and written in one thread, "
                  f"{handed * 1e3:.3f} ms handed to a writer thread")  # fmt: skip
        finally:
            store.close()
        bare = sqlite3.connect(str(path), isolation_level=None)
        try:

            def begin() -> None:
                bare.execute("BEGIN IMMEDIATE")
                bare.execute("COMMIT")

            print(f"bare sqlite3 BEGIN IMMEDIATE + COMMIT: "
                  f"{_both(begin, args.runs, args.idle_runs, args.sleep)}")  # fmt: skip
        finally:
            bare.close()


if __name__ == "__main__":
    main()
