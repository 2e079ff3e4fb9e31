"""SIGINT/SIGTERM for commands that change nodes (``deploy``, ``move``,
``undeploy``, ``maintenance set --evacuate``): honest interruption.

The first signal sets the command's :class:`~bmaas.provision.CancelToken`:
nothing new starts, work in flight finishes within its deadline, and the
command prints what each request ended as, then exits 128 + the signal
(130 for SIGINT, 143 for SIGTERM). A second signal rolls back what is still
in flight at its next step or wait (node powered off and released).
Python's own ``KeyboardInterrupt`` (click's "Aborted!") never fires in
between, so nothing that completed is reported as aborted.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

import click

from bmaas.provision.cancel import STOP_SIGNALS, CancelToken, exit_code_for

__all__ = ["exit_if_interrupted", "interruptible"]


@contextlib.contextmanager
def interruptible(token: CancelToken | None = None) -> Iterator[CancelToken]:
    """Turn SIGINT/SIGTERM into ``token`` (a new one by default) while the
    block runs; the previous handlers come back afterwards."""
    token = token or CancelToken()

    def handler(signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if token.cancelled:
            click.echo(f"{name} again: rolling back what is in flight", err=True)
        else:
            click.echo(
                f"{name}: starting nothing new, finishing what is in flight "
                "(again to roll it back)",
                err=True,
            )
        token.cancel(f"{name} received", signum=signum)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield token
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def exit_if_interrupted(ctx: click.Context, token: CancelToken) -> None:
    """Exit 130/143 when a signal cancelled the command (after its report)."""
    code = exit_code_for(token)
    if code is not None:
        ctx.exit(code)
