"""``bmaas power``, ``bmaas boot-device`` and ``bmaas vmedia``: one BMC
operation over many nodes in parallel, a result line per node.

Every node's calls go through the operation retry
(:class:`~bmaas.retry.RetryingDriver`): a BMC that is busy for a moment is
asked again, a reset is never resent blindly (``power reboot`` is the safe
:func:`~bmaas.retry.reboot`). ``--no-retry`` makes one attempt per call, to
see each BMC's raw first answer. A node's line is ``ok`` or the policy
table's fleet word for the fault left after the retries (``FAIL``, ``BUSY``,
``AUTH``, ``UNSUPPORTED``, ...).

Exit codes: 0 every node ended fine after retries, 1 some did not (their
lines say why), 2 the command could not run (unknown node, bad arguments,
database).

Time: ``--deadline`` is the whole command. Its :class:`~bmaas.deadline.Deadline`
is made once, when the command starts, and handed to every node's operation
(retries and waits included); each BMC call gets a share of it of at most
``--bmc-timeout``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import click

from bmaas.cli.app import (
    App,
    describe_value,
    fleet_options,
    node_selection,
    pass_app,
    print_results,
    progress,
    retry_option,
    select_nodes,
    whoami,
)
from bmaas.cliutil import Seconds
from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver, BootDevice, BootSetting, PowerAction, PowerState
from bmaas.faults import BMCFault
from bmaas.ops import NodeResult, run_on_nodes
from bmaas.pool import DriverPool
from bmaas.retry import RetryingDriver
from bmaas.secrets import mask_url

__all__ = ["boot_device", "power", "vmedia"]


def _json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON, no progress bar.")(fn)


def _run(
    ctx: click.Context,
    app: App,
    nodes: Sequence[str],
    all_nodes: bool,
    operation: Callable[[RetryingDriver, Deadline], Any],
    *,
    label: str,
    workers: int,
    deadline: float,
    bmc_timeout: float,
    as_json: bool,
    no_retry: bool,
    record: Callable[[list[NodeResult[Any]]], None] | None = None,
) -> None:
    """Select nodes, run ``operation(driver, deadline)`` on each through the
    operation retry, print results, record, exit. ``deadline`` seconds bound
    the whole command."""
    budget = app.deadline(deadline)
    store = app.store()
    records = select_nodes(store, nodes, all_nodes)
    policy = app.retry_policy(no_retry=no_retry)

    def retried(driver: BMCDriver) -> Any:
        return operation(RetryingDriver(driver, policy), budget)

    start = time.monotonic()
    # Pooled for the command's life: the nodes behind one Redfish service keep
    # its one session from the first node to the last (without a pool it would
    # be logged out whenever no node happened to be in flight), all logged out
    # at the end.
    with (
        progress(len(records), label, quiet=as_json) as advance,
        DriverPool(wait=bmc_timeout) as pool,
    ):
        results = run_on_nodes(
            records,
            retried,
            factory=app.factory(bmc_timeout),
            workers=workers,
            on_result=lambda _result: advance(),
            deadline=budget,
            pool=pool,
        )
    if record is not None:
        record(results)
    # A BMC fault is the last error a person will want to see on `node show`.
    errors = {r.node: str(r.error) for r in results if isinstance(r.error, BMCFault)}
    if errors:
        store.health.note_power(errors=errors)
    ctx.exit(print_results(results, as_json=as_json, elapsed=time.monotonic() - start))


def _events(app: App, kind: str, message: str) -> Callable[[list[NodeResult[Any]]], None]:
    """A ``record`` step that writes one history event per node that succeeded."""

    def record(results: list[NodeResult[Any]]) -> None:
        app.store().nodes.add_events(
            [(r.node, kind, message) for r in results if r.ok], actor=whoami()
        )

    return record


# -- power ----------------------------------------------------------------------------


@click.group("power")
def power() -> None:
    """Read or change power state."""


@power.command("status")
@node_selection
@fleet_options
@retry_option
@_json_option
@pass_app
@click.pass_context
def power_status(
    ctx: click.Context,
    app: App,
    nodes: tuple[str, ...],
    all_nodes: bool,
    workers: int,
    deadline: float,
    no_retry: bool,
    bmc_timeout: float,
    as_json: bool,
) -> None:
    """Read the power state of NODE... (or --all) and record it."""

    def record(results: list[NodeResult[Any]]) -> None:
        app.store().health.note_power(states={r.node: r.value for r in results if r.ok and r.value})

    _run(
        ctx,
        app,
        nodes,
        all_nodes,
        lambda d, budget: d.get_power_state(deadline=budget),
        label="power status",
        workers=workers,
        deadline=deadline,
        bmc_timeout=bmc_timeout,
        as_json=as_json,
        no_retry=no_retry,
        record=record,
    )


def _power_command(action: PowerAction, help_text: str) -> click.Command:
    @click.command(action.value.replace("_", "-"), help=help_text)
    @node_selection
    @click.option(
        "--wait/--no-wait",
        default=True,
        show_default=True,
        help="Wait until the node reads the target state.",
    )
    @click.option(
        "--timeout",
        type=Seconds(min=0),
        default=120.0,
        show_default=True,
        help="Seconds to wait for the target state (with --wait).",
    )
    @fleet_options
    @retry_option
    @_json_option
    @pass_app
    @click.pass_context
    def command(
        ctx: click.Context,
        app: App,
        nodes: tuple[str, ...],
        all_nodes: bool,
        wait: bool,
        timeout: float,
        workers: int,
        deadline: float,
        no_retry: bool,
        bmc_timeout: float,
        as_json: bool,
    ) -> None:
        def operation(driver: RetryingDriver, budget: Deadline) -> PowerState:
            # REBOOT with --wait is bmaas.retry.reboot: never resent blindly
            return driver.set_power_state(action, wait=wait, timeout=timeout, deadline=budget)

        def record(results: list[NodeResult[Any]]) -> None:
            ok = [r for r in results if r.ok]
            store = app.store()
            store.health.note_power(states={r.node: r.value for r in ok if r.value})
            store.nodes.add_events(
                [(r.node, "power_action", f"power {action} requested") for r in ok],
                actor=whoami(),
            )

        _run(
            ctx,
            app,
            nodes,
            all_nodes,
            operation,
            label=f"power {action}",
            workers=workers,
            deadline=deadline,
            bmc_timeout=bmc_timeout,
            as_json=as_json,
            no_retry=no_retry,
            record=record,
        )

    return command


power.add_command(_power_command(PowerAction.ON, "Power NODE... (or --all) on."))
power.add_command(_power_command(PowerAction.OFF, "Power NODE... (or --all) off, hard."))
power.add_command(_power_command(PowerAction.SOFT_OFF, "Shut NODE... (or --all) down gracefully."))
power.add_command(_power_command(PowerAction.REBOOT, "Hard-reset NODE... (or --all)."))


# -- boot device -----------------------------------------------------------------------


@click.group("boot-device")
def boot_device() -> None:
    """Read or set the next boot device."""


@boot_device.command("get")
@node_selection
@fleet_options
@retry_option
@_json_option
@pass_app
@click.pass_context
def boot_get(
    ctx: click.Context,
    app: App,
    nodes: tuple[str, ...],
    all_nodes: bool,
    workers: int,
    deadline: float,
    no_retry: bool,
    bmc_timeout: float,
    as_json: bool,
) -> None:
    """Read the next boot device of NODE... (or --all)."""
    _run(
        ctx,
        app,
        nodes,
        all_nodes,
        lambda d, budget: d.get_boot_device(deadline=budget),
        label="boot device",
        workers=workers,
        deadline=deadline,
        bmc_timeout=bmc_timeout,
        as_json=as_json,
        no_retry=no_retry,
    )


@boot_device.command("set")
@node_selection
@click.option(
    "--device",
    "-d",
    required=True,
    type=click.Choice([d.value for d in BootDevice]),
    help="Device to boot from next.",
)
@click.option("--persistent", is_flag=True, help="Keep it for every boot, not just the next.")
@fleet_options
@retry_option
@_json_option
@pass_app
@click.pass_context
def boot_set(
    ctx: click.Context,
    app: App,
    nodes: tuple[str, ...],
    all_nodes: bool,
    device: str,
    persistent: bool,
    workers: int,
    deadline: float,
    no_retry: bool,
    bmc_timeout: float,
    as_json: bool,
) -> None:
    """Set the next boot device of NODE... (or --all); read back to verify."""
    target = BootDevice(device)

    def operation(driver: RetryingDriver, budget: Deadline) -> BootSetting:
        driver.set_boot_device(target, persistent=persistent, deadline=budget)
        # the same shape as `get`: {"device", "persistent"} in JSON
        return BootSetting(target, persistent)

    def record(results: list[NodeResult[Any]]) -> None:
        events = [
            (r.node, "boot_device", f"boot device set to {describe_value(r.value)}")
            for r in results
            if r.ok
        ]
        app.store().nodes.add_events(events, actor=whoami())

    _run(
        ctx,
        app,
        nodes,
        all_nodes,
        operation,
        label="boot device",
        workers=workers,
        deadline=deadline,
        bmc_timeout=bmc_timeout,
        as_json=as_json,
        no_retry=no_retry,
        record=record,
    )


# -- virtual media ----------------------------------------------------------------------


@click.group("vmedia")
def vmedia() -> None:
    """Insert or eject virtual media (a CD image by URL)."""


@vmedia.command("insert")
@node_selection
@click.option("--url", required=True, help="Image URL the BMC fetches.")
@fleet_options
@retry_option
@_json_option
@pass_app
@click.pass_context
def vmedia_insert(
    ctx: click.Context,
    app: App,
    nodes: tuple[str, ...],
    all_nodes: bool,
    url: str,
    workers: int,
    deadline: float,
    no_retry: bool,
    bmc_timeout: float,
    as_json: bool,
) -> None:
    """Insert the image at --url into NODE... (or --all)."""

    def operation(driver: RetryingDriver, budget: Deadline) -> str:
        driver.insert_virtual_media(url, deadline=budget)
        return "inserted"

    _run(
        ctx,
        app,
        nodes,
        all_nodes,
        operation,
        label="vmedia insert",
        workers=workers,
        deadline=deadline,
        bmc_timeout=bmc_timeout,
        as_json=as_json,
        no_retry=no_retry,
        record=_events(app, "vmedia", f"virtual media inserted: {mask_url(url)}"),
    )


@vmedia.command("eject")
@node_selection
@fleet_options
@retry_option
@_json_option
@pass_app
@click.pass_context
def vmedia_eject(
    ctx: click.Context,
    app: App,
    nodes: tuple[str, ...],
    all_nodes: bool,
    workers: int,
    deadline: float,
    no_retry: bool,
    bmc_timeout: float,
    as_json: bool,
) -> None:
    """Eject virtual media from NODE... (or --all)."""

    def operation(driver: RetryingDriver, budget: Deadline) -> str:
        driver.eject_virtual_media(deadline=budget)
        return "ejected"

    _run(
        ctx,
        app,
        nodes,
        all_nodes,
        operation,
        label="vmedia eject",
        workers=workers,
        deadline=deadline,
        bmc_timeout=bmc_timeout,
        as_json=as_json,
        no_retry=no_retry,
        record=_events(app, "vmedia", "virtual media ejected"),
    )
