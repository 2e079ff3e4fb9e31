"""``bmaas deploy``, ``undeploy``, ``move`` and ``instance list``."""

from __future__ import annotations

import dataclasses
import math
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

import click
import yaml

from bmaas import clock as _clock
from bmaas import validate
from bmaas.cli.app import (
    App,
    Decorator,
    bmc_timeout_option,
    deadline_option,
    emit,
    json_option,
    options,
    pass_app,
    progress_lines,
    seconds_option,
    table,
    workers_option,
)
from bmaas.cli.backends import backend_options, chosen_backend, embedded_chosen
from bmaas.cli.interrupt import exit_if_interrupted, exit_on_signals, interruptible
from bmaas.cliutil import EXIT_FAILURE, ImageURL, InputProblems, Name, WholeNumber
from bmaas.deadline import Deadline
from bmaas.deploy import DeploySettings, ReadyHook
from bmaas.faults import BmaasError, InputError, ProvisionFailed
from bmaas.provision import CancelToken, Provisioned, Provisioner, Request, status_of
from bmaas.retry import RetryLimits
from bmaas.serialmark import SerialMarker
from bmaas.store import Allocation, OwnerKind

__all__ = ["deploy", "instance", "move", "undeploy"]


def provisioner_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    flags: list[Decorator] = [
        click.option(
            "--max-attempts",
            type=WholeNumber(1, 20),
            default=3,
            show_default=True,
            help="Nodes a request may try before it fails.",
        ),
        deadline_option(
            default=900.0,
            least=1,
            help="Seconds the whole command may take, every request, attempt and BMC call "
            "included.",
        ),
        bmc_timeout_option(),
        seconds_option("--power-timeout", 60.0, 1, "Seconds a power action may take to land."),
        seconds_option("--settle", 10.0, 0, "Seconds a node must stay on after power-on."),
    ]
    return options(backend_options, *flags)(fn)


def make_provisioner(
    app: App,
    *,
    max_attempts: int,
    deadline: float,
    bmc_timeout: float,
    power_timeout: float,
    settle: float,
    command_deadline: Deadline,
    cancel: CancelToken | None = None,
    ready: ReadyHook | None = None,
    to_disk: bool = False,
    write_timeout: float = DeploySettings.write_timeout,
    ready_timeout: float = DeploySettings.ready_timeout,
) -> Provisioner:
    """The command's provisioner; ``budget`` (its ``--deadline``) also bounds
    every call a backend makes to its service (Ironic's API). Every wait in
    its path (busy backoff, deploy and Ironic polls, a rollback's waits)
    sleeps on ``cancel``: a second signal ends it at once."""
    sleep = cancel.sleeper() if cancel is not None else _clock.sleep
    with exit_on_signals():  # nothing started yet: a signal need not wait out a silent service
        backend = chosen_backend(
            deadline=command_deadline, sleep=sleep
        )  # --cloud / --backend ironic
        if backend is not None:
            if to_disk:  # Ironic writes disks through its own deploy interface
                raise InputError("bmaas's own deploy only, not on Ironic", field="--to-disk")
            return Provisioner(
                backend=backend,
                max_attempts=max_attempts,
                deadline_s=deadline,
                cancel=cancel,
                deadline=command_deadline,
            )
        settings = DeploySettings(
            power_timeout=power_timeout,
            settle=settle,
            boot_timeout=max(settle * 3, 60.0),
            deadline_s=deadline,
            to_disk=to_disk,
            write_timeout=write_timeout,
            ready_timeout=ready_timeout,
            # a log read is local and cheap: ask often, so the deploy ends
            # within a second of the machine's word
            ready_interval=1.0 if ready is not None else DeploySettings.ready_interval,
        )
        return Provisioner(
            app.store(),
            driver_factory=app.factory(bmc_timeout),
            limits=RetryLimits(total=max(bmc_timeout * 4, 30.0), sleep=sleep),
            settings=settings,
            max_attempts=max_attempts,
            deadline_s=deadline,
            ready=ready,
            cancel=cancel,
            deadline=command_deadline,  # the start-up reclaim takes a share of the command's
        )


def _properties(pairs: Sequence[str]) -> dict[str, Any]:
    """``--property KEY=VALUE`` pairs, each checked as an inventory's
    ``properties`` are (cpus a whole number >= 1, no NaN, no lists); every
    bad pair is its own error line, raised before any backend is contacted."""
    from bmaas.inventory.nodes import PROPERTY_TYPES

    out: dict[str, Any] = {}
    problems: list[InputError] = []

    def bad(message: str) -> None:
        problems.append(InputError(message, field="--property"))

    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            bad(f"expected key=value, got {pair!r}")
            continue
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        except ValueError:  # a number of more than 4300 digits
            bad(f"{key}: not a number bmaas can read")
            continue
        if key in PROPERTY_TYPES:
            kind, low = PROPERTY_TYPES[key]
            if kind is str:
                value = raw  # cpu_arch=x86_64: text as given
            else:
                try:
                    value = validate.whole(value, low=low)
                except ValueError as exc:
                    bad(f"{key}: {exc}")
                    continue
        elif isinstance(value, float) and not math.isfinite(value):
            bad(f"{key}: must be a finite number, not {value!r}")
            continue
        elif not isinstance(value, str | int | float | bool):
            bad(f"{key}: must be a string, number or boolean, not {raw!r}")
            continue
        out[key] = value
    if out and not problems and not embedded_chosen():
        bad("the Ironic backend matches resource class and traits, not properties")
    if problems:
        raise InputProblems(problems)
    return out


def _progress_line(result: Provisioned | ProvisionFailed) -> str:
    if isinstance(result, Provisioned):
        tried = "".join(f", after {a.node} {a.fault_class}" for a in result.attempts if a.failed)
        return f"{result.request}: active on {result.node} in {result.elapsed:.1f}s{tried}"
    status = status_of(result)
    if status != "failed":
        return f"{result.request}: {status}"
    return (
        f"{result.request}: FAILED after {len([a for a in result.attempts if a.tried])} attempt(s)"
    )


def _row(result: Provisioned | ProvisionFailed) -> dict[str, Any]:
    if isinstance(result, Provisioned):
        return {
            "request": result.request,
            "ok": True,
            "status": status_of(result),
            "instance": result.instance,
            "node": result.node,
            # nodes a deploy was tried on, the one that worked included (the
            # library's ``attempts`` minus refusals); refused candidates
            # (maintenance, no match: a database write, no BMC call) apart
            "attempts": len([a for a in result.attempts if a.tried]),
            "refused": len([a for a in result.attempts if a.refused]),
            "faults": [a.fault_code for a in result.attempts if a.failed],
            "elapsed": result.elapsed,
            "boot": result.boot_method,
            "attempt_details": [dataclasses.asdict(a) for a in result.attempts],
        }
    cause = result.__cause__
    return {
        "request": result.request,
        "ok": False,
        "status": status_of(result),
        "instance": None,
        "node": None,
        "attempts": len([a for a in result.attempts if a.tried]),
        "refused": len([a for a in result.attempts if a.refused]),
        "faults": [a.fault_code for a in result.attempts if a.failed],
        "elapsed": round(sum(a.elapsed for a in result.attempts), 3),
        "error": f"{type(cause).__name__}: {cause}" if cause else str(result),
        "attempt_details": [dataclasses.asdict(a) for a in result.attempts],
    }


@click.command("deploy")
@click.option(
    "--count",
    "-n",
    type=WholeNumber(1, 10000),
    default=1,
    show_default=True,
    help="How many instances.",
)
@click.option(
    "--name-prefix",
    type=Name(max_length=240),
    default=None,
    help="Instance names: PREFIX-001... (default: a fresh random prefix).",
)
@click.option("--resource-class", default=None, help="Only nodes of this resource class.")
@click.option(
    "--property",
    "properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="Node property to match; numbers are minimums (repeatable).",
)
@click.option(
    "--image",
    "image_url",
    type=ImageURL(),
    default=None,
    help="Image URL to boot by virtual media where the node supports it (else the node's "
    "driver_info deploy_boot_device: PXE, or cdrom for a disc put in its drive).",
)
@click.option("--network", default=None, help="Create a port for each instance on this network.")
@click.option(
    "--ready-log",
    default=None,
    metavar="TEMPLATE",
    help="Ready only when this file ({node}: the node's name), its serial console's log, "
    "shows --ready-pattern written after the command started.",
)
@click.option(
    "--ready-pattern",
    default=None,
    metavar="REGEX",
    help="What the node prints once up (with --ready-log), e.g. 'BMAAS-BOOTED via=vmedia'.",
)
@click.option(
    "--fail-pattern",
    default=None,
    metavar="REGEX",
    help="What the node prints when its boot failed (with --ready-log), e.g. 'Kernel panic': "
    "a BootFailure quoting the line at once, not after --ready-timeout.",
)
@seconds_option(
    "--ready-timeout",
    DeploySettings.ready_timeout,
    1,
    "With --ready-log: seconds a node, booted and settled, may take to print "
    "--ready-pattern; then a BootFailure and the request moves on.",
)
@click.option(
    "--to-disk",
    is_flag=True,
    help="The image is a writer: it writes the node's disk and powers the node off when "
    "done; then boot the node from its disk (the deploy is active once it runs there).",
)
@seconds_option(
    "--write-timeout",
    DeploySettings.write_timeout,
    1,
    "With --to-disk: seconds the image may take to write the disk and power the node off.",
)
@workers_option(default=8, most=256, help="Requests worked on at once.")
@provisioner_options
@json_option()
@pass_app
@click.pass_context
def deploy(
    ctx: click.Context,
    app: App,
    /,
    count: int,
    name_prefix: str | None,
    resource_class: str | None,
    properties: Sequence[str],
    image_url: str | None,
    network: str | None,
    ready_log: str | None,
    ready_pattern: str | None,
    fail_pattern: str | None,
    ready_timeout: float,
    to_disk: bool,
    write_timeout: float,
    workers: int,
    as_json: bool,
    **limits: Any,
) -> None:
    """Deploy COUNT instances, moving each to another node when one fails.

    Each request tries up to --max-attempts nodes. A busy or briefly
    unreachable BMC is retried on the spot; a node that faults is left for the
    next candidate, and its fault recorded. Exit 0 when every request got a
    node, 1 when some did not.

    With --ready-log and --ready-pattern a node is active only once its
    serial log shows the pattern (hwlab vm's machines print BMAAS-BOOTED
    via=<medium>), within the deploy's deadline; else a BootFailure and the
    request moves on. --fail-pattern ends that wait at once when the log
    shows the node's boot failed.

    With --to-disk the image writes the disk and powers the node off; bmaas
    then ejects it, sets disk boot and powers the node on: pair it with a
    --ready-pattern the disk's system prints (hwlab vm: 'via=disk').
    """
    if (ready_log is None) != (ready_pattern is None):
        raise InputError("give both or neither", field="--ready-log/--ready-pattern")
    if fail_pattern is not None and ready_log is None:
        raise InputError("needs --ready-log and --ready-pattern", field="--fail-pattern")
    if image_url and not embedded_chosen():
        # Ironic's boot interface takes HTTP(S) only (bmaas.drivers.ironic.boot)
        try:
            validate.image_url(image_url, schemes=("http", "https"))
        except ValueError as exc:
            raise InputError(f"{exc} (on Ironic)", field="--image") from None
    # built before anything powers on: what the logs hold now never counts
    ready = (
        SerialMarker(ready_log, ready_pattern, fail_pattern)
        if ready_log and ready_pattern
        else None
    )
    prefix = name_prefix or f"inst-{secrets.token_hex(2)}"
    wanted = _properties(properties)
    start = time.monotonic()
    command_deadline = app.deadline(limits["deadline"])  # before the store opens: it bounds it too
    if network is not None and embedded_chosen():
        # bad input is one line and exit 2, not a FAILED row per request
        # (on Ironic the backend's port ledger takes any network name)
        with exit_on_signals():
            known = sorted(n.name for n in app.store().ports.networks())
        if network not in known:
            raise InputError(
                f"no network {network!r} (enrolled: {', '.join(known) or 'none'})",
                field="--network",
            )
    requests = [
        Request(
            f"{prefix}-{i:03d}",
            resource_class=resource_class,
            properties=wanted,
            image_url=image_url,
            network=network,
        )
        for i in range(1, count + 1)
    ]
    with (
        interruptible() as token,
        make_provisioner(
            app,
            command_deadline=command_deadline,
            cancel=token,
            ready=ready,
            to_disk=to_disk,
            write_timeout=write_timeout,
            ready_timeout=ready_timeout,
            **limits,
        ) as provisioner,
        progress_lines(count, quiet=as_json, line=_progress_line) as tick,
    ):
        results = provisioner.provision_many(
            requests, workers=workers, on_result=tick, deadline=command_deadline
        )
    rows = [_row(r) for r in results]
    failed = [r for r in rows if not r["ok"]]
    elapsed = time.monotonic() - start
    summary = {
        "requests": rows,
        "ok": len(rows) - len(failed),
        "failed": len(failed),
        "elapsed": round(elapsed, 3),
    }
    if not emit(summary, as_json=as_json, as_yaml=False):
        table(
            [
                (
                    r["request"],
                    r["node"] or r["status"].upper(),
                    r["attempts"],
                    ",".join(r["faults"]),
                    f"{r['elapsed']:.1f}s",
                    r.get("error", ""),
                )
                for r in rows
            ],
            ["request", "node", "attempts", "faults seen", "time", "error"],
        )
        not_started = sum(1 for r in rows if r["status"] == "not started")
        tail = f" ({not_started} not started)" if not_started else ""
        click.echo(
            f"{len(rows) - len(failed)} deployed, {len(failed)} failed{tail} in {elapsed:.1f}s",
            err=True,
        )
    exit_if_interrupted(ctx, token)
    if failed:
        ctx.exit(EXIT_FAILURE)


@click.command("undeploy")
@click.argument("instances", nargs=-1)
@click.option("--all", "all_instances", is_flag=True, help="Every instance.")
@provisioner_options
@json_option()
@pass_app
@click.pass_context
def undeploy(
    ctx: click.Context,
    app: App,
    /,
    instances: Sequence[str],
    all_instances: bool,
    as_json: bool,
    **limits: Any,
) -> None:
    """Power off INSTANCE...'s nodes, eject media, release nodes and ports.

    Exit 1 when an instance failed (kept, with its nodes: a busy BMC or
    bmaas's own budget; undeploy it again) or a node was fenced (a fault of
    the node's own: released into maintenance). SIGINT/SIGTERM: the instance
    in hand is finished, the rest are reported "not started", exit 130/143."""
    if all_instances == bool(instances):
        raise InputError("name instances or give --all", field="INSTANCE")
    start = time.monotonic()
    command_deadline = app.deadline(limits["deadline"])
    rows: list[dict[str, Any]] = []
    with (
        interruptible() as token,
        make_provisioner(
            app, command_deadline=command_deadline, cancel=token, **limits
        ) as provisioner,
    ):
        names = [i.name for i in provisioner.instances()] if all_instances else list(instances)
        _all_known(provisioner, names)
        for name in names:
            row = _undeploy_one(provisioner, name, command_deadline, token)
            rows.append(row)
            if not as_json:
                click.echo(_undeploy_line(row))
    failed = sum(1 for r in rows if r["status"] == "failed")
    # a fenced node is a released instance whose node is now in maintenance:
    # the command did not do all it was asked, and a script must see it
    fenced = sum(len(r["fenced"]) for r in rows)
    summary = {
        "instances": rows,
        "ok": sum(1 for r in rows if r["ok"]),
        "failed": failed,
        "fenced": fenced,
        "elapsed": round(time.monotonic() - start, 3),
    }
    emit(summary, as_json=as_json, as_yaml=False)
    exit_if_interrupted(ctx, token)
    if failed or fenced:
        ctx.exit(EXIT_FAILURE)


def _undeploy_one(
    provisioner: Provisioner, name: str, command_deadline: Deadline, token: CancelToken
) -> dict[str, Any]:
    """One instance undeployed, as a ``--json`` row: ``status`` is
    ``released``, ``failed`` (with the ``fault``) or ``not started``;
    ``fenced`` lists the released nodes the system put into maintenance
    (the recorded fault names the step that failed: power.set, vmedia.eject)."""
    row: dict[str, Any] = {"instance": name, "ok": False, "nodes": [], "fenced": []}
    if token.cancelled:
        return {**row, "status": "not started", "reason": token.reason}
    try:
        nodes = provisioner.undeploy(name, deadline=command_deadline)
    except BmaasError as exc:
        return {**row, "status": "failed", "fault": exc.to_dict()}
    store = provisioner.store
    fenced = [rec for rec in map(store.nodes.get, nodes) if rec.fault] if store else []
    return {
        **row,
        "ok": True,
        "status": "released",
        "nodes": list(nodes),
        "fenced": [{"node": r.name, "reason": r.fault, "last_error": r.last_error} for r in fenced],
    }


def _undeploy_line(row: dict[str, Any]) -> str:
    name = row["instance"]
    if row["status"] == "not started":
        return f"{name}  not started  ({row['reason']})"
    if row["status"] == "failed":
        return f"{name}  FAIL  {row['fault']['class']}: {row['fault']['message']}"
    note = "".join(f" (fenced {f['node']}: {f['last_error']})" for f in row["fenced"])
    return f"{name}  ok    released {', '.join(row['nodes']) or 'nothing'}{note}"


def _all_known(provisioner: Provisioner, names: Sequence[str]) -> None:
    """An unknown instance is bad input (exit 2, one line each), found
    before any instance is touched, as ``move`` finds it."""
    unknown: list[InputError] = []
    for name in names:
        try:
            provisioner.instance(name)
        except InputError as exc:
            unknown.append(exc)
    if unknown:
        raise InputProblems(unknown)


@click.command("move")
@click.argument("instance_name", metavar="INSTANCE")
@click.option("--to", "target", default=None, help="Move to this node (default: best candidate).")
@provisioner_options
@pass_app
@click.pass_context
def move(
    ctx: click.Context, app: App, /, instance_name: str, target: str | None, **limits: Any
) -> None:
    """Re-deploy INSTANCE onto another node. The source is given back only
    once the target is up; if the target fails, the instance keeps its node.
    Exit 1 with every candidate's story when no target worked."""
    command_deadline = app.deadline(limits["deadline"])
    with (
        interruptible() as token,
        make_provisioner(
            app, command_deadline=command_deadline, cancel=token, **limits
        ) as provisioner,
    ):
        try:
            moved = provisioner.move(instance_name, to=target, deadline=command_deadline)
        except ProvisionFailed as exc:
            click.echo(f"{instance_name}: not moved: {exc.message}")
            for attempt in exc.attempts:
                click.echo(f"  {attempt}")
            exit_if_interrupted(ctx, token)
            ctx.exit(EXIT_FAILURE)
    tried = "".join(f"; {a}" for a in moved.attempts if not a.succeeded)
    click.echo(
        f"{moved.instance}: moved {moved.source} -> {moved.target} in {moved.elapsed:.1f}s{tried}"
    )
    exit_if_interrupted(ctx, token)


@click.group("instance")
def instance() -> None:
    """Deployed instances."""


@instance.command("list")
@json_option()
@backend_options
@pass_app
def instance_list(app: App, as_json: bool) -> None:
    """Every instance, with its node and state."""
    backend = chosen_backend()
    if backend is not None:
        rows = [_instance_row(i) for i in backend.instances()]
    else:
        rows = []
        store = app.store()
        for owner in store.owners.find(kind=OwnerKind.INSTANCE):
            allocations: list[Allocation | None] = list(store.owners.allocations(owner_id=owner.id))
            for allocation in allocations or [None]:
                node = store.nodes.get(allocation.node) if allocation else None
                rows.append(
                    {
                        "instance": owner.name or owner.id,
                        "id": owner.id,
                        "node": node.name if node else None,
                        "state": str(node.provision_state) if node else None,
                        "created_at": owner.created_at,
                        "request": owner.data.get("request"),
                    }
                )
    if not emit(rows, as_json=as_json, as_yaml=False):
        table([(r["instance"], r["node"], r["state"]) for r in rows], ["instance", "node", "state"])


def _instance_row(found: Any) -> dict[str, Any]:
    """An instance from a backend (Ironic) as ``instance list`` prints it."""
    return {
        "instance": found.name,
        "id": found.id,
        "node": found.node,
        "state": found.state,
        "created_at": None,
        "request": found.data.get("request"),
    }
