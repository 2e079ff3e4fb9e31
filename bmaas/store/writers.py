"""One SQLite writer of this process at a time, in the order they came.

SQLite lets one writer in; the others wait in its busy handler, which
sleeps and tries again (1 ms, 2 ms, ... up to 100 ms apart), queues no one,
and gives up after the busy timeout. Between processes that is what SQLite
offers. Between the threads of one process it is a lottery: a writer that
sleeps 100 ms while the others take the lock in turn may lose every draw.
Issue 50: ``bmaas deploy --workers 96`` at load 29-37 on 2 cores, each
write held longer by a thread waiting for a CPU, failed 2-6 of 96 requests
with ``database is locked`` before they claimed a node (10 runs at load
2-17 lost none). Threads of one process therefore queue here first, first
come first served, and the lock is handed to the next in line when the
writer before it ends; SQLite's busy handler is left to order processes.
"""

from __future__ import annotations

import collections
import threading

__all__ = ["WriterQueue"]


class WriterQueue:
    """A lock handed over in arrival order (no barging: a writer that ends
    and writes again goes to the back of the line)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._waiting: collections.deque[threading.Event] = collections.deque()
        self._held = False

    def acquire(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for the turn; False if it did not come."""
        with self._guard:
            if not self._held:
                self._held = True
                return True
            turn = threading.Event()
            self._waiting.append(turn)
        if turn.wait(max(0.0, timeout)):
            return True
        with self._guard:
            if turn.is_set():  # handed over as the wait ended: the turn is ours
                return True
            self._waiting.remove(turn)
            return False

    def release(self) -> None:
        """End this writer's turn: the next in line has it, else nobody."""
        with self._guard:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._held = False
