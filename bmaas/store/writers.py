"""One SQLite writer of this process at a time; none passed over for long.

SQLite lets one writer in; the others wait in its busy handler, which
sleeps and tries again (1 ms, 2 ms, ... up to 100 ms apart), queues no one,
and gives up after the busy timeout. Between processes that is what SQLite
offers. Between the threads of one process it is a lottery: a writer that
sleeps 100 ms while the others take the lock in turn may lose every draw.
Issue 50: ``bmaas deploy --workers 96`` at load 29-42 on 2 cores (writes
held 5 ms on average) left one writer waiting the whole 30 s busy timeout,
and 2-6 of 96 requests failed with ``database is locked`` before they
claimed a node (10 runs at load 2-17 lost none).

Threads of one process therefore wait here first, and SQLite's busy
handler is left to order processes. A free turn goes to whoever asks (the
thread that is running: no hand-over to one the CPU has yet to wake, which
on a loaded host cost more than the writes); once the longest waiter has
waited :data:`PATIENCE`, the turn is handed to the writers in line, oldest
first, until none has waited that long (Go's mutex does the same).
"""

from __future__ import annotations

import collections
import threading
import time

__all__ = ["PATIENCE", "WriterQueue"]

#: seconds a writer in line waits before turns are handed to it in order
PATIENCE = 0.5


class _Waiter:
    def __init__(self) -> None:
        self.since = time.monotonic()
        self.woken = threading.Event()
        self.owns = False


class WriterQueue:
    """A lock that anyone running may take while it is free and nobody in
    line has waited :data:`PATIENCE`; after that it is handed over in
    arrival order."""

    def __init__(self, patience: float = PATIENCE) -> None:
        self.patience = patience
        self._guard = threading.Lock()
        self._waiting: collections.deque[_Waiter] = collections.deque()
        self._held = False

    def _starving(self) -> bool:
        return bool(self._waiting) and time.monotonic() - self._waiting[0].since >= self.patience

    def acquire(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for the turn; False if it did not come."""
        end = time.monotonic() + max(0.0, timeout)
        with self._guard:
            if not self._held and not self._starving():
                self._held = True
                return True
            me = _Waiter()
            self._waiting.append(me)
        while True:
            me.woken.wait(max(0.0, end - time.monotonic()))
            with self._guard:
                if me.owns:  # handed over
                    return True
                me.woken.clear()
                first = self._waiting[0] is me
                if not self._held and (first or not self._starving()):
                    self._waiting.remove(me)
                    self._held = True
                    return True
                if time.monotonic() >= end:
                    self._waiting.remove(me)
                    if not self._held and self._waiting:
                        self._waiting[0].woken.set()  # the free turn is the next one's to ask
                    return False

    def release(self) -> None:
        """End this writer's turn: handed to the oldest writer in line when
        it has waited long enough, else free (that writer woken to ask)."""
        with self._guard:
            if self._starving():
                head = self._waiting.popleft()
                head.owns = True
                head.woken.set()
                return
            self._held = False
            if self._waiting:
                self._waiting[0].woken.set()
