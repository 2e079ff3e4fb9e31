"""Time, injected.

Everything that waits or measures takes a ``clock`` (seconds, monotonic) and a
``sleep`` callable so tests can swap in :class:`bmaas.fakes.clock.FakeClock` and
assert the exact sleep sequence without ever sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["ClockFn", "SleepFn", "monotonic", "sleep"]

ClockFn = Callable[[], float]
SleepFn = Callable[[float], None]

monotonic: ClockFn = time.monotonic
sleep: SleepFn = time.sleep
