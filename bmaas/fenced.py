"""Reads of fenced nodes: backed off, and never waited for by a pass.

A node the sync put into ``power failure`` (its own fence, the
:class:`~bmaas.health.HealthRule`'s ``fault``) has a BMC that timed out or
could not be reached several times in a row. Reading it every pass costs
every pass that BMC's timeout (a silent BMC answers nothing until the read's
deadline), and tells us nothing new most of the time. So the sync
(:func:`bmaas.sync.sync_pass` given a :class:`FencedReads`, as
:func:`bmaas.sync.sync_loop` always does):

* reads a fenced node only when its back-off (:class:`FencedBackoff`)
  says so; a good read resets it, so the node is read every pass again
  until ``recover_after`` good reads clear the fence;
* runs those reads on a few threads of their own, each bounded by its own
  deadline, and never waits for them: a pass collects the ones that have
  finished, and one still running is collected by a later pass, never
  started twice.

The schedule and defaults: docs/operator.md, "A dead BMC costs only
itself". So a silent BMC costs only itself: its reads neither stretch a pass nor run
more often than the schedule.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from bmaas import threads
from bmaas.store.records import NodeRecord

__all__ = ["FencedBackoff", "FencedReads"]

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class FencedBackoff:
    """When a fenced node is read again (seconds), and how long a read may take."""

    first: float = 30.0
    factor: float = 2.0
    cap: float = 600.0
    #: each background read's own deadline (its BMC calls get shares of it)
    timeout: float = 60.0
    #: threads for background reads; more fenced reads due wait their turn
    workers: int = 4

    def __post_init__(self) -> None:
        if self.first <= 0 or self.factor < 1 or self.cap < self.first or self.timeout <= 0:
            raise ValueError("need first > 0, factor >= 1, cap >= first, timeout > 0")
        if self.workers < 1:
            raise ValueError("workers must be at least 1")

    def delay(self, reads: int) -> float:
        """Seconds from read number ``reads`` (0: the fence itself) to the next."""
        return float(min(self.cap, self.first * self.factor**reads))

    def schedule(self, count: int) -> list[float]:
        """The first ``count`` read times after the fence, for a node that stays dead."""
        times, at = [], 0.0
        for n in range(count):
            at += self.delay(n)
            times.append(at)
        return times


class FencedReads(Generic[T]):
    """The back-off state of fenced nodes across passes, and their reads in flight.

    ``fault`` is the fence this schedule applies to (the sync's own); nodes
    fenced for another reason, or by a person, are not the sync's business.
    Thread-safe; :meth:`close` stops waiting for reads in flight."""

    def __init__(
        self,
        backoff: FencedBackoff | None = None,
        *,
        fault: str,
        clock: Callable[[], float],
    ) -> None:
        self.backoff = backoff or FencedBackoff()
        self.fault = fault
        self.clock = clock
        self._lock = threading.Lock()
        self._due: dict[str, float] = {}
        self._reads: dict[str, int] = {}
        self._running: dict[str, concurrent.futures.Future[T]] = {}
        self._executor = threads.pool(self.backoff.workers, "bmaas-fenced-read")
        #: (node, clock time) of every background read started, oldest first
        self.started: list[tuple[str, float]] = []

    def split(self, records: Sequence[NodeRecord]) -> tuple[list[NodeRecord], list[NodeRecord]]:
        """``(read now in the pass, fenced)``; nodes no longer fenced are
        forgotten (their next fence starts a fresh schedule)."""
        now = self.clock()
        fenced = [r for r in records if r.fault == self.fault]
        names = {r.name for r in fenced}
        with self._lock:
            for name in [n for n in self._due if n not in names]:
                del self._due[name]
                self._reads.pop(name, None)
            for record in fenced:
                self._due.setdefault(record.name, now + self.backoff.delay(0))
        return [r for r in records if r.fault != self.fault], fenced

    def start_due(self, fenced: Sequence[NodeRecord], read: Callable[[NodeRecord], T]) -> list[str]:
        """Start ``read`` in the background for each fenced node that is due
        and has no read in flight; returns their names. Never blocks on a read."""
        now = self.clock()
        started: list[str] = []
        with self._lock:
            for record in fenced:
                name = record.name
                if name in self._running or now < self._due.get(name, now):
                    continue
                reads = self._reads.get(name, 0) + 1
                self._reads[name] = reads
                self._due[name] = now + self.backoff.delay(reads)
                self._running[name] = self._executor.submit(read, record)
                self.started.append((name, now))
                started.append(name)
        return started

    def collect(self, good: Callable[[T], bool]) -> list[T]:
        """Results of the background reads that have finished (never waits).
        A ``good`` one resets the node's back-off: read every pass again."""
        done: list[T] = []
        with self._lock:
            for name, future in list(self._running.items()):
                if not future.done():
                    continue
                del self._running[name]
                result = future.result()
                done.append(result)
                if good(result) and name in self._due:
                    self._due[name] = self.clock()
                    self._reads[name] = 0
        return done

    def in_flight(self) -> list[str]:
        with self._lock:
            return sorted(self._running)

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the reads in flight to end
        (shutdown, tests); whether all did. A pass never calls this."""
        with self._lock:
            running = list(self._running.values())
        _done, pending = concurrent.futures.wait(running, timeout=timeout)
        return not pending

    def close(self) -> None:
        """Stop: reads not started are dropped; running ones end by their deadline."""
        self._executor.shutdown(wait=False, cancel_futures=True)
