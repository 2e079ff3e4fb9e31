"""``bmaas bios``, ``bmaas firmware`` and ``bmaas inventory``: BIOS settings,
firmware versions and what the machines are, read out of band over many
nodes in parallel, a result line per node (issue 51).

``bios set NODE... ATTR=VALUE...`` checks the changes against each BMC's
attribute registry (every problem of a node on its line, nothing sent to
it), stages them for the next reset and prints what is pending. With
``--reboot`` it then reboots the node through the power path (the safe
reboot of :mod:`bmaas.retry`), waits for it, and reads the BIOS back: an
attribute that did not apply is a :class:`~bmaas.faults.SettingsNotApplied`
on the node's line (exit 1), never success. ``--verify`` reads back without
rebooting (after ``--apply-time Immediate``, or a reboot made elsewhere).

Exit codes as every fleet command: 0 every node ended fine, 1 some did not,
2 the command could not run. ``--deadline`` is the whole command, reboots
and read-backs included. Values of password attributes are never printed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from bmaas.cli.app import whoami
from bmaas.cli.fleet import FleetArgs, fleet_command, run_fleet
from bmaas.cli.updates import firmware_update_command
from bmaas.cliutil import Seconds
from bmaas.deadline import Deadline
from bmaas.driver import Inventory, PowerAction
from bmaas.faults import InputError
from bmaas.hardware import APPLY_TIMES, AttributeInfo, BiosSettings, FirmwareComponent, coerce_value
from bmaas.ops import NodeResult

if TYPE_CHECKING:
    from bmaas.retry import RetryingDriver

__all__ = ["bios", "firmware", "inventory"]

#: what a secret attribute's value reads as
HIDDEN = "***"


def _secret(name: str, info: AttributeInfo | None) -> bool:
    return (info is not None and info.type == "Password") or "password" in name.lower()


def hide(values: Mapping[str, Any], registry: Mapping[str, AttributeInfo] | None) -> dict[str, Any]:
    """``values`` with every password attribute's value hidden."""
    registry = registry or {}
    return {k: HIDDEN if _secret(k, registry.get(k)) else v for k, v in values.items()}


def _pairs(values: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items()) or "-"


# -- bios -----------------------------------------------------------------------------


@click.group("bios")
def bios() -> None:
    """Read or change BIOS settings, verified after the reset."""


def _shown(settings: BiosSettings) -> BiosSettings:
    return dataclasses.replace(
        settings,
        current=hide(settings.current, settings.registry),
        pending=hide(settings.pending, settings.registry),
    )


def _describe_bios(value: Any) -> str:
    if not isinstance(value, BiosSettings):
        return str(value)
    registry = "registry" if value.registry is not None else "no registry"
    return f"{_pairs(value.current)} | pending: {_pairs(value.pending)} | {registry}"


@bios.command("get")
@fleet_command()
def bios_get(args: FleetArgs) -> None:
    """Read the BIOS attributes of NODE... (or --all): current, pending, and
    whether the BMC publishes its attribute registry."""
    run_fleet(
        args,
        lambda d, deadline: _shown(d.get_bios(deadline=deadline)),
        label="bios get",
        describe=_describe_bios,
    )


def split_assignments(words: tuple[str, ...]) -> tuple[tuple[str, ...], dict[str, str]]:
    """NODE... and ATTR=VALUE... as given together (a node name has no ``=``)."""
    nodes = tuple(w for w in words if "=" not in w)
    changes: dict[str, str] = {}
    problems = []
    for word in words:
        if "=" not in word:
            continue
        name, _, value = word.partition("=")
        if not name:
            problems.append(InputError(f"{word!r}: no attribute name before '='", field="ATTR"))
        elif name in changes:
            problems.append(InputError(f"{name} is given twice", field="ATTR"))
        changes[name] = value
    if not changes:
        problems.append(InputError("give the changes as ATTR=VALUE", field="ATTR=VALUE"))
    if problems:
        from bmaas.cliutil import InputProblems

        raise InputProblems(problems)
    return nodes, changes


@bios.command("set")
@fleet_command(
    click.option(
        "--apply-time",
        type=click.Choice(APPLY_TIMES),
        default="OnReset",
        show_default=True,
        help="When the BIOS applies the changes: at the next reset, or at once where the "
        "BMC offers it.",
    ),
    click.option(
        "--reboot",
        is_flag=True,
        help="Reboot each node after the change, wait for it, and read the BIOS back: "
        "attributes that did not apply fail the node (SettingsNotApplied).",
    ),
    click.option(
        "--verify",
        is_flag=True,
        help="Read the BIOS back now and fail the node on attributes that did not apply "
        "(implied by --reboot).",
    ),
    click.option(
        "--timeout",
        type=Seconds(min=0),
        default=300.0,
        show_default=True,
        help="Seconds the node may take to read on again after the reboot (with --reboot).",
    ),
)
def bios_set(
    args: FleetArgs, *, apply_time: str, reboot: bool, verify: bool, timeout: float
) -> None:
    """Set BIOS attributes of NODE... (or --all): NODE... ATTR=VALUE...

    Checked against each BMC's attribute registry first (every problem on the
    node's line, nothing sent to it); the line shows what is pending."""
    nodes, texts = split_assignments(args.nodes)
    args = dataclasses.replace(args, nodes=nodes)

    def operation(driver: RetryingDriver, deadline: Deadline) -> dict[str, Any]:
        before = driver.get_bios(deadline=deadline)
        registry = before.registry or {}
        changes = {
            name: coerce_value(text, registry.get(name), before.current.get(name))
            for name, text in texts.items()
        }
        pending = driver.set_bios(changes, deadline=deadline, apply_time=apply_time)
        result: dict[str, Any] = {"pending": hide(pending, before.registry)}
        if reboot:
            driver.set_power_state(
                PowerAction.REBOOT, wait=True, timeout=timeout, deadline=deadline
            )
            result["rebooted"] = True
        if reboot or verify:
            after = driver.verify_bios(changes, deadline=deadline)
            result["applied"] = hide(changes, before.registry)
            result["pending"] = hide(after.pending, before.registry)
        return result

    def describe(value: Any) -> str:
        if not isinstance(value, dict):
            return str(value)
        if "applied" in value:
            return f"applied: {_pairs(value['applied'])}"
        return f"pending: {_pairs(value['pending'])} (applies at the next reset)"

    def record(results: list[NodeResult[Any]]) -> None:
        names = ", ".join(sorted(texts))
        said = [(r.node, "bios", f"BIOS settings set: {names}") for r in results if r.ok]
        args.app.store().nodes.add_events(said, actor=whoami())

    run_fleet(args, operation, label="bios set", record=record, describe=describe)


# -- firmware ---------------------------------------------------------------------------


@click.group("firmware")
def firmware() -> None:
    """The firmware images the BMCs report, and their updates."""


def _describe_firmware(value: Any) -> str:
    if not isinstance(value, list):
        return str(value)
    return ", ".join(
        f"{c.id} {c.version or '?'}" + (" (updateable)" if c.updateable else "")
        for c in value
        if isinstance(c, FirmwareComponent)
    )


@firmware.command("list")
@fleet_command()
def firmware_list(args: FleetArgs) -> None:
    """List the firmware components of NODE... (or --all) with their versions."""
    run_fleet(
        args,
        lambda d, deadline: d.get_firmware_inventory(deadline=deadline),
        label="firmware list",
        describe=_describe_firmware,
    )


firmware_update_command(firmware)  # `firmware update` (bmaas.cli.updates)

# -- inventory --------------------------------------------------------------------------


def _describe_inventory(value: Any) -> str:
    if not isinstance(value, Inventory):
        return str(value)
    parts = [" ".join(p for p in (value.manufacturer, value.model) if p) or "?"]
    if value.serial:
        parts.append(f"serial {value.serial}")
    if value.cpus is not None:
        parts.append(f"{value.cpus} CPUs")
    if value.memory_mb is not None:
        parts.append(f"{value.memory_mb // 1024} GiB")
    if value.dimms:
        parts.append(f"{len(value.dimms)} DIMMs")
    if value.nics:
        parts.append("NICs " + " ".join(f"{n.id}={n.mac or '?'}" for n in value.nics))
    if value.disks:
        parts.append(f"{len(value.disks)} disks")
    if value.firmware:
        parts.append("firmware " + _describe_firmware(list(value.firmware)))
    return ", ".join(parts)


@click.command("inventory")
@fleet_command()
def inventory(args: FleetArgs) -> None:
    """Out-of-band inventory: CPUs, memory, NICs with MACs, disks, firmware.

    Read from the BMC of NODE... (or --all): what each BMC can list."""
    run_fleet(
        args,
        lambda d, deadline: d.get_inventory(deadline=deadline, detail=True),
        label="inventory",
        describe=_describe_inventory,
    )
