"""``hwlab``: run a rack of flaky emulated BMCs on this machine."""

from __future__ import annotations

from collections.abc import Sequence

import click

from bmaas import __version__
from bmaas.cliutil import BmaasGroup, common_options, run, setup_logging

__all__ = ["cli", "main"]


@click.group(name="hwlab", cls=BmaasGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hwlab")
@common_options
def cli(verbose: int, debug: bool) -> None:
    """Emulated IPMI and Redfish BMCs with seeded, replayable faults."""
    setup_logging(verbose, debug)


def main(argv: Sequence[str] | None = None) -> None:
    run(cli, argv)
