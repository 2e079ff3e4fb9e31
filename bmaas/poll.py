"""``poll_until``: ask until there is an answer, sleeping between asks, never
past a :class:`~bmaas.deadline.Deadline`.

Every wait that polls hardware (a deploy's restart, settle and ready steps)
is this loop with its own predicate: the predicate reads the world and says
``PENDING`` or the answer, and raises its own fault when the hardware's
limit (``power_timeout``, ``boot_timeout``...) is passed. Sleeps go through
the injected ``sleep`` (a cancel token's, so a signal ends the wait at once;
a FakeClock's in tests) and are cut to what the deadline has left.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Final, Literal, TypeVar

from bmaas import clock as _clock
from bmaas.deadline import Deadline

__all__ = ["PENDING", "Pending", "poll_until"]

T = TypeVar("T")


class Pending(enum.Enum):
    """The predicate's "not yet" (``None`` can be an answer)."""

    PENDING = "pending"


PENDING: Final = Pending.PENDING


def poll_until(
    predicate: Callable[[], T | Literal[Pending.PENDING]],
    deadline: Deadline,
    interval: float,
    *,
    sleep: _clock.SleepFn,
    spent: Callable[[], BaseException],
    before_wait: Callable[[], object] | None = None,
) -> T:
    """Call ``predicate`` until it returns something other than ``PENDING``
    and return that; between calls run ``before_wait`` (a caller's check: a
    lost lease, a cancelled request, the deadline) and sleep ``interval``
    seconds, or what ``deadline`` has left if less. Raises ``spent()`` when
    the deadline has passed before a wait."""
    while True:
        answer = predicate()
        if answer is not PENDING:
            return answer
        if before_wait is not None:
            before_wait()
        if not deadline.sleep(interval, sleep):
            raise spent()
