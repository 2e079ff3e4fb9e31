"""Honest interruption: a token the reschedule loop checks, set by whoever
decides to stop (the CLI's SIGINT/SIGTERM handlers, a test, a caller's own
shutdown hook).

Two levels, because "stop" means two things to an operator:

1. **stop starting new work** (the first signal): no request that has not
   started is started, no failed attempt is rescheduled, and every attempt in
   flight runs to its end (success or failure) within its deadline;
2. **roll back what is in flight** (``roll_back``, the second signal): an
   attempt in flight stops at its next step or wait (a settle poll, a ready
   check) with :class:`Interrupted`, and is rolled back like any failed attempt (node
   powered off when it can be, released, ports unbound).

Nothing is ever reported as interrupted that completed: the loop reads the
token only *between* steps, waits and attempts, and a request's result is what
actually happened to it. The token is thread-safe and needs no signals, so
tests drive it directly.
"""

from __future__ import annotations

import signal
import threading

from bmaas.faults import BmaasError

__all__ = ["CancelToken", "Interrupted", "exit_code_for"]


class Interrupted(BmaasError):
    """Work stopped because the caller asked it to (SIGINT, SIGTERM, a
    :class:`CancelToken`). Never retried, never counted against a node."""

    code = "interrupted"
    summary = "interrupted"


class CancelToken:
    """Set once to stop starting new work; set again (or with ``roll_back``)
    to also roll back attempts in flight."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._roll_back = False
        #: the signal that set it (for the exit code), None when set in code
        self.signum: int | None = None
        self.reason = ""

    def cancel(
        self, reason: str = "cancelled", *, roll_back: bool = False, signum: int | None = None
    ) -> None:
        """Stop starting new work; with ``roll_back``, also stop what runs. A
        second call escalates to roll-back (an operator pressing Ctrl-C twice)."""
        with self._lock:
            if self._cancelled.is_set():
                roll_back = True
            else:
                self.reason = reason
                self.signum = signum
            self._cancelled.set()
            self._roll_back = self._roll_back or roll_back

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def roll_back(self) -> bool:
        with self._lock:
            return self._roll_back

    def check(self, *, in_flight: bool = False) -> None:
        """Raise :class:`Interrupted` if the work at hand must stop: new work
        once cancelled, work in flight (``in_flight``) only once rolling back."""
        if not self.cancelled:
            return
        if in_flight and not self.roll_back:
            return
        raise Interrupted(self.reason)

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking early when cancelled; True if cancelled."""
        return self._cancelled.wait(seconds)


def exit_code_for(token: CancelToken) -> int | None:
    """The shell's convention, 128 + signal number: 130 for SIGINT, 143 for
    SIGTERM; None when the token was not set by a signal."""
    if token.signum is None:
        return None
    return 128 + int(token.signum)


#: the signals a CLI command turns into a cancellation
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
