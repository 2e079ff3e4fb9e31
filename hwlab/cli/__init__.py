"""``hwlab``: run a rack of flaky emulated BMCs on this machine.

One module per family of commands: ``lab`` (up, down, status, fault,
power, profiles), ``scenarios`` (matrix, demo), ``proxy``; ``hwlab bench`` lives
with the benchmarks in :mod:`bmaas.hwlab.harness.bench.cli`.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from bmaas.about import version_option
from bmaas.cliutil import LazyGroup, common_options, run, setup_logging

__all__ = ["COMMANDS", "cli", "main", "parse_rule_arg"]

#: name -> (where the command lives, its short help): imported only when run,
#: so `hwlab status` does not load the emulators, proxies and benchmarks
#: (tests/unit/test_cli_start.py holds the help texts to the commands').
COMMANDS: dict[str, tuple[str, str]] = {
    "bench": (
        "bmaas.hwlab.harness.bench.cli:bench",
        "Performance and resilience benchmarks on a private lab (loopback only).",
    ),
    "demo": (
        "bmaas.hwlab.cli.scenarios:demo",
        "Show bmaas working: bring up a flaky lab, deploy a batch of instances with typed "
        "retries, check nothing leaked, undeploy, tear down.",
    ),
    "down": ("bmaas.hwlab.cli.lab:down", "Stop the lab and everything it started."),
    "effects": (
        "bmaas.hwlab.cli.lab:effects_cmd",
        "List the fault effects: layer, parameters (with defaults), what they do.",
    ),
    "fault": ("bmaas.hwlab.cli.lab:fault", "Add or clear fault rules on a running lab."),
    "matrix": (
        "bmaas.hwlab.cli.scenarios:matrix",
        "Run every fault effect against every protocol through the real bmaas drivers, on a "
        "private lab, and compare with the expected fault classes; then every Redfish one on a "
        "BMC of every vendor shape (a call the shape does not offer, such as virtual media "
        "without a CD slot, is left out).",
    ),
    "power": ("bmaas.hwlab.cli.lab:power", "Turn NODE's hardware on or off behind its BMC's back."),
    "health": (
        "bmaas.hwlab.cli.lab:health",
        "Set the overall health NODE's BMC reports (Redfish Status.Health).",
    ),
    "profiles": ("bmaas.hwlab.cli.lab:profiles_cmd", "List the built-in fault profiles."),
    "proxy": (
        "bmaas.hwlab.cli.proxy:proxy",
        "Put the lab's faults in front of a real BMC, until Ctrl-C.",
    ),
    "status": (
        "bmaas.hwlab.cli.lab:status",
        "Nodes, ports, fault rules in force and effects injected so far.",
    ),
    "vm": (
        "bmaas.hwlab.cli.vm:vm",
        "Small libvirt VMs (TCG) behind stock sushy-tools and virtualbmc.",
    ),
    "up": (
        "bmaas.hwlab.cli.lab:up",
        "Start a lab in the background; return when every BMC is listening.",
    ),
}


def __getattr__(name: str) -> object:
    if name == "parse_rule_arg":  # kept importable from here, loaded on first use
        from bmaas.hwlab.cli.lab import parse_rule_arg

        return parse_rule_arg
    raise AttributeError(name)


@click.group(
    name="hwlab",
    cls=LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@version_option("hwlab")
@common_options
def cli(verbose: int, debug: bool) -> None:
    """Emulated IPMI and Redfish BMCs with seeded, replayable faults.

    \b
    hwlab up --nodes 8 --profile flaky --seed 7   # start a lab in the background
    hwlab status                                  # nodes, ports, rules, effects fired
    hwlab fault add node-003 effect=busy,probability=0.5
    hwlab down                                    # stop it; nothing left listening
    """
    setup_logging(verbose, debug)


def main(argv: Sequence[str] | None = None) -> None:
    run(cli, argv)
