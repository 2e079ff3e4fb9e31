"""``bmaas maintenance ...`` and ``bmaas sync``."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import click

from bmaas import listenspec
from bmaas.cli.app import (
    App,
    Decorator,
    emit,
    fleet_run_options,
    json_option,
    pass_app,
    print_results,
    progress,
    whoami,
)
from bmaas.cli.budget import room_for_the_store
from bmaas.cli.deploy import make_provisioner, provisioner_options
from bmaas.cli.interrupt import exit_if_interrupted, interruptible, relayed_signals
from bmaas.cliutil import EXIT_FAILURE, InputFile, InputProblems, Seconds
from bmaas.deadline import Deadline
from bmaas.events import SAFETY_INTERVAL, EventWatch, PushSettings
from bmaas.faults import InputError
from bmaas.health import Change, HealthRule
from bmaas.heap import HeapSettler
from bmaas.ops import driver_factory
from bmaas.pool import DriverPool, idle_for_interval
from bmaas.provision.cancel import CancelToken
from bmaas.provision.maintenance import evacuate as evacuate_nodes
from bmaas.provision.readiness import readiness
from bmaas.share import FleetShare
from bmaas.store import DEFAULT_LEASE_TTL, NodeRecord
from bmaas.sweep import MIN_NODES_PER_PROCESS, ShardedSweeper, auto_processes
from bmaas.sync import SyncReport, sync_loop, sync_pass

if TYPE_CHECKING:  # imported when used: SQLAlchemy and prometheus_client after --deadline is made
    from bmaas.metrics import MetricsServer
    from bmaas.store import Store

__all__ = ["maintenance", "sync"]


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
        for s in states:
            label = "ready" if s["ready"] else "not ready"
            click.echo(f"{s['node']:<{width}}  {label:<9}  {s['detail']}")
    if not all(s["ready"] for s in states):
        ctx.exit(EXIT_FAILURE)


# -- sync ----------------------------------------------------------------------------


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[CancelToken]:
    """A token cancelled by SIGINT/SIGTERM: the wait between passes ends at
    once, and so does every busy backoff of the pass in flight (its reads are
    reported, not retried further; sharded passes finish their reads within
    the pass deadline). Cancelled from the signal relay's thread, never from
    the handler (see :func:`relayed_signals`)."""
    token = CancelToken()

    def stop(signum: int) -> None:
        token.cancel(f"{signal.Signals(signum).name} received", signum=signum)

    with relayed_signals(stop):
        yield token


def _pass_line(number: int, report: SyncReport) -> str:
    faulted = ", ".join(report.nodes_with(Change.FAULTED)) or "-"
    recovered = ", ".join(report.nodes_with(Change.RECOVERED)) or "-"
    auth = f" ({len(report.auth_failed)} credentials rejected)" if report.auth_failed else ""
    sessions = ""
    if report.sessions is not None:
        rpl = report.sessions.reads_per_login
        sessions = (
            f", logins: {report.sessions.logins}, reads per login: "
            f"{'-' if rpl is None else f'{rpl:.1f}'}"
        )
    return (
        f"pass {number}: {len(report.results)} nodes read, {len(report.failed)} failed{auth}, "
        f"into fault: {faulted}, recovered: {recovered}, reclaimed: {len(report.reclaimed)}"
        f"{sessions}, {report.duration:.2f}s"
    )


def _in_a_row(flag: str, default: int, help_text: str) -> Decorator:
    """A hysteresis count: reads in a row (at least one)."""
    return click.option(
        flag, type=click.IntRange(min=1), default=default, show_default=True, help=help_text
    )


@click.command("sync")
@click.option(
    "--interval",
    type=Seconds(min=0, min_open=True),
    help="Keep running, one pass every S seconds.",
)
@click.option("--count", type=click.IntRange(min=1), help="With --interval: stop after N passes.")
@click.option(
    "--metrics-port",
    type=click.IntRange(min=0, max=65535),
    help="With --interval: serve Prometheus metrics on this port (0: any free).",
)
@click.option(
    "--metrics-addr", default="127.0.0.1", show_default=True, help="Address to serve metrics on."
)
@_in_a_row("--fault-after", 3, "Faulted reads in a row that put a node into 'power failure'.")
@_in_a_row("--recover-after", 2, "Good reads in a row that take it back out.")
@click.option(
    "--split/--no-split",
    default=None,
    help="Split the fleet with the other sync workers on this database (several "
    "`bmaas sync --interval` processes; default: on with --interval).",
)
@click.option(
    "--lease-ttl",
    type=Seconds(min=1),
    default=DEFAULT_LEASE_TTL,
    show_default=True,
    help="With --split: seconds after which a dead worker's nodes are taken over.",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1, max=256),
    help="Worker processes the nodes are sharded over, each with --workers threads "
    f"(default: one per core, one per {MIN_NODES_PER_PROCESS} nodes at most).",
)
@click.option(
    "--events/--no-events",
    default=True,
    show_default=True,
    help="With --interval: follow the power events of BMCs that stream them (Redfish SSE) "
    "and poll those nodes only as a safety net; --no-events polls every node every pass.",
)
@click.option(
    "--safety-interval",
    type=Seconds(min=0, min_open=True),
    default=SAFETY_INTERVAL,
    show_default=True,
    help="With events: a node whose stream is up is still read once its last read "
    "is S seconds old (at the first pass after; its session is kept meanwhile).",
)
@click.option(
    "--events-listen",
    metavar="HOST:PORT",
    help="With events: also take pushed events (Redfish EventDestination POSTs) on "
    "HOST:PORT, for services without SSE (or all, with --events-prefer-push).",
)
@click.option(
    "--events-listen-url",
    metavar="URL",
    help="The URL BMCs are told to POST to (default http(s)://HOST:PORT/bmaas/events).",
)
@click.option(
    "--events-tls-cert",
    type=InputFile(exists=True),
    help="Serve the push listener over HTTPS with this certificate (PEM, chain first).",
)
@click.option(
    "--events-tls-key",
    type=InputFile(exists=True),
    help="The certificate's private key (PEM; default: in the certificate file).",
)
@click.option(
    "--events-prefer-push",
    is_flag=True,
    help="Subscribe with push even where a service offers SSE (no socket held per service).",
)
@fleet_run_options
@pass_app
@click.pass_context
def sync(
    ctx: click.Context,
    app: App,
    interval: float | None,
    count: int | None,
    metrics_port: int | None,
    metrics_addr: str,
    fault_after: int,
    recover_after: int,
    split: bool | None,
    lease_ttl: float,
    processes: int | None,
    events: bool,
    safety_interval: float,
    events_listen: str | None,
    events_listen_url: str | None,
    events_tls_cert: str | None,
    events_tls_key: str | None,
    events_prefer_push: bool,
    workers: int,
    deadline: float,
    no_retry: bool,
    bmc_timeout: float,
    as_json: bool,
) -> None:
    """Read every node's power state and record it, with hysteresis.

    Each read goes through the operation retry (--no-retry: one attempt).
    Only faults that say something about the node count toward 'power
    failure' (never a busy BMC or rejected credentials). One pass by default
    (exit 1 if any read still failed); --deadline bounds it. With --interval
    it keeps running until SIGINT/SIGTERM, printing one line per pass, and
    --deadline bounds each pass. Sessions last: one pooled session per BMC
    for the command's life (reads per login in each pass line). With
    --interval, a Redfish service that streams events (SSE) is followed:
    its power events are recorded as they come (source: event) and its
    nodes read only as a safety net, once their last read is
    --safety-interval seconds old (--no-events: every pass).
    """
    if interval is None and (count is not None or metrics_port is not None):
        raise click.UsageError("--count and --metrics-port need --interval")
    push = _push_settings(
        events_listen,
        events_listen_url,
        events_tls_cert,
        events_tls_key,
        events_prefer_push,
        following=interval is not None and events,
    )
    if split is None:
        split = interval is not None
    # one pass: its deadline bounds the store too (made before the store opens)
    command_deadline = app.deadline(deadline) if interval is None else None
    if command_deadline is not None:
        room_for_the_store(command_deadline, app.started, deadline)
    store = app.store()
    policy = HealthRule(fault_after=fault_after, recover_after=recover_after)
    if processes is None:
        # In-process fakes (a test's fleet) cannot cross into other processes.
        real = app.make_factory is driver_factory
        processes = auto_processes(len(store.nodes.find())) if real else 1
    # One pooled session per BMC for the command's life: a loop logs in once,
    # not once per pass; every session is logged out when the command ends.
    with contextlib.ExitStack() as stack:
        # sessions used once a pass outlive the wait between passes
        idle = idle_for_interval(interval)
        pool = DriverPool(wait=bmc_timeout, idle=idle)
        # one pass: its sessions are logged out within its deadline, never past
        # it (the BMCs expire what is left: issue 36); a loop's, at the end
        stack.callback(pool.close, command_deadline)
        options: dict[str, Any] = {
            "factory": app.factory(bmc_timeout),
            "health_rule": policy,
            "workers": workers,
            "pool": pool,
            "retry": app.retry_limits(no_retry=no_retry),
        }
        if split:
            options["share"] = stack.enter_context(FleetShare(store, ttl=lease_ttl))
        if processes > 1:
            options["sweeper"] = stack.enter_context(
                ShardedSweeper(
                    processes=processes,
                    workers=workers,
                    make_factory=app.make_factory,
                    factory_options={"bmc_timeout": bmc_timeout},
                    idle=idle,
                    wait=bmc_timeout,
                )
            )
        if interval is None:
            assert command_deadline is not None
            _sync_once(ctx, store, options, command_deadline, as_json=as_json)
        else:
            options["pass_timeout"] = deadline
            if events:
                options["events"] = EventWatch(
                    safety=safety_interval, bmc_timeout=bmc_timeout, push=push
                )
            _sync_loop(store, options, interval, count, metrics_port, metrics_addr, as_json)


def _push_settings(
    listen: str | None,
    url: str | None,
    cert: str | None,
    key: str | None,
    prefer: bool,
    *,
    following: bool = True,
) -> PushSettings | None:
    """The push listener's settings, every problem at once (one ``error:``
    line each, exit 2), before anything starts: the address is bound and
    let go, the certificate loaded with its key (:mod:`bmaas.listenspec`).
    ``following``: the command follows events (``--interval``, events on)."""
    problems: list[InputError] = []
    if listen is None:
        given = [n for n, v in (("--events-listen-url", url), ("--events-tls-cert", cert)) if v]
        given += ["--events-tls-key"] if key else []
        given += ["--events-prefer-push"] if prefer else []
        if given:
            problems.append(InputError(f"{', '.join(given)} need --events-listen HOST:PORT"))
            raise InputProblems(problems)
        return None

    def check(option: str, checker: Callable[[], Any]) -> Any:
        try:
            return checker()
        except ValueError as exc:
            problems.append(InputError(str(exc), field=option))
            return None

    if not following:
        why = "needs --interval, events on (nothing else takes pushed events)"
        problems.append(InputError(why, field="--events-listen"))
    address = check("--events-listen", lambda: listenspec.host_port(listen))
    if address is not None and following:
        check("--events-listen", lambda: listenspec.listening_socket(*address).close())
    if url is not None:
        check("--events-listen-url", lambda: listenspec.destination(url))
    if key and not cert:
        problems.append(InputError("needs --events-tls-cert", field="--events-tls-key"))
    elif cert:
        option = "--events-tls-cert" if key is None else "--events-tls-cert/--events-tls-key"
        check(option, lambda: listenspec.server_context(cert, key))
    if problems:
        raise InputProblems(problems)
    host, port = address
    return PushSettings(host, port, url, cert, key, prefer)


def _sync_once(
    ctx: click.Context,
    store: Store,
    options: dict[str, Any],
    deadline: Deadline,
    *,
    as_json: bool,
) -> None:
    start = time.monotonic()
    with progress(len(store.nodes.find()), "sync", quiet=as_json) as advance:
        report = sync_pass(store, on_result=lambda _r: advance(), deadline=deadline, **options)
    if as_json:
        emit(report.to_dict(), as_json=True, as_yaml=False)
        ctx.exit(EXIT_FAILURE if report.failed else 0)
    code = print_results(report.results, as_json=False, elapsed=time.monotonic() - start)
    click.echo(_pass_line(1, report), err=True)
    ctx.exit(code)


def _sync_loop(
    store: Store,
    options: dict[str, Any],
    interval: float,
    count: int | None,
    metrics_port: int | None,
    metrics_addr: str,
    as_json: bool,
) -> None:
    from bmaas.metrics import SyncMetrics  # prometheus_client: only for a loop that serves it

    metrics = SyncMetrics() if metrics_port is not None else None
    server: MetricsServer | None = None
    passes = 0

    watch: EventWatch | None = options.get("events")

    def on_pass(report: SyncReport) -> None:
        nonlocal passes
        passes += 1
        if as_json:
            extra = {} if watch is None else {"events": watch.summary()}
            emit({"pass": passes, **report.to_dict(), **extra}, as_json=True, as_yaml=False)
        else:
            tail = "" if watch is None else f", events: {watch.summary_line()}"
            click.echo(_pass_line(passes, report) + tail)

    with _stop_on_signals() as token, contextlib.ExitStack() as closing:
        if watch is not None:
            watch.bind_stop(token)
            closing.callback(watch.close)
        if options.get("sweeper") is None and options.get("retry") is not None:
            # in-process reads: their busy backoff sleeps on the token
            options["retry"] = options["retry"].replace(sleep=token.sleeper(in_flight=False))
        if metrics is not None:
            server = metrics.serve(metrics_port or 0, addr=metrics_addr)
            click.echo(f"metrics on http://{metrics_addr}:{server.port}/metrics", err=True)
        try:
            sync_loop(
                store,
                # this process is the command's own (bmaas.heap)
                heap=HeapSettler() if options.get("sweeper") is None else None,
                interval=interval,
                count=count,
                stop=token.event,
                on_pass=on_pass,
                metrics=metrics,
                **options,
            )
        finally:
            if server is not None:
                server.close()
