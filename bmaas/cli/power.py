"""``bmaas power``, ``bmaas boot-device`` and ``bmaas vmedia``: one BMC
operation over many nodes in parallel, a result line per node.

Exit codes: 0 every node succeeded, 1 some failed (their lines say why),
2 the command could not run (unknown node, bad arguments, database).
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
    select_nodes,
    whoami,
)
from bmaas.driver import BMCDriver, BootDevice, BootSetting, PowerAction, PowerState
from bmaas.faults import BMCFault
from bmaas.ops import NodeResult, run_on_nodes

__all__ = ["boot_device", "power", "vmedia"]


def _json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON, no progress bar.")(fn)


def _run(
    ctx: click.Context,
    app: App,
    nodes: Sequence[str],
    all_nodes: bool,
    operation: Callable[[BMCDriver], Any],
    *,
    label: str,
    workers: int,
    deadline: float,
    as_json: bool,
    record: Callable[[list[NodeResult[Any]]], None] | None = None,
) -> None:
    """Select nodes, run ``operation`` on each, print results, record, exit."""
    store = app.store()
    records = select_nodes(store, nodes, all_nodes)
    start = time.monotonic()
    with progress(len(records), label, quiet=as_json) as advance:
        results = run_on_nodes(
            records,
            operation,
            factory=app.factory(deadline),
            workers=workers,
            on_result=lambda _result: advance(),
        )
    if record is not None:
        record(results)
    # A BMC fault is the last error a person will want to see on `node show`.
    errors = {r.node: str(r.error) for r in results if isinstance(r.error, BMCFault)}
    if errors:
        store.note_power(errors=errors)
    ctx.exit(print_results(results, as_json=as_json, elapsed=time.monotonic() - start))


def _events(app: App, kind: str, message: str) -> Callable[[list[NodeResult[Any]]], None]:
    """A ``record`` step that writes one history event per node that succeeded."""

    def record(results: list[NodeResult[Any]]) -> None:
        app.store().add_events([(r.node, kind, message) for r in results if r.ok], actor=whoami())

    return record


# -- power ----------------------------------------------------------------------------


@click.group("power")
def power() -> None:
    """Read or change power state."""


@power.command("status")
@node_selection
@fleet_options
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
    as_json: bool,
) -> None:
    """Read the power state of NODE... (or --all) and record it."""

    def record(results: list[NodeResult[Any]]) -> None:
        app.store().note_power(states={r.node: r.value for r in results if r.ok and r.value})

    _run(
        ctx,
        app,
        nodes,
        all_nodes,
        lambda d: d.get_power_state(),
        label="power status",
        workers=workers,
        deadline=deadline,
        as_json=as_json,
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
        type=click.FloatRange(min=0),
        default=120.0,
        show_default=True,
        help="Seconds to wait for the target state (with --wait).",
    )
    @fleet_options
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
        as_json: bool,
    ) -> None:
        def operation(driver: BMCDriver) -> PowerState:
            return driver.set_power_state(action, wait=wait, timeout=timeout)

        def record(results: list[NodeResult[Any]]) -> None:
            ok = [r for r in results if r.ok]
            store = app.store()
            store.note_power(states={r.node: r.value for r in ok if r.value})
            store.add_events(
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
            as_json=as_json,
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
    as_json: bool,
) -> None:
    """Read the next boot device of NODE... (or --all)."""
    _run(
        ctx,
        app,
        nodes,
        all_nodes,
        lambda d: d.get_boot_device(),
        label="boot device",
        workers=workers,
        deadline=deadline,
        as_json=as_json,
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
    as_json: bool,
) -> None:
    """Set the next boot device of NODE... (or --all); read back to verify."""
    target = BootDevice(device)

    def operation(driver: BMCDriver) -> BootSetting:
        driver.set_boot_device(target, persistent=persistent)
        # the same shape as `get`: {"device", "persistent"} in JSON
        return BootSetting(target, persistent)

    def record(results: list[NodeResult[Any]]) -> None:
        events = [
            (r.node, "boot_device", f"boot device set to {describe_value(r.value)}")
            for r in results
            if r.ok
        ]
        app.store().add_events(events, actor=whoami())

    _run(
        ctx,
        app,
        nodes,
        all_nodes,
        operation,
        label="boot device",
        workers=workers,
        deadline=deadline,
        as_json=as_json,
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
    as_json: bool,
) -> None:
    """Insert the image at --url into NODE... (or --all)."""

    def operation(driver: BMCDriver) -> str:
        driver.insert_virtual_media(url)
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
        as_json=as_json,
        record=_events(app, "vmedia", f"virtual media inserted: {url}"),
    )


@vmedia.command("eject")
@node_selection
@fleet_options
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
    as_json: bool,
) -> None:
    """Eject virtual media from NODE... (or --all)."""

    def operation(driver: BMCDriver) -> str:
        driver.eject_virtual_media()
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
        as_json=as_json,
        record=_events(app, "vmedia", "virtual media ejected"),
    )
