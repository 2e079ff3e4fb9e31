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

__all__ = ["room_for_the_store", "say_spent", "spent_before_parsing"]


def say_spent(seconds: float, after_exec: float) -> None:
    """The one line of a command whose ``--deadline`` start-up spent
    (:func:`spent_before_parsing`, :meth:`bmaas.cli.app.App.deadline`); the
    caller ends it, exit 1."""
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


#: commands whose ``--deadline`` counts from ``exec`` and that
#: :func:`spent_before_parsing` judges (the fleet commands; ``sync`` only
#: without ``--interval``, whose passes count from their own start)
EARLY_COMMANDS = frozenset({"power", "boot-device", "vmedia", "sync"})

#: root options of ``bmaas`` that take a value
_ROOT_VALUES = frozenset({"--db"})


def spent_before_parsing(args: list[str], started: float, now: float) -> float | None:
    """The ``--deadline`` of a fleet command (or a one-shot ``sync``) in
    ``args`` if start-up since ``started`` has spent it already, before the
    command's modules are even imported; None otherwise (no such command,
    no ``--deadline`` given, a value click will refuse, or time left).

    Importing a command's modules (the driver, retry and pool code, 0.1 s
    quiet) comes before click can parse its options, and beside four CPU
    burners start-up took up to 2.6 s to the deadline's first check: this
    look comes before that import. Only what the command line says plainly
    is read (``--deadline S`` or ``--deadline=S``, the last one given, as
    click takes it); anything else is left to click and
    :meth:`bmaas.cli.app.App.deadline`."""
    rest = list(args)
    while rest and rest[0].startswith("-"):  # root options: --db X, -v, --debug
        option = rest.pop(0)
        if option in _ROOT_VALUES and rest:
            rest.pop(0)
    if not rest or rest[0] not in EARLY_COMMANDS:
        return None
    if "--help" in rest or "-h" in rest or "--" in rest:
        return None
    if rest[0] == "sync" and any(a == "--interval" or a.startswith("--interval=") for a in rest):
        return None
    text: str | None = None
    for i, arg in enumerate(rest):
        if arg == "--deadline" and i + 1 < len(rest):
            text = rest[i + 1]
        elif arg.startswith("--deadline="):
            text = arg.split("=", 1)[1]
    if text is None or not text.replace(".", "", 1).isdigit() or not text.isascii():
        return None
    seconds = float(text)
    return seconds if now - started > seconds else None
