"""``bmaas``: the operator's command line.

One module per command group (``nodes``, ``power``, ``maintenance``, ``sync``,
``status``); this one builds the root group. The database is ``--db`` (a path or SQLAlchemy
URL), else ``BMAAS_DB``, else a per-user SQLite file.

Exit codes, for every command: 0 success; 1 the command ran but some nodes
failed (or are not ready); 2 it could not run (bad input, unknown node,
database problem) - one ``error:`` line on stderr, ``--debug`` for a traceback.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from bmaas.about import version_option
from bmaas.cliutil import LazyGroup, common_options, emit_json, run, setup_logging

if TYPE_CHECKING:
    from bmaas.cli.app import App

#: when this module was imported: where a command's budget starts if the
#: process's own start cannot be read (bmaas.clock.process_started's fallback;
#: it misses the interpreter's start-up and the imports before it)
_IMPORTED = time.monotonic()

__all__ = ["COMMANDS", "App", "cli", "main"]

#: name -> (where the command lives, its short help). Imported only when run,
#: so `bmaas --help` starts without SQLAlchemy, rich or any driver
#: (tests/unit/test_cli_start.py holds the help texts to the commands').
COMMANDS: dict[str, tuple[str, str]] = {
    "bios": ("bmaas.cli.lifecycle:bios", "Read or change BIOS settings, verified after the reset."),
    "bmc": ("bmaas.cli.updates:bmc", "The BMCs themselves: reset, and wait for their return."),
    "boot-device": ("bmaas.cli.power:boot_device", "Read or set the next boot device."),
    "db": ("bmaas.cli.nodes:db", "The state database: schema revision and upgrades."),
    "deploy": (
        "bmaas.cli.deploy:deploy",
        "Deploy COUNT instances, moving each to another node when one fails.",
    ),
    "enroll": (
        "bmaas.cli.nodes:enroll",
        "Enroll (or update) the nodes and networks in an inventory FILE.",
    ),
    "firmware": (
        "bmaas.cli.lifecycle:firmware",
        "The firmware images the BMCs report, and their updates.",
    ),
    "instance": ("bmaas.cli.deploy:instance", "Deployed instances."),
    "inventory": (
        "bmaas.cli.lifecycle:inventory",
        "Out-of-band inventory: CPUs, memory, NICs with MACs, disks, firmware.",
    ),
    "maintenance": (
        "bmaas.cli.maintenance:maintenance",
        "Take nodes out of service and back, and see when they are free.",
    ),
    "move": ("bmaas.cli.deploy:move", "Re-deploy INSTANCE onto another node."),
    "node": ("bmaas.cli.nodes:node", "Enrolled nodes: list and show."),
    "power": ("bmaas.cli.power:power", "Read or change power state."),
    "status": ("bmaas.cli.status:status", "Readiness of bmaas and the fleet."),
    "sync": (
        "bmaas.cli.sync:sync",
        "Read every node's power state and record it, with hysteresis.",
    ),
    "undeploy": (
        "bmaas.cli.deploy:undeploy",
        "Power off INSTANCE...'s nodes, eject media, release nodes and ports.",
    ),
    "vmedia": ("bmaas.cli.power:vmedia", "Insert or eject virtual media (a CD image by URL)."),
}


def __getattr__(name: str) -> object:
    # `from bmaas.cli import App` keeps working without importing the store eagerly.
    if name == "App":
        from bmaas.cli.app import App

        return App
    raise AttributeError(name)


@click.group(
    name="bmaas",
    cls=LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@version_option("bmaas")
@click.option(
    "--db",
    metavar="PATH|URL",
    help="State database: a SQLite path or SQLAlchemy URL (default: $BMAAS_DB, "
    "else a per-user file).",
)
@common_options
@click.pass_context
def cli(ctx: click.Context, db: str | None, verbose: int, debug: bool) -> None:
    """Drive baremetal servers through their BMCs (IPMI, Redfish) with typed
    faults and client-side retry."""
    from bmaas.cli import dburl
    from bmaas.cli.app import App
    from bmaas.cliutil import InputProblems
    from bmaas.gate import environment_problems

    setup_logging(verbose, debug)
    problems = environment_problems()
    wrong_db = dburl.problem(db)  # its shape only: the store judges the rest when it opens
    if wrong_db is not None:
        problems.append(wrong_db)
    if problems:  # before any work: exit 2, a line each, not a line per node later
        raise InputProblems(problems)
    app = ctx.ensure_object(App)
    if db is not None:
        app.db = db
    if app.started is None:
        app.started = _started  # only under main(): the command's budget starts at exec
    ctx.call_on_close(app.close)


@cli.command("drivers")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def drivers_cmd(as_json: bool) -> None:
    """List installed BMC drivers (the bmaas.drivers entry points)."""
    from bmaas.registry import available_drivers

    names = available_drivers()
    if as_json:
        emit_json(names)
    else:
        for name in names:
            click.echo(name)


#: the process's start on the monotonic clock while :func:`main` runs (None
#: otherwise: a command run in-process by a test or a library counts its
#: budget from when it makes its deadline)
_started: float | None = None


def main(argv: Sequence[str] | None = None) -> None:
    """The ``bmaas`` console script. Every command's ``--deadline`` counts
    from the process's ``exec`` (:func:`bmaas.clock.process_started`; else
    from when this module was imported), not from when the command's code
    began: start-up and the store's opening are inside the budget. The
    deadline is first looked at (:meth:`bmaas.cli.app.App.deadline`) once
    click has read the whole command line, and ``--db``'s shape is checked
    before it: bad input is exit 2 with its own line at any budget, never
    "spent by start-up" (issue 44).

    As the console script (no ``argv``: it reads ``sys.argv``), the process
    leaves as soon as the command is done (:func:`bmaas.leave.leave`):
    output flushed, store closed, no joining of BMC threads still out and
    no interpreter teardown, which took 0.2 s quiet and up to 0.6 s under
    load, all past the deadline. Given ``argv`` (code calling it
    in-process), it raises ``SystemExit`` as click does."""
    global _started  # one process, one start; reset on the way out
    from bmaas.clock import process_started

    _started = process_started(fallback=_IMPORTED)
    try:
        run(cli, argv)
    except SystemExit as done:
        code = 0 if done.code is None else done.code
        if argv is None and isinstance(code, int):
            from bmaas.leave import leave

            leave(code)  # returns only if something must still be waited for
        raise
    else:
        if argv is None:
            from bmaas.leave import leave

            leave(0)
    finally:
        _started = None
