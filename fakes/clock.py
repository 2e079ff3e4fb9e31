"""A manual clock for tests and simulations: time moves only when told to.

``sleep`` advances the clock instead of blocking and records every interval,
so a test can assert the exact sleep sequence of a retry policy.
"""

from __future__ import annotations

import threading

__all__ = ["FakeClock"]


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        #: every interval passed to :meth:`sleep`, in order
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    __call__ = monotonic

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self._now += max(0.0, seconds)

    def advance(self, seconds: float) -> None:
        """Let time pass without recording a sleep (the world moved, not us)."""
        with self._lock:
            self._now += max(0.0, seconds)
