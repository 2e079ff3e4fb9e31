"""``hwlab matrix`` and ``hwlab demo``: runs on a private lab that prove something."""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from bmaas.cliutil import InputProblems, Seconds, WholeNumber, emit_json
from bmaas.hwlab.cli.common import parse_seed

__all__ = ["demo", "matrix"]


@click.command()
@click.option(
    "--protocol",
    "protocols",
    multiple=True,
    type=click.Choice(["ipmi", "redfish"]),
    help="Protocols to test (repeatable; default both).",
)
@click.option("--only", multiple=True, help="Run only these scenarios (repeatable).")
@click.option(
    "--shape",
    "shapes",
    multiple=True,
    help="Vendor shapes whose Redfish BMC runs every Redfish scenario too "
    "(repeatable; default every shape; 'none': no shape).",
)
@click.option(
    "--shape-workers",
    type=WholeNumber(1, 32),
    default=4,
    show_default=True,
    help="Shapes run side by side.",
)
@click.option(
    "--deadline",
    type=Seconds(),
    default=1.0,
    show_default=True,
    help="Driver deadline per call, seconds.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def matrix(
    protocols: Sequence[str],
    only: Sequence[str],
    shapes: Sequence[str],
    shape_workers: int,
    deadline: float,
    as_json: bool,
) -> None:
    """Run every fault effect against every protocol through the real bmaas
    drivers, on a private lab, and compare with the expected fault classes;
    then every Redfish one on a BMC of every vendor shape (a call the shape
    does not offer, such as virtual media without a CD slot, is left out).

    Exits 1 on any mismatch or UnclassifiedFault; 2 when something it needs
    is missing or wrong (packages, drivers, loopback sockets, BMAAS_*
    settings, --only names), every problem one line, before anything starts.
    """
    from bmaas.hwlab.harness import preflight
    from bmaas.hwlab.harness.matrix import SCENARIOS, matrix_spec, run_matrix
    from bmaas.hwlab.lab import Lab
    from bmaas.hwlab.redfish.shapes import SHAPES

    protocols = list(dict.fromkeys(protocols)) or ["ipmi", "redfish"]
    # every problem at once, before any lab starts (exit 2, one line each)
    problems = preflight.matrix_problems(protocols, only, shapes)
    if problems:
        raise InputProblems(problems)
    chosen = [s for s in SCENARIOS if not only or s.name in only]
    if "redfish" not in protocols or list(shapes) == ["none"]:
        shaped: list[str] = []
    else:
        shaped = list(dict.fromkeys(shapes)) or list(SHAPES)

    def progress(result: Any) -> None:
        if not as_json:
            mark = "ok  " if result.passed else "FAIL"
            outcome = f"  retried: {result.outcome}" if result.outcome_expected else ""
            where = f"{result.protocol}/{result.shape}" if result.shape else result.protocol
            click.echo(
                f"{mark} {result.scenario:<20} {where:<24} {result.seen:<22} "
                f"{result.seconds:6.2f}s{outcome}"
                + ("" if result.passed else f"  expected {result.expected}")
                + (
                    f" / retried {result.outcome_expected}"
                    if result.outcome != result.outcome_expected
                    else ""
                )
            )

    with (
        tempfile.TemporaryDirectory(prefix="hwlab-matrix-") as tmp,
        Lab(matrix_spec(protocols, shaped), tmp) as lab,
    ):
        results = run_matrix(
            lab,
            protocols=protocols,
            scenarios=chosen,
            deadline_s=deadline,
            progress=progress,
            shapes=shaped,
            workers=shape_workers,
        )
    failed = [r for r in results if not r.passed]
    unclassified = [r for r in results if r.unclassified]
    if as_json:
        emit_json(
            {
                "results": [r.to_dict() for r in results],
                "failed": len(failed),
                "unclassified": len(unclassified),
            }
        )
    else:
        click.echo(
            f"{len(results) - len(failed)}/{len(results)} passed, {len(unclassified)} unclassified"
        )
    if failed or unclassified:
        sys.exit(1)


@click.command()
@click.option(
    "--nodes",
    "-n",
    type=WholeNumber(2, 500),
    default=12,
    show_default=True,
    help="Nodes in the demo lab.",
)
@click.option(
    "--requests",
    "-r",
    type=WholeNumber(1, 500),
    default=8,
    show_default=True,
    help="Instances to deploy.",
)
@click.option(
    "--protocols",
    type=click.Choice(["mixed", "ipmi", "redfish", "both"]),
    default="mixed",
    show_default=True,
    help="BMC protocols of the lab's nodes.",
)
@click.option(
    "--profile",
    default="flaky,dead-bmc,brownout",
    show_default=True,
    help="Fault profile(s) of the lab.",
)
@click.option("--seed", default="7", show_default=True, help="Seed: the same seed, the same run.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--workdir",
    # checked with everything else before the demo starts (hwlab.harness.preflight),
    # not by click, which would stop at this one problem
    type=click.Path(path_type=Path),
    default=None,
    help="Keep the lab state and database here (default: a temporary folder).",
)
def demo(
    nodes: int,
    requests: int,
    protocols: str,
    profile: str,
    seed: str,
    as_json: bool,
    workdir: Path | None,
) -> None:
    """Show bmaas working: bring up a flaky lab, deploy a batch of instances
    with typed retries, check nothing leaked, undeploy, tear down.

    Exits 1 if anything leaked or no request succeeded; 2 when something it
    needs is missing or wrong (packages, drivers, loopback sockets, BMAAS_*
    settings, --profile names, --workdir), every problem one line, before
    anything starts.
    """
    from bmaas.hwlab.harness import preflight

    # every problem at once, before any lab starts (exit 2, one line each)
    problems = preflight.demo_problems(protocols, profile, workdir)
    if problems:
        raise InputProblems(problems)
    from bmaas.hwlab.harness.demo import DemoOptions, run_demo

    options = DemoOptions(
        nodes=nodes,
        requests=requests,
        protocols=protocols,
        profile=profile,
        seed=parse_seed(seed) or 0,
    )
    if not as_json:
        click.echo(
            f"hwlab demo: {nodes} {protocols} nodes, profile {profile}, seed {seed}; "
            f"deploying {requests} instances..."
        )

    def show(result: Any) -> None:
        if as_json:
            return
        tried = ", ".join(f"{a.node} {a.fault_class}" for a in result.attempts if not a.succeeded)
        node = getattr(result, "node", None)
        line = f"  {result.request}: " + (f"active on {node}" if node else "FAILED")
        click.echo(line + (f" (after {tried})" if tried else ""))

    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hwlab-demo-")))
        workdir.mkdir(parents=True, exist_ok=True)
        summary = run_demo(options, workdir, on_result=show)
    if as_json:
        emit_json(summary.to_dict())
    else:
        _print_summary(summary)
    if not summary.clean or summary.succeeded == 0:
        sys.exit(1)


def _print_summary(summary: Any) -> None:
    faults = ", ".join(f"{k} x{v}" for k, v in summary.faults_by_class.items()) or "none"
    rows = [
        ("requests", summary.requests),
        ("succeeded", summary.succeeded),
        ("failed", summary.failed),
        ("attempts (all nodes tried)", summary.attempts),
        ("faults seen, by class", faults),
        ("nodes fenced by the system", ", ".join(summary.maintenance) or "none"),
        (
            "time to active p50 / max",
            f"{summary.time_to_active_p50}s / {summary.time_to_active_max}s",
        ),
        ("leaked allocations", summary.leaked_allocations),
        ("leaked ports", summary.leaked_ports),
        ("left after undeploy", summary.leaked_after_undeploy),
        ("total time", f"{summary.elapsed}s"),
    ]
    table = Table(title="hwlab demo summary", show_header=False)
    table.add_column("what")
    table.add_column("value")
    for what, value in rows:
        table.add_row(what, str(value))
    Console().print(table)
