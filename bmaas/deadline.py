"""The one time budget: an instant on an injected clock, passed down explicitly.

A :class:`Deadline` is created once, where the user's budget starts (a CLI
command's ``--deadline``, a library call's ``deadline=``, an Ironic conductor
call's configured limit), and handed down as a value::

    command ──▶ request ──▶ attempt ──▶ step ──▶ operation retry ──▶ driver call ──▶ socket
    Deadline.after(600)        .share(cap=120)         .share(cap=bmc_timeout)   .left()

Each layer may take a *share* of what it was given (``share(cap)``: "at most
this many seconds, and never past my parent"), never more than what is left.
The socket reads ``left()`` right before each blocking step, so "total means
total": connect, send and every byte of the answer end by the same instant.

It is immutable (like urllib3's ``Retry``): a share is a new value, and the
parent is unchanged, so a deadline can be passed to threads without locks.
Nothing recovers a deadline by reflection or from an attribute of a driver;
whoever needs one receives it as an argument.

When to use which:

* :meth:`Deadline.after` where a budget starts;
* :meth:`Deadline.share` to give a sub-step its own, smaller bound
  (``cap=`` seconds, or ``fraction=`` of what is left);
* :meth:`Deadline.left` right before a blocking call (a socket timeout);
* :meth:`Deadline.sleep` to wait without crossing the deadline.
"""

from __future__ import annotations

import dataclasses
import math

from bmaas import clock as _clock

__all__ = ["Deadline"]


@dataclasses.dataclass(frozen=True)
class Deadline:
    """An instant ``at`` on ``clock`` by which some work must be over."""

    at: float
    clock: _clock.ClockFn = dataclasses.field(default=_clock.monotonic, compare=False)

    @classmethod
    def after(cls, seconds: float, *, clock: _clock.ClockFn | None = None) -> Deadline:
        """A budget of ``seconds`` starting now (``math.inf`` for "no bound",
        which only tests and explicit ``--deadline 0``-style opt-outs should use)."""
        if seconds < 0 or math.isnan(seconds):
            raise ValueError(f"a deadline needs a non-negative number of seconds, got {seconds!r}")
        clk = clock or _clock.monotonic
        return cls(clk() + seconds, clk)

    def left(self) -> float:
        """Seconds until the deadline, never negative."""
        return max(0.0, self.at - self.clock())

    @property
    def expired(self) -> bool:
        return self.clock() >= self.at

    def share(self, cap: float | None = None, *, fraction: float | None = None) -> Deadline:
        """A deadline for a sub-step: at most ``cap`` seconds from now and/or
        ``fraction`` of what is left, and never later than this one."""
        now = self.clock()
        at = self.at
        if cap is not None:
            if cap < 0:
                raise ValueError(f"cap must be non-negative, got {cap!r}")
            at = min(at, now + cap)
        if fraction is not None:
            if not 0.0 <= fraction <= 1.0:
                raise ValueError(f"fraction must be within [0, 1], got {fraction!r}")
            at = min(at, now + max(0.0, self.at - now) * fraction)
        return Deadline(at, self.clock)

    def allows(self, seconds: float) -> bool:
        """Whether ``seconds`` of work fit before the deadline."""
        return self.clock() + seconds <= self.at

    def sleep(self, seconds: float, sleep: _clock.SleepFn) -> bool:
        """Sleep ``seconds`` or until the deadline, whichever is sooner.
        Returns False (without sleeping) when the deadline has already passed."""
        left = self.left()
        if left <= 0:
            return False
        sleep(min(seconds, left))
        return True

    def __repr__(self) -> str:
        return f"Deadline(left={self.left():.3f}s)"
