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

The handler takes no lock: :func:`bmaas.signals.relayed_signals` hands the
signal to a relay thread that cancels the token and prints the line.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from types import FrameType

import click

from bmaas.provision.cancel import CancelToken, exit_code_for
from bmaas.signals import STOP_SIGNALS, relayed_signals

__all__ = ["exit_if_interrupted", "exit_on_signals", "interruptible", "relayed_signals"]


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


@contextlib.contextmanager
def exit_on_signals() -> Iterator[None]:
    """While the block runs, SIGINT/SIGTERM end the command at once: one line,
    exit 130/143 (``SystemExit`` from the handler, so ``with`` blocks and
    ``finally`` clauses still run). For the part of a command where nothing
    has started yet -- opening the database, connecting to Ironic -- so a
    silent service is not waited out after an operator asked to stop. The
    handler prints with ``os.write`` (no lock: see :mod:`bmaas.signals`)."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        with contextlib.suppress(OSError):
            os.write(2, f"{name}: stopped while connecting; nothing was started\n".encode())
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def exit_if_interrupted(ctx: click.Context, token: CancelToken) -> None:
    """Exit 130/143 when a signal cancelled the command (after its report)."""
    code = exit_code_for(token)
    if code is not None:
        ctx.exit(code)
