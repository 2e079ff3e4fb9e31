"""``hwlab``: run a rack of flaky emulated BMCs on this machine.

One module per family of commands: ``lab`` (up, down, status, fault,
power, profiles), ``scenarios`` (matrix, demo), ``proxy``; ``hwlab bench`` lives
with the benchmarks in :mod:`hwlab.harness.bench.cli`.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from bmaas import __version__
from bmaas.cliutil import BmaasGroup, common_options, run, setup_logging
from hwlab.cli.lab import (
    down,
    effects_cmd,
    fault,
    parse_rule_arg,
    power,
    profiles_cmd,
    status,
    up,
)
from hwlab.cli.proxy import proxy
from hwlab.cli.scenarios import demo, matrix
from hwlab.harness.bench.cli import bench

__all__ = ["cli", "main", "parse_rule_arg"]


@click.group(name="hwlab", cls=BmaasGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hwlab")
@common_options
def cli(verbose: int, debug: bool) -> None:
    """Emulated IPMI and Redfish BMCs with seeded, replayable faults.

    \b
    hwlab up --nodes 8 --profile flaky --seed 7   # start a lab in the background
    hwlab status                                  # nodes, ports, rules, effects fired
    hwlab fault add node-003 busy probability=0.5
    hwlab down                                    # stop it; nothing left listening
    """
    setup_logging(verbose, debug)


# -- up / down ------------------------------------------------------------------


for command in (
    up,
    down,
    status,
    profiles_cmd,
    effects_cmd,
    fault,
    power,
    matrix,
    demo,
    proxy,
    bench,
):
    cli.add_command(command)


def main(argv: Sequence[str] | None = None) -> None:
    run(cli, argv)
