"""Checks of the service itself: the database, the inventory, the drivers."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

from bmaas.faults import InputError
from bmaas.registry import available_drivers
from bmaas.status.context import CheckContext
from bmaas.status.result import Outcome, listing
from bmaas.yamlsrc import line_of, load_file

__all__ = ["INVENTORY_ENV", "check_database", "check_drivers", "check_inventory"]

#: where ``--inventory`` comes from when it is not given
INVENTORY_ENV = "BMAAS_INVENTORY"


def check_database(ctx: CheckContext) -> Outcome:
    """Reachable, at the newest schema this bmaas ships, and its sealed
    passwords open with the key file."""
    state = ctx.database
    if state.problem is not None:
        return Outcome().fail(state.problem)
    out = Outcome().note(
        f"{state.url}: schema {state.current} (newest), {len(ctx.nodes())} node(s) enrolled"
    )
    if state.store is not None:
        # the sealed passwords' key (bmaas.sealed): missing or wrong, no BMC can be asked
        try:
            ring = state.store.keys.check()
        except InputError as exc:
            return out.fail(str(exc), key="store_key")
        if ring is not None:
            out.note(f"inline passwords sealed; key file {ring.path} opens them")
    return out


def _inventory_nodes(source: str) -> dict[str, tuple[str | None, int | None]]:
    """Node name -> (driver, line) from an inventory file.

    Only names and drivers are read, not the whole file validated: validation
    resolves every password reference, and a check run from a shell without
    ``BMC_PASSWORD`` set would fail for the wrong reason (``bmaas enroll
    --dry-run`` validates).
    """
    doc = load_file(source)
    raw = doc.get("nodes") if isinstance(doc, Mapping) else None
    if not isinstance(raw, list):
        raise InputError("has no 'nodes' list", source=source, line=line_of(doc))
    found: dict[str, tuple[str | None, int | None]] = {}
    for index, node in enumerate(raw):
        name = node.get("name") if isinstance(node, Mapping) else None
        if not isinstance(name, str):
            raise InputError(
                "has no name", source=source, line=line_of(node), field=f"nodes[{index}]"
            )
        driver: Any = node.get("driver")
        found[name] = (driver if isinstance(driver, str) else None, line_of(node))
    return found


def check_inventory(ctx: CheckContext) -> Outcome:
    """Nodes in the inventory file that are not enrolled (less capacity to
    schedule on), and enrolled nodes the file no longer has."""
    if not ctx.inventory:
        return Outcome().note(
            f"no inventory to compare: skipped (give --inventory FILE or set {INVENTORY_ENV})"
        )
    source = ctx.inventory
    try:
        in_file = _inventory_nodes(source)
    except InputError as exc:
        return Outcome().fail(str(exc))
    enrolled = {record.name: record for record in ctx.nodes()}
    out = Outcome()
    missing = [name for name in in_file if name not in enrolled]
    if missing:
        out.warn(
            f"{len(missing)} node(s) in {source} are not enrolled (less capacity to schedule "
            f"on; `bmaas enroll {source}`): {listing(missing)}",
            key="not_enrolled",
            nodes=missing,
        )
    gone = [name for name in enrolled if name not in in_file]
    if gone:
        out.warn(
            f"{len(gone)} enrolled node(s) are not in {source} (retired? renamed?): "
            f"{listing(gone)}",
            key="not_in_inventory",
            nodes=gone,
        )
    changed = [
        f"{name} ({enrolled[name].driver} -> {driver}, line {line})"
        for name, (driver, line) in in_file.items()
        if name in enrolled and driver and driver != enrolled[name].driver
    ]
    if changed:
        out.warn(
            f"{len(changed)} node(s) have another driver in {source} than enrolled "
            f"(`bmaas enroll {source}` updates them): {listing(changed)}",
            key="driver_changed",
            nodes=[entry.split(" ", 1)[0] for entry in changed],
        )
    if not out.details:
        out.note(f"the {len(in_file)} node(s) in {source} are the enrolled ones")
    return out


def check_drivers(ctx: CheckContext) -> Outcome:
    """Every driver an enrolled node names is installed (entry point found)
    and imports (its protocol library is there and loads)."""
    records = ctx.nodes()
    by_driver: dict[str, list[str]] = collections.defaultdict(list)
    for record in records:
        by_driver[record.driver].append(record.name)
    out = Outcome()
    if not by_driver:
        return out.note(f"no nodes enrolled; installed: {', '.join(available_drivers()) or 'none'}")
    for name, nodes in sorted(by_driver.items()):
        loaded = ctx.driver_class(name)
        if isinstance(loaded, InputError):
            out.fail(
                f"{name} ({len(nodes)} node(s)): {loaded.message}", key="no_driver", nodes=nodes
            )
        else:
            out.note(f"{name} ({len(nodes)} node(s)): {loaded.__module__}.{loaded.__qualname__}")
    return out
