"""``bmaas``: the operator's command line."""

from __future__ import annotations

from collections.abc import Sequence

import click

from bmaas import __version__
from bmaas.cliutil import BmaasGroup, common_options, emit_json, run, setup_logging
from bmaas.registry import available_drivers

__all__ = ["cli", "main"]


@click.group(name="bmaas", cls=BmaasGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="bmaas")
@common_options
def cli(verbose: int, debug: bool) -> None:
    """Drive baremetal servers through their BMCs (IPMI, Redfish) with typed
    faults and client-side retry."""
    setup_logging(verbose, debug)


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


def main(argv: Sequence[str] | None = None) -> None:
    run(cli, argv)
