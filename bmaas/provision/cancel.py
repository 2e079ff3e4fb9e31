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

**Waits are interruptible.** Every sleep in a command's path (busy backoff in
:mod:`bmaas.retry`, the deploy's power and settle polls, Ironic's provision
polls, a rollback's tear-down wait) is :meth:`CancelToken.sleeper`: it waits
on the token, not on the clock, so it ends the moment the level that concerns
it is reached, with :class:`Interrupted`. Waits *in flight* end on roll back
(the second signal) -- including the waits of a rollback already under way,
which then stops waiting and says what it left; waits *before new work*
(between passes, before a request starts) end on the first. Tests inject
``wait=`` (a fake clock's) and assert the sleep sequence, never sleeping::

    token = CancelToken()
    limits = RetryLimits(sleep=token.sleeper())   # busy backoff ends on roll back
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

from bmaas.faults import BmaasError

__all__ = ["CancelToken", "Interrupted", "InterruptibleSleep", "WaitFn", "exit_code_for"]

#: waits on an event for up to some seconds; True when it was set (``Event.wait``)
WaitFn = Callable[[threading.Event, float], bool]


def _event_wait(event: threading.Event, seconds: float) -> bool:
    return event.wait(seconds)


class Interrupted(BmaasError):
    """Work stopped because the caller asked it to (SIGINT, SIGTERM, a
    :class:`CancelToken`). Never retried, never counted against a node."""

    code = "interrupted"
    summary = "interrupted"


class CancelToken:
    """Set once to stop starting new work; set again (or with ``roll_back``)
    to also roll back attempts in flight."""

    def __init__(self, *, wait: WaitFn | None = None) -> None:
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._rolling_back = threading.Event()
        #: how a wait blocks: ``Event.wait`` (tests: a fake clock's)
        self._wait = wait or _event_wait
        self._roll_back = False
        #: the signal that set it (for the exit code), None when set in code
        self.signum: int | None = None
        self.reason = ""
        self._callbacks: list[Callable[[], object]] = []

    def on_cancel(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` (no arguments) when the token is first cancelled,
        in the canceller's thread (at once if it already is): for a waiter
        that blocks on something other than :attr:`event` -- a condition
        variable -- and would otherwise have to wake in slices to look."""
        with self._lock:
            if not self._cancelled.is_set():
                self._callbacks.append(callback)
                return
        callback()

    def cancel(
        self, reason: str = "cancelled", *, roll_back: bool = False, signum: int | None = None
    ) -> None:
        """Stop starting new work; with ``roll_back``, also stop what runs. A
        second call escalates to roll-back (an operator pressing Ctrl-C twice)."""
        with self._lock:
            if self._cancelled.is_set():
                roll_back = True
                callbacks = []
            else:
                self.reason = reason
                self.signum = signum
                callbacks, self._callbacks = self._callbacks, []
            self._roll_back = self._roll_back or roll_back
            self._cancelled.set()  # under the lock: on_cancel sees it or is called here
        if roll_back:
            self._rolling_back.set()
        for callback in callbacks:
            callback()

    @property
    def event(self) -> threading.Event:
        """Set once cancelled: for loops that wait on an Event (``bmaas sync``)."""
        return self._cancelled

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

    def wait(self, seconds: float, *, in_flight: bool = False) -> bool:
        """Wait up to ``seconds``, ending at once when the token reaches the
        level that concerns the waiter: cancelled (a wait before new work),
        or rolling back (``in_flight``). True when it ended that way."""
        event = self._rolling_back if in_flight else self._cancelled
        if event.is_set():
            return True
        return self._wait(event, max(0.0, seconds))

    def sleeper(self, *, in_flight: bool = True) -> InterruptibleSleep:
        """A :data:`~bmaas.clock.SleepFn` for the command's path: sleeps like
        ``time.sleep`` and raises :class:`Interrupted` the moment this token
        rolls back (``in_flight``) or is cancelled (not ``in_flight``)."""
        return InterruptibleSleep(self, in_flight=in_flight)


@dataclasses.dataclass(frozen=True)
class InterruptibleSleep:
    """``sleep(seconds)`` that a :class:`CancelToken` cuts short: the wait
    primitive every sleep in a command's path uses (see the module docstring)."""

    token: CancelToken
    in_flight: bool = True

    def __call__(self, seconds: float) -> None:
        if self.token.wait(seconds, in_flight=self.in_flight):
            raise Interrupted(f"{self.token.reason}: stopped waiting")


def exit_code_for(token: CancelToken) -> int | None:
    """The shell's convention, 128 + signal number: 130 for SIGINT, 143 for
    SIGTERM; None when the token was not set by a signal."""
    if token.signum is None:
        return None
    return 128 + int(token.signum)
