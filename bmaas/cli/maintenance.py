"""``bmaas maintenance ...`` (``bmaas sync`` is :mod:`bmaas.cli.sync`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from bmaas.cli.app import (
    App,
    emit,
    json_option,
    pass_app,
    whoami,
)
from bmaas.cli.deploy import make_provisioner, provisioner_options
from bmaas.cli.interrupt import exit_if_interrupted, interruptible
from bmaas.cliutil import EXIT_FAILURE, echo_rows
from bmaas.provision.maintenance import evacuate as evacuate_nodes
from bmaas.provision.readiness import readiness
from bmaas.store import NodeRecord

if TYPE_CHECKING:  # imported when used: SQLAlchemy and prometheus_client after --deadline is made
    pass

__all__ = ["maintenance"]


@click.group("maintenance")
def maintenance() -> None:
    """Take nodes out of service and back, and see when they are free."""


@maintenance.command("set")
@click.argument("nodes", nargs=-1, required=True)
@click.option("--reason", required=True, help="Why (shown to everyone).")
@click.option("--by", default=None, help="Who, for the record (default: your user name).")
@click.option(
    "--evacuate",
    is_flag=True,
    help="Move every instance off the nodes (re-deploy elsewhere), then report "
    "whether they are ready for work.",
)
@provisioner_options
@pass_app
@click.pass_context
def maintenance_set(
    ctx: click.Context,
    app: App,
    /,
    nodes: tuple[str, ...],
    reason: str,
    by: str | None,
    evacuate: bool,
    **limits: Any,
) -> None:
    """Put NODE... into maintenance: never claimed while there."""
    # --evacuate: the deadline is made first, so it bounds the store's opening too
    command_deadline = app.deadline(limits["deadline"]) if evacuate else None
    store = app.store()
    store.nodes.require(nodes)
    who = by or whoami()
    if command_deadline is None:
        for name in nodes:
            _say_maintenance(store.nodes.set_maintenance(name, reason=reason, by=who), reason)
        return
    with (
        interruptible() as token,
        make_provisioner(
            app, command_deadline=command_deadline, cancel=token, **limits
        ) as provisioner,
    ):
        report = evacuate_nodes(
            provisioner, nodes, reason=reason, by=who, deadline=command_deadline, cancel=token
        )
    for rec in store.nodes.require(nodes):
        _say_maintenance(rec, reason)
    for node, moved in report.moved:
        click.echo(f"{node}: instance {moved.instance} moved to {moved.target}")
    for node, error in report.failed:
        click.echo(f"{node}: could not move its instance: {error}", err=True)
    for state in report.readiness:
        click.echo(f"{state.node}: {'ready' if state.ready else 'not ready'}: {state.detail}")
    exit_if_interrupted(ctx, token)
    if report.failed:
        ctx.exit(EXIT_FAILURE)


def _say_maintenance(rec: NodeRecord, reason: str) -> None:
    held = (
        f"; still held by {rec.owner_kind} {rec.owner_name or rec.owner_id}"
        if rec.allocated
        else ""
    )
    click.echo(f"{rec.name}: in maintenance ({rec.maintenance_by}: {reason}){held}")


@maintenance.command("unset")
@click.argument("nodes", nargs=-1, required=True)
@click.option("--by", default=None, help="Who, for the record (default: your user name).")
@pass_app
def maintenance_unset(app: App, nodes: tuple[str, ...], by: str | None) -> None:
    """Take NODE... out of maintenance (and clear a system-set fault)."""
    store = app.store()
    before = {r.name: r for r in store.nodes.require(nodes)}
    for name in nodes:
        store.nodes.unset_maintenance(name, by=by or whoami())
        cleared = f" (fault {before[name].fault!r} cleared)" if before[name].fault else ""
        click.echo(f"{name}: out of maintenance{cleared}")


@maintenance.command("status")
@click.argument("nodes", nargs=-1, required=True)
@json_option()
@pass_app
@click.pass_context
def maintenance_status(ctx: click.Context, app: App, nodes: tuple[str, ...], as_json: bool) -> None:
    """Say whether NODE... is ready for work on it (in maintenance, holding no
    allocation) and what still holds it. Exit 0 only if every node is ready."""
    store = app.store()
    states = [readiness(store, rec.name).to_dict() for rec in store.nodes.require(nodes)]
    if not emit(states, as_json=as_json, as_yaml=False):
        width = max(len(s["node"]) for s in states)
        label = {True: "ready", False: "not ready"}
        echo_rows([f"{s['node']:<{width}}  {label[s['ready']]:<9}  {s['detail']}" for s in states])
    if not all(s["ready"] for s in states):
        ctx.exit(EXIT_FAILURE)
