"""Whether a command's ``--deadline`` leaves room to load the database layer.

Loading the store (SQLAlchemy and bmaas's schema) is the heaviest thing a
command does before it can ask a BMC, and no deadline interrupts an import:
0.17-0.39 s on this 2-core box at load 1-9, about what all of start-up
before it took (interpreter, click, bmaas's command modules: 0.15-0.25 s
quiet), and two to three times that beside four CPU burners. A BMC is asked
only after a driver is built, which first imports pyghmi or sushy (about as
long again). A command whose start-up took more than half its budget would
spend the rest, and then some, in those imports, only to find its deadline
gone and every node not started: its end came up to a second past the
deadline (issue 36, "worst end-to-end overrun <= 1 s").
:func:`room_for_the_store` ends it before the import instead, as
:meth:`bmaas.cli.app.App.deadline` ends a command whose start-up spent the
whole budget: one ``error:`` line, exit 1, nothing asked.

The estimate is the start-up's own duration, on the same machine under the
same load: with less left than that, the store and a driver cannot both be
loaded in time, so no BMC would have been asked anyway. It applies only to
the ``bmaas`` process's first deadline (counted from ``exec``), and only
while the database layer is not loaded yet.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import click

from bmaas.cliutil import EXIT_FAILURE
from bmaas.deadline import Deadline

__all__ = ["room_for_the_store", "say_spent"]


def say_spent(seconds: float, after_exec: float) -> None:
    """The one line of a command whose ``--deadline`` start-up spent
    (:meth:`bmaas.cli.app.App.deadline`); the caller ends it, exit 1."""
    click.echo(
        f"error: the {seconds:g} s --deadline was spent by start-up "
        f"({after_exec:.2f} s after exec); nothing was asked",
        err=True,
    )


def _store_loaded() -> bool:
    return "sqlalchemy" in sys.modules


def room_for_the_store(
    deadline: Deadline,
    started: float | None,
    seconds: float,
    *,
    loaded: Callable[[], bool] = _store_loaded,
) -> None:
    """End the command (one line, exit 1) if what ``deadline`` has left is
    less than the start-up took since ``started`` (``exec``, on the
    deadline's clock; None: not a ``bmaas`` process's own start, nothing to
    judge by) while the database layer is still to be loaded."""
    if started is None or loaded():
        return
    now = deadline.clock()
    spent = max(0.0, now - started)
    left = deadline.left()
    if left >= spent:
        return
    click.echo(
        f"error: the {seconds:g} s --deadline would pass while the database loads "
        f"({spent:.2f} s after exec, {max(0.0, left):.2f} s left; it and a driver take "
        "longer to load than start-up did); nothing was asked",
        err=True,
    )
    raise click.exceptions.Exit(EXIT_FAILURE)
