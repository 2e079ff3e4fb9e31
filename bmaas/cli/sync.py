"""``bmaas sync``: its options built once into :class:`~bmaas.sync.SyncSettings`,
what it reads through into :class:`~bmaas.sync.SyncParts`, then one pass or
the loop (:mod:`bmaas.sync`)."""

from __future__ import annotations

import contextlib
import dataclasses
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
    options,
    pass_app,
    print_results,
    progress,
)
from bmaas.cli.budget import room_for_the_store
from bmaas.cli.interrupt import relayed_signals
from bmaas.cliutil import EXIT_FAILURE, InputFile, InputProblems, Seconds, WholeNumber
from bmaas.deadline import Deadline
from bmaas.events import SAFETY_INTERVAL, EventWatch, PushSettings
from bmaas.faults import InputError
from bmaas.health import Change, HealthRule
from bmaas.heap import HeapSettler
from bmaas.liveness import LIVENESS_INTERVAL
from bmaas.ops import driver_factory
from bmaas.pool import idle_for_interval
from bmaas.provision.cancel import CancelToken
from bmaas.runtime import Runtime
from bmaas.share import FleetShare
from bmaas.store import DEFAULT_LEASE_TTL
from bmaas.sweep import MIN_NODES_PER_PROCESS, ShardedSweeper, auto_processes
from bmaas.sync import SyncParts, SyncReport, SyncSettings, sync_loop, sync_pass

if TYPE_CHECKING:  # imported when used: SQLAlchemy and prometheus_client after --deadline is made
    from bmaas.store import Store

__all__ = ["sync"]


def _in_a_row(flag: str, default: int, help_text: str) -> Decorator:
    """A hysteresis count: reads in a row (at least one)."""
    return click.option(
        flag, type=WholeNumber(min=1), default=default, show_default=True, help=help_text
    )


#: one pass, or a loop (``--interval``) and what it serves
loop_options = options(
    click.option(
        "--interval",
        type=Seconds(min=0, min_open=True),
        help="Keep running, one pass every S seconds.",
    ),
    click.option("--count", type=WholeNumber(min=1), help="With --interval: stop after N passes."),
    click.option(
        "--metrics-port",
        type=WholeNumber(min=0, max=65535),
        help="With --interval: serve Prometheus metrics on this port (0: any free).",
    ),
    click.option(
        "--metrics-addr",
        default="127.0.0.1",
        show_default=True,
        help="Address to serve metrics on.",
    ),
)

#: the hysteresis: reads in a row that fence a node and clear it
health_options = options(
    _in_a_row("--fault-after", 3, "Faulted reads in a row that put a node into 'power failure'."),
    _in_a_row("--recover-after", 2, "Good reads in a row that take it back out."),
)

#: how the fleet is split: with the other sync workers, over processes
split_options = options(
    click.option(
        "--split/--no-split",
        default=None,
        help="Split the fleet with the other sync workers on this database (several "
        "`bmaas sync --interval` processes; default: on with --interval).",
    ),
    click.option(
        "--lease-ttl",
        type=Seconds(min=1),
        default=DEFAULT_LEASE_TTL,
        show_default=True,
        help="With --split: seconds after which a dead worker's nodes are taken over.",
    ),
    click.option(
        "--processes",
        type=WholeNumber(min=1, max=256),
        help="Worker processes the nodes are sharded over, each with --workers threads "
        f"(default: one per core, one per {MIN_NODES_PER_PROCESS} nodes at most).",
    ),
)

#: following events: streamed (SSE) and pushed (the listener's address and TLS)
events_options = options(
    click.option(
        "--events/--no-events",
        default=True,
        show_default=True,
        help="With --interval: follow the power events of BMCs that stream them (Redfish SSE) "
        "and poll those nodes only as a safety net; --no-events polls every node every pass.",
    ),
    click.option(
        "--safety-interval",
        type=Seconds(min=0, min_open=True),
        default=SAFETY_INTERVAL,
        show_default=True,
        help="With events: a node whose stream is up is still read once its last read "
        "is S seconds old (at the first pass after; its session is kept meanwhile).",
    ),
    click.option(
        "--liveness-interval",
        type=Seconds(min=0),
        default=LIVENESS_INTERVAL,
        show_default=True,
        help="With events: a live stream proves the stream, not the API: a streamed node's "
        "API is read every S seconds anyway, each node at its own phase (3600/S reads per "
        "node-hour), so a hung API is faulted and fenced as a polled one; 0: never.",
    ),
    click.option(
        "--events-listen",
        metavar="HOST:PORT",
        help="With events: also take pushed events (Redfish EventDestination POSTs) on "
        "HOST:PORT, for services without SSE (or all, with --events-prefer-push).",
    ),
    click.option(
        "--events-listen-url",
        metavar="URL",
        help="The URL BMCs are told to POST to (default http(s)://HOST:PORT/bmaas/events).",
    ),
    click.option(
        "--events-tls-cert",
        type=InputFile(exists=True),
        help="Serve the push listener over HTTPS with this certificate (PEM, chain first).",
    ),
    click.option(
        "--events-tls-key",
        type=InputFile(exists=True),
        help="The certificate's private key (PEM; default: in the certificate file).",
    ),
    click.option(
        "--events-prefer-push",
        is_flag=True,
        help="Subscribe with push even where a service offers SSE (no socket held per service).",
    ),
)


@click.command("sync")
@loop_options
@health_options
@split_options
@events_options
@fleet_run_options
@pass_app
@click.pass_context
def sync(
    ctx: click.Context,
    app: App,
    /,
    metrics_port: int | None,
    metrics_addr: str,
    as_json: bool,
    **given: Any,
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
    --safety-interval seconds old, and their API every --liveness-interval
    seconds (--no-events: every pass).
    """
    if given["interval"] is None and (given["count"] is not None or metrics_port is not None):
        raise click.UsageError("--count and --metrics-port need --interval")
    settings = _settings(app, **given)
    # one pass: its deadline bounds the store too (made before the store opens)
    command_deadline = None if settings.interval is not None else app.deadline(settings.deadline)
    if command_deadline is not None:
        room_for_the_store(command_deadline, app.started, settings.deadline)
    store = app.store()
    with _sync_parts(app, store, settings, command_deadline) as parts:
        if command_deadline is None:
            _sync_loop(store, settings, parts, metrics_port, metrics_addr, as_json)
        else:
            _sync_once(ctx, store, settings, parts, command_deadline, as_json=as_json)


def _settings(
    app: App,
    *,
    fault_after: int,
    recover_after: int,
    no_retry: bool,
    split: bool | None,
    events: bool,
    events_listen: str | None,
    events_listen_url: str | None,
    events_tls_cert: str | None,
    events_tls_key: str | None,
    events_prefer_push: bool,
    **same: Any,
) -> SyncSettings:
    """``bmaas sync``'s options as one :class:`SyncSettings` (``same``: the
    options named as its fields), every problem with the push listener's at
    once. Events are followed by a loop only; ``--split`` is on in a loop
    unless said."""
    loop = same["interval"] is not None
    given = (events_listen, events_listen_url, events_tls_cert, events_tls_key, events_prefer_push)
    return SyncSettings(
        health_rule=HealthRule(fault_after=fault_after, recover_after=recover_after),
        retry=app.retry_limits(no_retry=no_retry),
        split=loop if split is None else split,
        events=loop and events,
        push=_push_settings(*given, following=loop and events),
        **same,
    )


@contextlib.contextmanager
def _sync_parts(
    app: App, store: Store, settings: SyncSettings, command_deadline: Deadline | None
) -> Iterator[SyncParts]:
    """The command's one runtime (one pooled session per BMC for its life:
    a loop logs in once, not once per pass), the fleet share and the worker
    processes, closed when it ends: one pass's runtime within its deadline
    (the BMCs expire what is left: issue 36), a loop's at its end."""
    processes = settings.processes
    if processes is None:
        # In-process fakes (a test's fleet) cannot cross into other processes.
        real = app.make_factory is driver_factory
        processes = auto_processes(len(store.nodes.find())) if real else 1
    # sessions used once a pass outlive the wait between passes
    idle = idle_for_interval(settings.interval)
    with contextlib.ExitStack() as stack:
        # a loop's keeper keeps sessions alive between passes; silent BMCs are
        # read on the sync's own back-off (bmaas.fenced), not probed
        loop = settings.interval is not None
        rt = Runtime(idle=idle, wait=settings.bmc_timeout, keep=loop, probe=False)
        if command_deadline is None:
            stack.enter_context(rt)
        else:
            stack.callback(rt.close, command_deadline)
        factory = app.factory(settings.bmc_timeout)
        share = None
        if settings.split:
            share = stack.enter_context(FleetShare(store, ttl=settings.lease_ttl))
        sweeper = None
        if processes > 1:
            sweeper = stack.enter_context(
                ShardedSweeper(
                    processes=processes,
                    workers=settings.workers,
                    make_factory=app.make_factory,
                    factory_options={"bmc_timeout": settings.bmc_timeout},
                    idle=idle,
                    wait=settings.bmc_timeout,
                )
            )
        yield SyncParts(factory, rt=rt, sweeper=sweeper, share=share)


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


def _sync_once(
    ctx: click.Context,
    store: Store,
    settings: SyncSettings,
    parts: SyncParts,
    deadline: Deadline,
    *,
    as_json: bool,
) -> None:
    start = time.monotonic()
    with progress(len(store.nodes.find()), "sync", quiet=as_json) as advance:
        report = sync_pass(
            store, settings, parts, on_result=lambda _r: advance(), deadline=deadline
        )
    if as_json:
        emit(report.to_dict(), as_json=True, as_yaml=False)
        ctx.exit(EXIT_FAILURE if report.failed else 0)
    code = print_results(report.results, as_json=False, elapsed=time.monotonic() - start)
    click.echo(_pass_line(1, report), err=True)
    ctx.exit(code)


def _sync_loop(
    store: Store,
    settings: SyncSettings,
    parts: SyncParts,
    metrics_port: int | None,
    metrics_addr: str,
    as_json: bool,
) -> None:
    from bmaas.metrics import SyncMetrics  # prometheus_client: only for a loop that serves it

    metrics = SyncMetrics() if metrics_port is not None else None
    watch = None
    if settings.events:
        watch = EventWatch(
            safety=settings.safety_interval,
            liveness=settings.liveness_interval,
            bmc_timeout=settings.bmc_timeout,
            push=settings.push,
        )
    parts = dataclasses.replace(parts, events=watch, metrics=metrics)
    with _stop_on_signals() as token, contextlib.ExitStack() as closing:
        if watch is not None:
            watch.bind_stop(token)
            closing.callback(watch.close)
        if parts.sweeper is None and settings.retry is not None:
            # in-process reads: their busy backoff sleeps on the token
            retry = settings.retry.replace(sleep=token.sleeper(in_flight=False))
            settings = dataclasses.replace(settings, retry=retry)
        if metrics is not None:
            server = metrics.serve(metrics_port or 0, addr=metrics_addr)
            closing.callback(server.close)
            click.echo(f"metrics on http://{metrics_addr}:{server.port}/metrics", err=True)
        sync_loop(
            store,
            settings,
            parts,
            # this process is the command's own (bmaas.heap)
            heap=HeapSettler() if parts.sweeper is None else None,
            stop=token.event,
            on_pass=_pass_printer(watch, as_json=as_json),
        )


def _pass_printer(watch: EventWatch | None, *, as_json: bool) -> Callable[[SyncReport], None]:
    """One line (or JSON object) a pass, with the events' summary."""
    passes = 0

    def on_pass(report: SyncReport) -> None:
        nonlocal passes
        passes += 1
        if as_json:
            extra = {} if watch is None else {"events": watch.summary()}
            emit({"pass": passes, **report.to_dict(), **extra}, as_json=True, as_yaml=False)
        else:
            tail = "" if watch is None else f", events: {watch.summary_line()}"
            click.echo(_pass_line(passes, report) + tail)

    return on_pass
