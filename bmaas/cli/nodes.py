"""``bmaas enroll``, ``bmaas node list|show`` and ``bmaas db ...``."""

from __future__ import annotations

import time
from typing import Any

import click

from bmaas import credentials
from bmaas.cli.app import (
    App,
    deadline_option,
    emit,
    json_option,
    output_options,
    pass_app,
    table,
    whoami,
)
from bmaas.cliutil import EXIT_FAILURE, EXIT_USAGE
from bmaas.driver import PowerState
from bmaas.store import NoDatabase, NodeRecord, ProvisionState, head_revision
from bmaas.store.lite import read_nodes
from bmaas.store.records import QUIRKS_KEY

__all__ = ["db", "enroll", "node"]


def _ago(then: float | None, now: float) -> str:
    if then is None:
        return "never"
    seconds = max(0.0, now - then)
    if seconds < 120:
        return f"{seconds:.0f}s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.0f}h ago"


@click.command("enroll")
@click.argument("file")  # read by the loader: a directory is one `error:` line
@click.option("--dry-run", is_flag=True, help="Validate only; change nothing.")
@json_option()
@pass_app
@click.pass_context
def enroll(ctx: click.Context, app: App, file: str, dry_run: bool, as_json: bool) -> None:
    """Enroll (or update) the nodes and networks in an inventory FILE.

    All or nothing: a file with one bad node enrolls nothing, and every
    problem is listed with its file, line and field. Nodes already enrolled
    are updated in place (their state and history are kept).
    """
    from bmaas import inventory  # the validators and driver registry, for enroll only

    try:
        known: set[str] = set(app.store().nodes.segment_names())
    except NoDatabase:
        known = set()  # nothing enrolled yet; --dry-run and bad files create nothing
    try:
        inv = inventory.load(file, known_segments=known)
    except inventory.InventoryError as exc:
        for problem in exc.problems:
            click.echo(f"error: {problem}", err=True)
        ctx.exit(EXIT_USAGE)
    if dry_run:
        data: dict[str, Any] = {"file": file, "valid": True, "nodes": len(inv.nodes)}
        if not emit(data, as_json=as_json, as_yaml=False):
            click.echo(f"{file}: valid, {len(inv.nodes)} node(s); nothing changed (--dry-run)")
        return
    report = inventory.enroll(app.store(create=True), inv, actor=whoami())
    data = {
        "file": file,
        "created": report.created,
        "updated": report.updated,
        "unchanged": report.unchanged,
        "not_in_file": report.not_in_file,
    }
    if emit(data, as_json=as_json, as_yaml=False):
        return
    click.echo(
        f"{file}: {len(report.created)} enrolled, {len(report.updated)} updated, "
        f"{len(report.unchanged)} unchanged"
    )
    if report.not_in_file:
        names = ", ".join(report.not_in_file[:10])
        more = f" and {len(report.not_in_file) - 10} more" if len(report.not_in_file) > 10 else ""
        click.echo(
            f"note: {len(report.not_in_file)} enrolled node(s) not in this file, left as they "
            f"are: {names}{more}",
            err=True,
        )


@click.group("node")
def node() -> None:
    """Enrolled nodes: list and show."""


def _row(rec: NodeRecord) -> list[Any]:
    maintenance = f"yes ({rec.maintenance_by})" if rec.maintenance else "no"
    owner = f"{rec.owner_kind} {rec.owner_name or rec.owner_id[:8]}" if rec.owner_id else None
    return [
        rec.name,
        rec.driver,
        rec.power_state,
        rec.provision_state,
        maintenance,
        rec.fault or ("needs cleaning" if rec.leftovers else None),
        owner,
        rec.resource_class,
        rec.network_segment,
    ]


@node.command("list")
@click.option(
    "--provision-state",
    type=click.Choice([s.value for s in ProvisionState]),
    help="Only nodes in this provision state.",
)
@click.option(
    "--power-state", type=click.Choice([s.value for s in PowerState]), help="Last seen power state."
)
@click.option("--maintenance/--no-maintenance", default=None, help="In maintenance or not.")
@click.option("--faulted/--not-faulted", default=None, help="With a system-set fault or not.")
@click.option("--fault", help="With this fault, e.g. 'power failure'.")
@click.option("--allocated/--free", default=None, help="Held by an owner or not.")
@click.option("--driver", help="Using this driver.")
@click.option("--resource-class", help="Of this resource class.")
@output_options
@pass_app
def node_list(app: App, /, as_json: bool, as_yaml: bool, **filters: Any) -> None:
    """List nodes (table, --json or --yaml), filtered."""
    # SQLite at the current schema: read with sqlite3, SQLAlchemy never loaded
    records = read_nodes(app.db, **filters)
    if records is None:
        records = app.store().nodes.find(**filters)
    # to_dict (a deep copy, secrets masked) only for the formats that print it
    data = [r.to_dict() for r in records] if as_json or as_yaml else None
    if emit(data, as_json=as_json, as_yaml=as_yaml):
        return
    headers = [
        "name",
        "driver",
        "power",
        "provision",
        "maintenance",
        "fault",
        "owner",
        "class",
        "segment",
    ]
    table([_row(r) for r in records], headers)


@node.command("show")
@click.argument("name")
@click.option("--events", "n_events", default=10, show_default=True, help="History lines.")
@output_options
@pass_app
def node_show(app: App, name: str, n_events: int, as_json: bool, as_yaml: bool) -> None:
    """Everything about one node: state, maintenance, allocation, ports, history."""
    store = app.store()
    rec = store.nodes.get(name)
    allocation = store.owners.allocation(name)
    ports = store.ports.find(node=name)
    events = store.nodes.events(name, limit=n_events)
    data = rec.to_dict()
    data["credentials"] = credentials.sources(rec.driver_info)
    data["quirks"] = list(rec.extra.get(QUIRKS_KEY) or ())
    data["allocation"] = allocation.to_dict() if allocation else None
    data["ports"] = [p.to_dict() for p in ports]
    data["events"] = [e.to_dict() for e in events]
    if emit(data, as_json=as_json, as_yaml=as_yaml):
        return
    now = store.clock()
    lines: list[tuple[str, Any]] = [
        ("name", rec.name),
        ("driver", rec.driver),
        ("driver_info", ", ".join(f"{k}={v}" for k, v in sorted(data["driver_info"].items()))),
        ("credentials", ", ".join(f"{k}: {v}" for k, v in data["credentials"].items())),
        ("resource_class", rec.resource_class),
        ("properties", ", ".join(f"{k}={v}" for k, v in sorted(rec.properties.items()))),
        ("segment", rec.network_segment),
        ("power", f"{rec.power_state} (seen {_ago(rec.power_state_at, now)})"),
        ("provision", rec.provision_state),
        (
            "maintenance",
            f"yes, by {rec.maintenance_by}: {rec.maintenance_reason}" if rec.maintenance else "no",
        ),
        ("fault", rec.fault),
        ("needs cleaning", rec.needs_cleaning),
        ("streaks", f"{rec.fault_count} faulted / {rec.good_count} good reads in a row"),
        ("last_error", rec.last_error),
        ("quirks", ", ".join(rec.extra.get(QUIRKS_KEY) or ())),
        ("allocation", allocation.owner.describe() if allocation else None),
    ]
    for key, value in lines:
        click.echo(f"{key + ':':<16}{'-' if value in (None, '') else value}")
    for port in ports:
        click.echo(f"{'port:':<16}{port.id[:8]} {port.network} {port.ip_address or '-'}")
    for ev in events:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ev.at))
        click.echo(f"{'event:':<16}{stamp} {ev.kind} [{ev.actor or '-'}] {ev.message}")


@click.group("db")
def db() -> None:
    """The state database: schema revision and upgrades."""


@db.command("upgrade")
@click.option("--revision", default="head", show_default=True, help="Target revision.")
@deadline_option(
    default=300.0,
    help="Seconds the whole upgrade may take, waiting for another store-wide change included.",
)
@pass_app
def db_upgrade(app: App, revision: str, deadline: float) -> None:
    """Migrate the database schema (creates the database if there is none).
    A second upgrade or a key rotation under way is waited for."""
    budget = app.deadline(deadline)
    store = app.store(check_schema=False, create=True)
    before, after = store.upgrade(budget, revision)
    if before == after:
        click.echo(f"{store.url}: already at {after}")
    else:
        click.echo(f"{store.url}: upgraded {before or 'empty'} -> {after}")


@db.command("current")
@json_option()
@pass_app
@click.pass_context
def db_current(ctx: click.Context, app: App, as_json: bool) -> None:
    """Show the schema revision and the newest one; exit 1 when behind."""
    store = app.store(check_schema=False)
    current, head = store.schema_revision(), head_revision()
    data = {"url": store.url, "current": current, "head": head, "up_to_date": current == head}
    if not emit(data, as_json=as_json, as_yaml=False):
        state = "up to date" if current == head else "run `bmaas db upgrade`"
        click.echo(f"{store.url}: at {current or 'none'}, newest {head} ({state})")
    if current != head:
        ctx.exit(EXIT_FAILURE)


@db.command("rotate-key")
@click.option(
    "--keep-old",
    is_flag=True,
    help="Keep the old key in the key file after the new one, so a backup of the "
    "database taken before the rotation still opens with it.",
)
@deadline_option(
    default=120.0,
    help="Seconds the whole rotation may take, waiting for another one included.",
)
@json_option()
@pass_app
def db_rotate_key(app: App, keep_old: bool, deadline: float, as_json: bool) -> None:
    """Seal every stored password with a new key (BMAAS_KEY_FILE, else
    ~/.config/bmaas/store.key) and drop the old one. Safe to interrupt at any
    moment and to run again: the new key is written first, every password
    sealed again in one transaction, then the old key dropped. A second
    rotation (another operator, a cron job, another host on the same
    PostgreSQL store) waits for this one."""
    budget = app.deadline(deadline)
    store = app.store()
    done = store.keys.rotate(budget, keep_old=keep_old)
    data = {
        "key_file": str(done.path),
        "old_key_ids": done.old,
        "new_key_id": done.new,
        "resealed": done.resealed,
        "nodes": done.nodes,
        "old_kept": keep_old,
    }
    if not emit(data, as_json=as_json, as_yaml=False):
        kept = " (old key kept after it)" if keep_old else ""
        click.echo(
            f"{done.path}: key {', '.join(done.old)} -> {done.new}{kept}; "
            f"{done.resealed} password(s) on {done.nodes} node(s) sealed again"
        )
