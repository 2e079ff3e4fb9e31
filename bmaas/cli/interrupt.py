"""SIGINT/SIGTERM for commands that change nodes (``deploy``, ``move``,
``undeploy``, ``maintenance set --evacuate``): honest interruption.

The first signal sets the command's :class:`~bmaas.provision.CancelToken`:
nothing new starts, work in flight finishes within its deadline, and the
command prints what each request ended as, then exits 128 + the signal
(130 for SIGINT, 143 for SIGTERM). A second signal rolls back what is still
in flight at its next step or wait (node powered off and released).
Python's own ``KeyboardInterrupt`` (click's "Aborted!") never fires in
between, so nothing that completed is reported as aborted.

Every wait of the command sleeps on the token (:meth:`CancelToken.sleeper`),
so the second signal ends a busy backoff, a deploy poll or a rollback's
tear-down wait at once, not after it.

The signal handler itself only writes the signal's number to a pipe
(:func:`relayed_signals`); a relay thread reads it and does the rest. A
Python handler runs in the main thread between two bytecodes, possibly while
that thread holds the very lock the handler would take (``Event.set``, the
token's lock, stderr's buffer): a handler that set an Event hung ``sync
--interval`` for good about one run in seven.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from types import FrameType

import click

from bmaas.provision.cancel import STOP_SIGNALS, CancelToken, exit_code_for

__all__ = ["exit_if_interrupted", "interruptible", "relayed_signals"]


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

    thread = threading.Thread(target=relay, name="bmaas-signals", daemon=True)
    thread.start()
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        os.close(write_fd)  # the relay reads what is left, then the end of the pipe
        thread.join(timeout=5)
        os.close(read_fd)


@contextlib.contextmanager
def interruptible(token: CancelToken | None = None) -> Iterator[CancelToken]:
    """Turn SIGINT/SIGTERM into ``token`` (a new one by default) while the
    block runs; the previous handlers come back afterwards."""
    token = token or CancelToken()

    def on_signal(signum: int) -> None:
        name = signal.Signals(signum).name
        if token.cancelled:
            click.echo(f"{name} again: rolling back what is in flight (waits end now)", err=True)
        else:
            click.echo(
                f"{name}: starting nothing new, finishing what is in flight "
                "(again to roll it back)",
                err=True,
            )
        token.cancel(f"{name} received", signum=signum)

    with relayed_signals(on_signal):
        yield token


def exit_if_interrupted(ctx: click.Context, token: CancelToken) -> None:
    """Exit 130/143 when a signal cancelled the command (after its report)."""
    code = exit_code_for(token)
    if code is not None:
        ctx.exit(code)
