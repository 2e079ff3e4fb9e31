"""A fleet command in a few lines: the flags every one takes, one call that
runs the operation on the chosen nodes, and the result lines.

``@fleet_command(*extra_options)`` gives a command NODE... / ``--all``, its
own options, ``--workers``, ``--deadline``, ``--bmc-timeout``, ``--no-retry``
and ``--json`` (in that order in ``--help``), and calls the function with one
:class:`FleetArgs` and its own options by name. The function then hands
:func:`run_fleet` what to do on one node::

    @power.command("status")
    @fleet_command()
    def power_status(args: FleetArgs) -> None:
        \"\"\"Read the power state of NODE... (or --all).\"\"\"
        run_fleet(args, lambda d, deadline: d.get_power_state(deadline=deadline), label="power")
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from bmaas.cli.app import (
    App,
    Decorator,
    check_selection,
    fleet_run_options,
    node_selection,
    options,
    pass_app,
    print_results,
    progress,
    select_nodes,
    whoami,
)
from bmaas.cli.budget import room_for_the_store
from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver
from bmaas.faults import BMCFault
from bmaas.ops import NodeResult, run_on_nodes

if TYPE_CHECKING:  # loaded by run_fleet once its deadline is made (the retry: tenacity)
    from bmaas.retry import RetryingDriver

__all__ = ["FleetArgs", "Record", "events", "fleet_command", "run_fleet"]

#: what a command writes down once every node is done (history, power states)
Record = Callable[[list[NodeResult[Any]]], None]


@dataclasses.dataclass(frozen=True)
class FleetArgs:
    """The flags every fleet command takes, as given."""

    ctx: click.Context
    app: App
    nodes: tuple[str, ...]
    all_nodes: bool
    workers: int
    deadline: float
    bmc_timeout: float
    no_retry: bool
    as_json: bool


def fleet_command(*extra: Decorator) -> Decorator:
    """The shared fleet flags around a command's own ``extra`` options; the
    function is called as ``fn(FleetArgs, **its_own_options)``."""

    def decorate(fn: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(fn)
        def command(
            ctx: click.Context,
            app: App,
            /,
            nodes: tuple[str, ...],
            all_nodes: bool,
            workers: int,
            deadline: float,
            bmc_timeout: float,
            no_retry: bool,
            as_json: bool,
            **own: Any,
        ) -> None:
            args = FleetArgs(
                ctx, app, nodes, all_nodes, workers, deadline, bmc_timeout, no_retry, as_json
            )
            fn(args, **own)

        wired = pass_app(click.pass_context(command))
        return options(node_selection, *extra, fleet_run_options)(wired)

    return decorate


def run_fleet(
    args: FleetArgs,
    operation: Callable[[RetryingDriver, Deadline], Any],
    *,
    label: str,
    record: Record | None = None,
    describe: Callable[[Any], str] | None = None,
) -> None:
    """Select the nodes, run ``operation(driver, deadline)`` on each through
    the operation retry, print the results, ``record``, exit (0 all ok, 1
    some not). ``--deadline`` seconds bound the whole command."""
    app = args.app
    check_selection(args.nodes, args.all_nodes)  # the command line first, at any budget
    command_deadline = app.deadline(args.deadline)
    room_for_the_store(command_deadline, app.started, args.deadline)
    from bmaas.retry import RetryingDriver
    from bmaas.runtime import Runtime

    store = app.store()
    records = select_nodes(store, args.nodes, args.all_nodes)
    limits = app.retry_limits(no_retry=args.no_retry)

    def retried(driver: BMCDriver) -> Any:
        return operation(RetryingDriver(driver, limits), command_deadline)

    # Spent by start-up and the store's opening: no node will start, so the
    # factory's checks (the key file, unsealing a password: cryptography) are
    # not made either; every node is a SlotTimeout, nothing asked (issue 36)
    factory = _never_built if command_deadline.expired else app.factory(args.bmc_timeout)

    start = time.monotonic()
    # The command's one runtime: the nodes behind one Redfish service keep
    # its one session from the first node to the last; closed within the
    # command's deadline: past it the BMCs expire the sessions (issue 36)
    rt = Runtime(wait=args.bmc_timeout, probe=False)
    try:
        with progress(len(records), label, quiet=args.as_json) as advance:
            results = run_on_nodes(
                records,
                retried,
                factory=factory,
                workers=args.workers,
                on_result=lambda _result: advance(),
                deadline=command_deadline,
                pool=rt.pool,
            )
    finally:
        rt.close(command_deadline)
    if record is not None:
        record(results)
    # A BMC fault is the last error a person will want to see on `node show`.
    errors = {r.node: str(r.error) for r in results if isinstance(r.error, BMCFault)}
    if errors:
        store.health.note_power(errors=errors)
    elapsed = time.monotonic() - start
    shown = {"describe": describe} if describe is not None else {}
    args.ctx.exit(print_results(results, as_json=args.as_json, elapsed=elapsed, **shown))


def _never_built(record: Any) -> BMCDriver:
    """The factory of a command whose deadline passed before its nodes'
    turn: :func:`~bmaas.ops.run_on_nodes` starts no node then."""
    raise AssertionError(f"{record.name}: no driver is built past the deadline")


def events(app: App, kind: str, message: str) -> Record:
    """A ``record`` step that writes one history event per node that succeeded."""

    def record(results: Sequence[NodeResult[Any]]) -> None:
        app.store().nodes.add_events(
            [(r.node, kind, message) for r in results if r.ok], actor=whoami()
        )

    return record
