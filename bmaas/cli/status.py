"""``bmaas status check``: is bmaas ready, and is the fleet (see :mod:`bmaas.status`)."""

from __future__ import annotations

from collections.abc import Sequence

import click

from bmaas.cli.app import (
    App,
    bmc_timeout_option,
    deadline_option,
    json_option,
    options,
    pass_app,
    workers_option,
)
from bmaas.cli.backends import backend_options, chosen_backend
from bmaas.cli.interrupt import exit_on_signals
from bmaas.cliutil import InputFile, echo_rows, emit_json
from bmaas.deadline import Deadline
from bmaas.status import (
    CHECKS,
    DEFAULT_CHECK_DEADLINE,
    INVENTORY_ENV,
    CheckContext,
    CheckResult,
    overall,
    run_checks,
    select,
)

__all__ = ["status"]

_EPILOG = "Checks: " + "; ".join(f"{c.name} ({c.summary})" for c in CHECKS) + "."


@click.group("status")
def status() -> None:
    """Readiness of bmaas and the fleet."""


@status.command("check", epilog=_EPILOG)
@options(
    json_option(),
    click.option(
        "--only",
        multiple=True,
        metavar="NAME[,NAME]",
        help="Run only these checks (repeatable).",
    ),
    deadline_option(
        default=DEFAULT_CHECK_DEADLINE,
        least=1.0,
        help="Seconds the whole check may take, silent BMCs included; each BMC call gets a share.",
    ),
    bmc_timeout_option("The most one BMC call may take (less when --deadline is short)."),
    workers_option(help="BMCs asked at once."),
)
@click.option(
    "--inventory",
    type=InputFile(),
    envvar=INVENTORY_ENV,
    help=f"Compare the enrolled nodes with this inventory file [env {INVENTORY_ENV}].",
)
@backend_options
@pass_app
@click.pass_context
def status_check(
    ctx: click.Context,
    app: App,
    as_json: bool,
    only: Sequence[str],
    deadline: float,
    bmc_timeout: float,
    workers: int,
    inventory: str | None,
) -> None:
    """Check the database, the drivers and every BMC: Success, Warning or
    Failure per check. Exit 0 when all succeed, 1 on any warning, 2 on any
    failure. Reads only: changes nothing in the database or on any BMC."""
    command_deadline = app.deadline(deadline)
    with exit_on_signals():  # a check changes nothing: a signal ends it at once
        _status_check(
            ctx, app, as_json, only, (deadline, command_deadline), bmc_timeout, workers, inventory
        )


def _status_check(
    ctx: click.Context,
    app: App,
    as_json: bool,
    only: Sequence[str],
    limits: tuple[float, Deadline],
    bmc_timeout: float,
    workers: int,
    inventory: str | None,
) -> None:
    deadline, command_deadline = limits  # --deadline's seconds (for the report), and the budget
    # --cloud: Ironic's checks instead of the store's, every API call by the budget
    backend = chosen_backend(deadline=command_deadline)
    chosen = select(only, backend.status_checks() if backend is not None else CHECKS)
    context = CheckContext(
        app.db,
        deadline=command_deadline,
        bmc_timeout=bmc_timeout,
        workers=workers,
        inventory=inventory,
        make_factory=app.make_factory,
        wall_clock=app.clock,
        selected=frozenset(c.name for c in chosen),
    )
    try:
        results = run_checks(context, chosen, debug=bool(ctx.find_root().params.get("debug")))
    finally:
        context.close()
    elapsed = context.clock() - context.started
    worst = overall(results)
    if as_json:
        emit_json(
            {
                "result": str(worst),
                "exit_code": int(worst),
                "elapsed": round(elapsed, 3),
                "deadline": deadline,
                "checks": [r.to_dict() for r in results],
            }
        )
    else:
        print_table(results)
        counts = {label: sum(str(r.result) == label for r in results) for label in _LABELS}
        click.echo(
            f"{len(results)} check(s): "
            + ", ".join(f"{n} {label.lower()}" for label, n in counts.items())
            + f" in {elapsed:.1f}s (deadline {deadline:g}s)",
            err=True,
        )
    ctx.exit(int(worst))


_LABELS = ("Success", "Warning", "Failure")


def print_table(results: Sequence[CheckResult]) -> None:
    """CHECK, RESULT, DETAILS; a check's further details on lines of their own,
    under DETAILS, so the table stays greppable by check name."""
    name_width = max([len("check"), *(len(r.name) for r in results)])
    result_width = max(len(label) for label in _LABELS)
    indent = " " * (name_width + result_width + 4)
    rows = [f"{'CHECK':<{name_width}}  {'RESULT':<{result_width}}  DETAILS"]
    for r in results:
        details = list(r.details) or ["-"]
        rows.append(f"{r.name:<{name_width}}  {r.result!s:<{result_width}}  {details[0]}")
        rows.extend(f"{indent}{line}" for line in details[1:])
    echo_rows(rows)
