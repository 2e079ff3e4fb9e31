"""Deadlines for tests, made where a test's budget starts.

The driver contract, ``bmaas.retry`` and the deploy take a ``Deadline`` as a
required keyword; these make the one a test means, on the clock of what it
drives (a FakeClock driver gets a deadline on its FakeClock):

* :func:`per_call` — one BMC call: the driver's ``bmc_timeout`` from now;
* :func:`per_operation` — one retried operation: the policy's ``total``.

:class:`CpuWait` measures what a deadline-relative bound on a real backend
may not hold against the code under test: the time its thread was ready to
run and given no CPU (``bmaas.lateness``, Linux's run-queue figure).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver
from bmaas.lateness import run_queue_wait
from bmaas.retry import RetryingDriver, RetryLimits

__all__ = [
    "HEALTHY_BMC_TIMEOUT",
    "CpuWait",
    "ask",
    "bound",
    "no_budget",
    "per_call",
    "per_operation",
    "unbounded",
]

T = TypeVar("T")

#: a driver's ``bmc_timeout`` where the test needs the BMC's answer, not its
#: timing: what a healthy call's :func:`per_call` budget is. A tighter bound
#: belongs to tests that wait it out (silence, a delay past it). Starved
#: clients overran tighter ones: at load 25 a first call over TLS
#: (handshake, login, GET, PATCH) took over 2 s, at load 28 an IPMI login
#: to an emulated BMC answering ``auth_fail`` over 1.5 s (issue 50)
HEALTHY_BMC_TIMEOUT = 10.0


class CpuWait:
    """``with CpuWait() as wait:`` around a call; ``wait.seconds`` is how long
    this thread waited for a CPU meanwhile (0 where the system does not say).
    A bound like "ends by its deadline + slack" holds the code only to the
    time it ran: at load 24 a hung Redfish call over TLS with a 0.5 s
    deadline ended after 2.54 s (issue 50's series, 663808e)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start: float | None = None

    def __enter__(self) -> CpuWait:
        self._start = run_queue_wait()
        return self

    def __exit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        end = run_queue_wait()
        if self._start is not None and end is not None:
            self.seconds = end - self._start


def per_call(driver: BMCDriver) -> Deadline:
    """``driver.bmc_timeout`` seconds from now, on the driver's clock."""
    return Deadline.after(driver.bmc_timeout, clock=driver.clock)


def per_operation(of: RetryLimits | RetryingDriver | Any) -> Deadline:
    """``policy.total`` seconds from now, on the policy's clock (``of`` is a
    RetryLimits or anything holding one as ``.limits``)."""
    policy: RetryLimits = of if isinstance(of, RetryLimits) else of.limits
    return Deadline.after(policy.total, clock=policy.clock)


def no_budget(driver: BMCDriver) -> Deadline:
    """No overall bound, on the driver's clock: each BMC request in a
    several-request method still gets ``bmc_timeout``, a power wait its
    ``timeout`` (what a call with no deadline got before deadlines were
    required; for tests of those inner limits)."""
    return Deadline.after(math.inf, clock=driver.clock)


def _for(owner: Any) -> Deadline:
    if isinstance(owner, RetryingDriver):
        return per_operation(owner)
    return per_call(owner)


def ask(method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call a driver's (or RetryingDriver's) bound ``method`` with the
    deadline it would have made for itself before deadlines were required."""
    return method(*args, **kwargs, deadline=_for(getattr(method, "__self__", None)))


def bound(method: Callable[..., T], *args: Any, **kwargs: Any) -> Callable[[], T]:
    """``method`` as a no-argument callable that calls it through :func:`ask`
    (for helpers that take ``driver.get_power_state`` and call it later)."""
    return functools.partial(ask, method, *args, **kwargs)


def unbounded(clock: Any = None) -> Deadline:
    """No bound at all (a sync pass or fleet run a test does not mean to cut
    off); ``clock`` is a FakeClock, a clock function, or None for the real one."""
    fn = getattr(clock, "monotonic", clock)
    return Deadline.after(math.inf, clock=fn)
