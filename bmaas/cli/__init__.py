"""``bmaas``: the operator's command line.

One module per command group (``nodes``, ``power``, ``maintenance``,
``status``); this one builds the root group. The database is ``--db`` (a path or SQLAlchemy
URL), else ``BMAAS_DB``, else a per-user SQLite file.

Exit codes, for every command: 0 success; 1 the command ran but some nodes
failed (or are not ready); 2 it could not run (bad input, unknown node,
database problem) - one ``error:`` line on stderr, ``--debug`` for a traceback.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from bmaas import __version__
from bmaas.cli.app import App
from bmaas.cli.deploy import deploy, instance, move, undeploy
from bmaas.cli.maintenance import maintenance, sync
from bmaas.cli.nodes import db, enroll, node
from bmaas.cli.power import boot_device, power, vmedia
from bmaas.cli.status import status
from bmaas.cliutil import BmaasGroup, common_options, emit_json, run, setup_logging
from bmaas.registry import available_drivers

__all__ = ["App", "cli", "main"]


@click.group(name="bmaas", cls=BmaasGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="bmaas")
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
    setup_logging(verbose, debug)
    app = ctx.ensure_object(App)
    if db is not None:
        app.db = db
    ctx.call_on_close(app.close)


@cli.command("drivers")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def drivers_cmd(as_json: bool) -> None:
    """List installed BMC drivers (the bmaas.drivers entry points)."""
    names = available_drivers()
    if as_json:
        emit_json(names)
    else:
        for name in names:
            click.echo(name)


for command in (
    enroll,
    node,
    power,
    boot_device,
    vmedia,
    maintenance,
    sync,
    db,
    deploy,
    undeploy,
    move,
    instance,
    status,
):
    cli.add_command(command)


def main(argv: Sequence[str] | None = None) -> None:
    run(cli, argv)
