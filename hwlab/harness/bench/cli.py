"""``hwlab bench NAME``: the benchmark scenarios as commands.

Each command runs one scenario on private labs on 127.0.0.1 and prints a
table; ``--json`` prints the whole report for machines, ``--report DIR``
also writes a PNG chart and a Markdown summary, and ``--smoke`` runs a tiny
size in seconds (what CI runs to keep them working). Scenario modules (and
matplotlib, psutil, the drivers) are imported only when a command runs, so
``hwlab --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from bmaas.cliutil import (
    EXIT_FAILURE,
    FiniteFloat,
    InputProblems,
    Name,
    Seconds,
    WholeNumber,
    emit_json,
)
from bmaas.faults import InputError

__all__ = ["bench"]


@click.group()
@click.pass_context
def bench(ctx: click.Context) -> None:
    """Performance and resilience benchmarks on a private lab (loopback only).

    \b
    hwlab bench fault-detection     # seconds to a typed fault: bmaas vs pyghmi, sushy, ipmitool
    hwlab bench fleet-sweep         # power status of 100-1000 nodes vs ipmitool x 8 workers
    hwlab bench goodput             # deploys on a flaky rack: no retry, blind reschedule, bmaas
    hwlab bench ironic              # stock vs bmaas-* hardware types through a real Ironic
    hwlab bench ironic-scale        # nodes per Ironic conductor: sync pass, CPU, API p95
    hwlab bench ironic-reboot       # power on through a rebooting / busy BMC via Ironic's API
    hwlab bench lifecycle           # BIOS change, firmware update: stock/bmaas Ironic, bmaas CLI
    hwlab bench lab-scale           # lab start time, memory, requests per second
    hwlab bench overhead            # one power read: bmaas vs bare pyghmi / sushy
    hwlab bench overrun             # how long after a 2 s deadline a call returns, per effect
    hwlab bench overload            # overload events per client on a lab of fragile BMCs
    hwlab bench events              # outside power changes: events + safety net vs polling
    hwlab bench sync-cpu            # sync CPU per node-pass vs bare sushy, per node-hour
    hwlab bench all --report DIR    # every scenario, charts and summaries in DIR

    Each takes --smoke (seconds), --json and --report DIR.

    Exit codes: 0 every row measured; 1 the benchmark ran but a row could not
    be measured (the report says why); 2 bad input, before anything starts.
    """
    from bmaas.gate import environment_problems

    problems = environment_problems()  # the drivers a benchmark runs read them
    if problems:
        raise InputProblems(problems)


def bench_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option(
        "--report",
        "report_dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Also write NAME.png (chart), NAME.md (summary) and NAME.json here.",
    )(fn)
    fn = click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")(fn)
    return click.option(
        "--smoke", is_flag=True, help="A tiny size that runs in seconds (what CI runs)."
    )(fn)


def _command(ctx: click.Context) -> str:
    """The command that reproduces the figures: the options that were given."""
    words = [ctx.command_path]
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        secondary = getattr(param, "secondary_opts", None)
        if value is False and secondary and value != param.default:
            words.append(secondary[0])  # --no-fence
            continue
        if value in (None, False, ()) or value == param.default or not param.opts:
            continue
        flag = max(param.opts, key=len)
        if value is True:
            words.append(flag)
        else:
            values = value if isinstance(value, tuple) else (value,)
            words += [f"{flag} {v}" for v in values]
    return " ".join(words)


def _progress(message: str) -> None:
    if sys.stderr.isatty():
        click.echo(f"  {message}", err=True)


def _run(
    ctx: click.Context,
    build: Callable[[], Any],
    *,
    smoke: bool,
    as_json: bool,
    report_dir: Path | None,
    quiet: bool = False,
    command: str | None = None,
) -> Any:
    from bmaas.hwlab.harness.bench.common import no_stray_children
    from bmaas.hwlab.harness.bench.report import cpu_busy, environment, print_report, write_report

    busy_before = cpu_busy()
    start = time.monotonic()
    with no_stray_children() as killed, _quiet_library_logs(), _sigterm_interrupts():
        report = build()
    report.elapsed = round(time.monotonic() - start, 1)
    report.smoke = smoke
    report.command = command or _command(ctx)
    report.env = environment(busy_before, cpu_busy())
    if killed:
        report.notes.append(f"killed {len(killed)} child process(es) left running at the end")
    written = write_report(report, report_dir) if report_dir is not None else {}
    if as_json:
        emit_json(report.to_dict())
    elif not quiet:
        print_report(report)
        for path in written.values():
            click.echo(f"wrote {path}")
    if report.unmeasured and not quiet:
        _failed(ctx, [report])
    return report


def _failed(ctx: click.Context, reports: list[Any]) -> None:
    """A benchmark that could not measure a row ran, but failed: an
    ``error:`` line per row and exit 1 (a run that measured nothing exited 0)."""
    for report in reports:
        for row in report.unmeasured:
            click.echo(f"error: {report.scenario}: not measured: {row}", err=True)
    ctx.exit(EXIT_FAILURE)


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM stops a benchmark as Ctrl-C does: every lab, Ironic and
    worker it started is stopped on the way out (a background run, whose
    SIGINT the shell ignores, is stopped with ``kill``)."""
    import signal

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread (a test runner's): leave it be
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _quiet_library_logs() -> Iterator[None]:
    """The faults a benchmark provokes on purpose are logged as warnings by
    bmaas (retries, reschedules); the report counts them. Heard with -v."""
    bmaas_log = logging.getLogger("bmaas")
    if logging.getLogger().getEffectiveLevel() < logging.WARNING:
        yield
        return
    level = bmaas_log.level
    bmaas_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        bmaas_log.setLevel(level)


def _scenario(ctx: click.Context, module_name: str) -> None:
    """Run ``bmaas.hwlab.harness.bench.<module_name>`` at its full or smoke size, with the
    options given on the command line on top (they are named as the
    scenario's ``Options`` fields; an option not given is None or empty)."""
    import dataclasses
    import importlib

    given = dict(ctx.params)
    smoke, as_json, report_dir = given.pop("smoke"), given.pop("as_json"), given.pop("report_dir")
    module = importlib.import_module(f"bmaas.hwlab.harness.bench.{module_name}")
    base = module.Options.smoke() if smoke else module.Options()
    options = dataclasses.replace(base, **{k: v for k, v in given.items() if v not in (None, ())})
    _run(
        ctx,
        lambda: module.run(options, progress=_progress),
        smoke=smoke,
        as_json=as_json,
        report_dir=report_dir,
    )


@bench.command("fault-detection")
@click.option("--runs", type=WholeNumber(1, 50), help="Trials per cell (default 5; smoke 1).")
@click.option(
    "--cap",
    type=Seconds(1, 900),
    help="Seconds a trial may wait before it is reported as gave up (default 90; smoke 3).",
)
@click.option("--parallel", type=WholeNumber(1, 32), help="Trials at once (default 10).")
@bench_options
@click.pass_context
def fault_detection(ctx: click.Context, /, **_: Any) -> None:
    """Seconds from a power read to a typed fault (hang, refused, busy, wrong
    password): bmaas vs bare pyghmi, bare sushy and ipmitool as Ironic runs it."""
    _scenario(ctx, "fault_detection")


def sizes_option(
    defaults: str, cap: int = 2000
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(
        "--size",
        "sizes",
        multiple=True,
        type=WholeNumber(2, cap),
        help=f"Lab size in nodes (repeatable; default {defaults}; smoke 20).",
    )


@bench.command("fleet-sweep")
@sizes_option("100, 300 and 1000", cap=10_000)
@click.option("--rounds", type=WholeNumber(1, 20), help="Rounds per size (default 3).")
@click.option("--workers", type=WholeNumber(1, 256), help="bmaas threads per process (default 32).")
@click.option(
    "--processes",
    type=WholeNumber(1, 256),
    help="Sweep processes of the sharded rows (default: one per core).",
)
@click.option(
    "--hung-fraction",
    type=FiniteFloat(0, 1, min_open=True, max_open=True),
    help="Also hang this share of the nodes (0.05: 5%) and time the sync's passes "
    "once it has fenced them, over a healthy pass.",
)
@bench_options
@click.pass_context
def fleet_sweep(ctx: click.Context, /, **_: Any) -> None:
    """Power status of every node of labs up to 10,000 nodes: bmaas cold (a login
    per read) and steady (sessions kept, in one process and sharded over
    cores) vs one ipmitool process per IPMI node, 8 at a time (Ironic's power
    sync); nodes/s and client CPU per read."""
    _scenario(ctx, "fleet_sweep")


@bench.command("goodput")
@click.option("--nodes", type=WholeNumber(2, 1000), help="Nodes in the lab (default 48).")
@click.option("--requests", type=WholeNumber(1, 1000), help="Deploy requests (default 32).")
@click.option("--profile", help="Fault profile(s) of the lab (default flaky,dead-bmc,brownout).")
@click.option("--seed", type=WholeNumber(), help="Seed of the lab (default 7).")
@click.option(
    "--share",
    "shares",
    multiple=True,
    type=FiniteFloat(0, 1),
    help="Faulty share for the success-rate chart (repeatable; default 0 0.1 0.25 0.5).",
)
@click.option(
    "--backend",
    type=click.Choice(["embedded", "ironic"]),
    default="embedded",
    show_default=True,
    help="ironic: the same three strategies through a real Ironic (scripts/ironic-env.sh).",
)
@bench_options
@click.pass_context
def goodput(ctx: click.Context, /, **_: Any) -> None:
    """Deploys on a seeded flaky lab, three ways: no retry, blind reschedule
    (what Nova did) and bmaas's typed retry; success, time to active, BMC
    calls, ports, leaks. With --backend ironic, through a real Ironic
    (--nodes, --requests and --seed apply; the lab layout is fixed)."""
    if ctx.params["backend"] == "ironic":
        for unused in ("profile", "shares"):
            if ctx.params.pop(unused) not in (None, ()):
                raise click.UsageError(f"--{unused} applies to the embedded backend only")
        _scenario(ctx, "goodput_ironic")
        return
    ctx.params.pop("backend")
    _scenario(ctx, "goodput")


#: the field incidents ``hwlab bench ironic`` can inject (its INCIDENT_FAULTS;
#: named here so the command line loads without the harness; a test holds them equal)
INCIDENT_NAMES = (
    "idrac10-power-on-conflict",
    "ilo-settling",
    "idrac-already-on",
    "ilo-already-on",
    "supermicro-licence",
    "idrac-licence",
    "ipmi-node-busy",
    "ipmi-not-in-present-state",
    "ipmi-no-session-slot",
    "firmware-update",
)


@bench.command("ironic")
@click.option(
    "--fault",
    "faults",
    multiple=True,
    type=click.Choice(
        ["busy", "internal_error", "auth_fail", "hang", "power_stuck", *INCIDENT_NAMES]
    ),
    help="Fault classes or field incidents to inject (repeatable; default all; smoke "
    "internal_error).",
)
@click.option(
    "--incidents",
    is_flag=True,
    help="The field-incident catalogue only, with a one-pass sync phase.",
)
@click.option("--cap", type=Seconds(10, 3600), help="Seconds to wait for Ironic (default 150).")
@click.option(
    "--settle",
    type=Seconds(0, 3600),
    help="Seconds of power sync before maintenance is read (default 40).",
)
@click.option("--sync-nodes", type=WholeNumber(1, 200), help="Nodes per type (default 10).")
@click.option("--passes", type=WholeNumber(1, 100), help="Power sync passes (default 10).")
@click.option("--busy", type=FiniteFloat(0, 1), help="Busy share of reads (default 0.5).")
@bench_options
@click.pass_context
def ironic(ctx: click.Context, /, **_: Any) -> None:
    """Stock ipmi/redfish vs bmaas-ipmi/bmaas-redfish through one real Ironic
    (needs scripts/ironic-env.sh): time to error per fault, last_error,
    maintenance, and power sync on busy BMCs with conductor CPU per node.
    With --incidents: each field incident (bmaas.fakes.incidents) that a power-on
    meets, on the hardware types of its protocol."""
    if ctx.params.pop("incidents"):
        from bmaas.hwlab.harness.bench.ironic import INCIDENT_FAULTS

        if not ctx.params.get("faults"):
            ctx.params["faults"] = tuple(INCIDENT_FAULTS)
        for key, value in (("settle", 10.0), ("sync_nodes", 1), ("passes", 1), ("cap", 120.0)):
            if ctx.params.get(key) is None:
                ctx.params[key] = value
    _scenario(ctx, "ironic")


#: the Ironic a bench starts: another installed release, or the current one
release_option = click.option(
    "--release",
    type=Name(max_length=64),
    help="Another Ironic release, installed by `scripts/ironic-env.sh --release RELEASE` "
    "(default: the current one, .venv-ironic).",
)


@bench.command("ironic-reboot")
@click.option("--rounds", type=WholeNumber(1, 20), help="Rounds (default 2; smoke 1).")
@click.option(
    "--window",
    "windows",
    multiple=True,
    type=Seconds(1, 600),
    help="BMC reboot window in seconds (repeatable; default 10, 45 and 120; smoke 10).",
)
@click.option(
    "--busy",
    type=WholeNumber(0, 100),
    help="'Node busy' answers per busy trial on the IPMI types (default 6; 0: none).",
)
@click.option(
    "--type",
    "types",
    multiple=True,
    type=click.Choice(["bmaas-ipmi", "ipmi", "bmaas-redfish", "redfish"]),
    help="Hardware types (repeatable; default all four; smoke bmaas-ipmi, ipmi).",
)
@click.option("--cap", type=Seconds(10, 3600), help="Seconds any one wait may take (default 300).")
@click.option(
    "--watch",
    type=Seconds(0, 3600),
    help="Seconds the machine is watched after the outcome for Ironic switching it back "
    "off (default 75: a power sync and its read; smoke 0).",
)
@release_option
@bench_options
@click.pass_context
def ironic_reboot(ctx: click.Context, /, **_: Any) -> None:
    """Power on through Ironic's API while the BMC reboots (a firmware
    update) or answers 'node busy', as an operator does (needs
    scripts/ironic-env.sh): bmaas-ipmi/bmaas-redfish beside stock
    ipmi/redfish in one Ironic with the README's [bmaas] defaults; per trial
    the outcome (on, or the error) and the seconds from the request."""
    _scenario(ctx, "ironic_reboot")


@bench.command("lifecycle")
@click.option("--trials", type=WholeNumber(1, 20), help="Trials per row (default 3; smoke 1).")
@click.option(
    "--cap", type=Seconds(10, 3600), help="Seconds a trial may wait for its end (default 240)."
)
@click.option(
    "--pending-cap",
    type=Seconds(5, 3600),
    help="Seconds a pending-BIOS trial may wait (stock keeps waiting; default 60; smoke 30).",
)
@release_option
@bench_options
@click.pass_context
def lifecycle(ctx: click.Context, /, **_: Any) -> None:
    """A BIOS change (clean, and a setting left pending) and a firmware
    update through a BMC reboot (needs scripts/ironic-env.sh): stock redfish
    and bmaas-redfish through Ironic's clean steps, and bmaas's CLI (`bios
    set --reboot`, `firmware update`); per row the trials that ended right,
    the median seconds to the end state, the end states and the faults."""
    _scenario(ctx, "lifecycle")


@bench.command("ironic-scale")
@sizes_option("100 and 1000", cap=10_000)
@click.option(
    "--type",
    "types",
    multiple=True,
    type=click.Choice(["ipmi", "bmaas-ipmi", "redfish", "bmaas-redfish", "fake-hardware"]),
    help="Hardware types to measure (repeatable; default the four real ones; smoke ipmi, "
    "bmaas-ipmi); fake-hardware (Ironic's own, no BMC asked) gives the floor: what a "
    "sync pass costs Ironic itself.",
)
@click.option(
    "--interval",
    type=WholeNumber(2, 3600),
    help="Ironic's [conductor]sync_power_state_interval (default 120, Ironic's).",
)
@click.option("--passes", type=WholeNumber(1, 20), help="Clean passes measured (default 2).")
@click.option(
    "--fence/--no-fence",
    default=None,
    help="Time how long Ironic takes to fence one dead BMC (default on).",
)
@click.option(
    "--hung-fraction",
    type=FiniteFloat(0, 1, min_open=True, max_open=True),
    help="Also hang this share of the BMCs (0.05: 5%) and report the longest pass until "
    "Ironic has fenced them, over the clean median.",
)
@click.option("--cap", type=Seconds(10, 7200), help="Seconds any one wait may take (default 1800).")
@click.option(
    "--enroll-via",
    type=click.Choice(["api", "db"]),
    help="api (default): create and manage each node through the REST API; db: write "
    "them manageable through Ironic's object layer before it starts (10,000 nodes in a "
    "minute instead of 40).",
)
@click.option(
    "--conf",
    multiple=True,
    metavar="SECTION.OPTION=VALUE",
    help="An ironic.conf setting for every Ironic of the run (repeatable), e.g. "
    "bmaas.keep_sessions=false.",
)
@click.option(
    "--journal",
    type=click.Path(dir_okay=False),
    help="Append each finished row to FILE as a JSON line (kept if the run is interrupted).",
)
@bench_options
@click.pass_context
def ironic_scale(ctx: click.Context, /, **_: Any) -> None:
    """Nodes per Ironic conductor (needs scripts/ironic-env.sh): for each size
    and hardware type, a fresh lab and Ironic; a clean power-sync pass's
    duration (Ironic's own timer), conductor CPU per node per pass with its
    children, API p95 during the sync, logins per node per pass, and the time
    until one dead BMC is fenced."""
    _scenario(ctx, "ironic_scale")


@bench.command("lab-scale")
@sizes_option("100, 500 and 1000", cap=10_000)
@click.option("--duration", type=Seconds(0.5, 300), help="Seconds of reads per size (default 10).")
@bench_options
@click.pass_context
def lab_scale(ctx: click.Context, /, **_: Any) -> None:
    """Lab start time, memory of all lab processes, and power reads per second
    one lab serves."""
    _scenario(ctx, "lab_scale")


@bench.command("overhead")
@click.option("--calls", type=WholeNumber(5, 100000), help="Reads per client (default 500).")
@bench_options
@click.pass_context
def overhead(ctx: click.Context, /, **_: Any) -> None:
    """One power read through bmaas vs bare pyghmi and bare sushy on the same
    emulated BMC, sessions reused: median per call and the ratio."""
    _scenario(ctx, "overhead")


@bench.command("overrun")
@click.option(
    "--calls", type=WholeNumber(1, 1000), help="Calls per effect and protocol (default 10)."
)
@click.option(
    "--deadline",
    type=Seconds(0.1, 60),
    help="Seconds each call is given, as a Deadline (default 2; smoke 0.5).",
)
@click.option(
    "--only",
    multiple=True,
    help="Only this matrix scenario (repeatable; default every one).",
)
@bench_options
@click.pass_context
def overrun(ctx: click.Context, /, **_: Any) -> None:
    """For every effect of the fault matrix, on both protocols: how long after
    its deadline a BMC call returns (median, p99, max)."""
    from bmaas.hwlab.harness import matrix

    known = [s.name for s in matrix.SCENARIOS]
    unknown = [name for name in ctx.params.get("only") or () if name not in known]
    if unknown:
        raise InputProblems(
            [
                InputError(
                    f"no matrix scenario {name!r} (known: {', '.join(known)})", field="--only"
                )
                for name in unknown
            ]
        )
    _scenario(ctx, "overrun")


#: every scenario, in the order `all` runs them
@bench.command("overload")
@click.option("--nodes", type=WholeNumber(2, 2000), help="Nodes in the lab (default 40).")
@click.option("--sweeps", type=WholeNumber(1, 50), help="Reads of every node (default 3).")
@bench_options
@click.pass_context
def overload(ctx: click.Context, /, **_: Any) -> None:
    """Overload events each client sets off on a lab whose BMCs fall silent
    past 2 requests in flight or 5 a second: bmaas vs ipmitool x 8 (Ironic's
    sync) and bare sushy x 8 threads."""
    _scenario(ctx, "overload")


#: the outside-change benches' shared options
_EVERY = click.option(
    "--every", type=Seconds(0.1, 3600), help="Seconds between outside changes (default 8)."
)


def _sse_keepalive(default: str) -> Callable[[Any], Any]:
    return click.option(
        "--sse-keepalive",
        type=Seconds(0, 86400),
        help=f"The lab's SSE keepalive comment, seconds ({default}; 0: none, as OpenBMC's bmcweb).",
    )


@bench.command("events")
@click.option("--nodes", type=WholeNumber(1, 10_000), help="Redfish nodes (default 20).")
@click.option(
    "--mode",
    multiple=True,
    type=click.Choice(["polling", "events", "push", "adversary"]),
    help="A bmaas sync row (repeatable; default polling, events and adversary: push "
    "subscriptions while idle connections, garbage, deep frames and forged events hit "
    "the push listener).",
)
@click.option("--duration", type=Seconds(5, 86400), help="Seconds per mode (default 300).")
@click.option("--interval", type=Seconds(0.5, 3600), help="The sync's --interval (default 60).")
@_EVERY
@click.option(
    "--safety-interval",
    type=Seconds(1, 86400),
    help="The sync's --safety-interval in seconds (default 2400).",
)
@_sse_keepalive("default 30")
@click.option("--seed", type=WholeNumber(), help="Seed of the changes (default 37).")
@click.option(
    "--ironic",
    multiple=True,
    type=click.Choice(["redfish", "bmaas-polling", "bmaas-events", "bmaas-push"]),
    help="Also a row through a real Ironic (repeatable; needs scripts/ironic-env.sh), "
    "its power sync every --interval: stock redfish, bmaas-redfish with [bmaas]events "
    "off, on (SSE), or on through push subscriptions to the conductor's listener.",
)
@click.option("--ironic-only", is_flag=True, help="Only the --ironic rows (no bmaas sync rows).")
@bench_options
@click.pass_context
def events(ctx: click.Context, /, **_: Any) -> None:
    """Outside power changes (the lab's control API) on a Redfish lab: how
    soon `bmaas sync` knows, BMC requests and client CPU per node-hour,
    polling at --interval vs events + the safety net; with --ironic, the same
    through a real Ironic's power sync. Not in `all` (it runs --duration per
    row)."""
    if ctx.params.get("ironic_only") and not ctx.params.get("ironic"):
        raise InputProblems([InputError("--ironic-only needs --ironic ROW", field="--ironic-only")])
    _scenario(ctx, "events")


@bench.command("sync-cpu")
@click.option("--nodes", type=WholeNumber(1, 2000), help="Redfish nodes (default 200).")
@click.option("--rounds", type=WholeNumber(1, 20), help="Alternations (default 2).")
@click.option("--passes", type=WholeNumber(3, 1000), help="Passes a round (default 40).")
@click.option("--duration", type=Seconds(5, 86400), help="Seconds per hourly mode (default 600).")
@click.option(
    "--safety-interval",
    type=Seconds(1, 86400),
    help="The events mode's --safety-interval (default 300: an upper bound for 2400).",
)
@_EVERY
@click.option(
    "--quiet-duration",
    type=Seconds(0, 86400),
    help="Seconds per quiet row: polling, SSE and push with no outside change "
    "(default 300; 0: none).",
)
@_sse_keepalive("default 0")
@click.option("--seed", type=WholeNumber(), help="Seed of the lab and the changes (default 37).")
@bench_options
@click.pass_context
def sync_cpu(ctx: click.Context, /, **_: Any) -> None:
    """bmaas sync's client CPU in one run on one Redfish lab: per node-pass
    against bare sushy x 8 (kept clients, session auth, as Ironic's power
    sync), and per node-hour with events against polling at 60 s. Not in
    `all`."""
    _scenario(ctx, "sync_cpu")


SCENARIOS = (
    "overhead",
    "fault-detection",
    "fleet-sweep",
    "lab-scale",
    "goodput",
    "overrun",
    "overload",
)


@bench.command("all")
@bench_options
@click.pass_context
def all_scenarios(ctx: click.Context, smoke: bool, as_json: bool, report_dir: Path | None) -> None:
    """Every scenario at its default size, one after the other; with
    --report, DIR/README.md gathers their summaries."""
    import importlib

    from bmaas.hwlab.harness.bench.report import write_index

    reports = []
    for name in SCENARIOS:
        module = importlib.import_module(f"bmaas.hwlab.harness.bench.{name.replace('-', '_')}")
        options = module.Options.smoke() if smoke else module.Options()
        if not as_json:
            click.echo(f"== {name}", err=True)
        reports.append(
            _run(
                ctx,
                functools.partial(module.run, options, progress=_progress),
                smoke=smoke,
                as_json=False,
                report_dir=report_dir,
                quiet=as_json,
                command=f"hwlab bench {name}" + (" --smoke" if smoke else ""),
            )
        )
    if report_dir is not None:
        click.echo(f"wrote {write_index(reports, report_dir)}", err=as_json)
    if as_json:
        emit_json({"reports": [r.to_dict() for r in reports]})
    if any(r.unmeasured for r in reports):
        _failed(ctx, [r for r in reports if r.unmeasured])
