"""Signals handled without locks: the handler only writes to a pipe.

A Python signal handler runs in the main thread between two bytecodes,
possibly while that thread holds the very lock the handler would take:
``Event.set`` (the Event's condition lock, held inside ``Event.wait``), a
:class:`~bmaas.provision.CancelToken`'s lock, stderr's buffer. A handler that
set an Event hung ``bmaas sync --interval`` for good about one run in seven.

:func:`relayed_signals` installs a handler that writes the signal's number to
a pipe (``os.write``: no lock) and runs ``on_signal`` on a relay thread that
reads it, where taking locks and printing are safe. The CLI's interruption
(:mod:`bmaas.cli.interrupt`), ``bmaas sync``'s loop and hwlab's daemon use it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from types import FrameType

from bmaas import threads

__all__ = ["STOP_SIGNALS", "relayed_signals"]

#: the signals that ask a command to stop
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def relayed_signals(
    on_signal: Callable[[int], None], signals: Iterable[signal.Signals] = STOP_SIGNALS
) -> Iterator[None]:
    """Call ``on_signal(signum)`` on a relay thread for each of ``signals``
    received while the block runs; the previous handlers come back afterwards.
    The handler takes no lock (it writes one byte to a pipe), so a signal
    never deadlocks the thread it interrupts."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)

    def handler(signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):  # a full pipe: signals are already pending
            os.write(write_fd, bytes([signum]))

    def relay() -> None:
        while data := os.read(read_fd, 64):
            for signum in data:
                on_signal(signum)

    thread = threads.spawn(relay, "bmaas-signals")
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        os.close(write_fd)  # the relay reads what is left, then the end of the pipe
        thread.join(timeout=5)
        os.close(read_fd)
