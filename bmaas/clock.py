"""Time, injected.

Everything that waits or measures takes a ``clock`` (seconds, monotonic) and a
``sleep`` callable so tests can swap in :class:`bmaas.fakes.clock.FakeClock` and
assert the exact sleep sequence without ever sleeping.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

__all__ = ["ClockFn", "SleepFn", "monotonic", "process_started", "sleep"]

ClockFn = Callable[[], float]
SleepFn = Callable[[float], None]

monotonic: ClockFn = time.monotonic
sleep: SleepFn = time.sleep


#: where Linux says when this process started (field 22, ``starttime``, in
#: clock ticks since boot: proc(5))
_PROC_STAT = "/proc/self/stat"

#: seconds a process's start may lie before its first Python line and still
#: be this command's start. The kernel's start is the *fork*: a shell that ran
#: other commands and then exec'd this one in place (``bash -c 'a; b; bmaas
#: ...'`` does so for its last command; a script's ``exec bmaas``) started
#: long before, and counting from it spent the command's budget on commands
#: that were not its own (a docs block's ``bmaas status check`` once began
#: 28 s into its 30 s). An interpreter's own start-up took 0.73 s at most
#: with 8 CPU burners on 2 cores.
STARTUP_LIMIT = 5.0


def process_started(*, fallback: float, stat: str = _PROC_STAT) -> float:
    """The instant this process started (its ``exec``), on :data:`monotonic`'s
    clock: where a command's budget begins, so the interpreter's start-up and
    the imports before ``main()`` are inside it, not before it.

    On Linux: ``/proc/self/stat``'s ``starttime`` (clock ticks since boot,
    10 ms at the usual 100 Hz, rounded down, so the start is never later
    than the truth) against ``CLOCK_BOOTTIME``, the clock it counts on; the
    process's age, taken from ``time.monotonic()``. ``fork`` without
    ``exec`` (a shell's subshell) counts from the fork: earlier, never
    later; a start more than :data:`STARTUP_LIMIT` before ``fallback`` is
    another command's (a shell that exec'd this one in place), so
    ``fallback`` is taken. Elsewhere, or when the file cannot be read: ``fallback`` (the
    caller's earliest instant of its own, e.g. when its entry module was
    imported), which misses the interpreter's start-up. Never later than
    ``fallback``. No psutil: it is not a dependency of bmaas's core, and
    its ``create_time()`` is wall-clock time, which jumps."""
    try:
        with open(stat, "rb") as file:
            raw = file.read()
        # the command name (field 2) may hold spaces and ")": split after the last
        fields = raw[raw.rindex(b")") + 2 :].split()
        ticks = int(fields[19])
        hertz = os.sysconf("SC_CLK_TCK")
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / hertz
    except (OSError, ValueError, IndexError, AttributeError):
        return fallback
    started = time.monotonic() - max(0.0, age)
    if fallback - started > STARTUP_LIMIT:
        return fallback  # exec'd in place by a process that began earlier
    return min(fallback, started)
