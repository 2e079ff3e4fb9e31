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
        # by identity: 0 == False, and "--sse-keepalive 0" was left out
        if value is None or value is False or value == () or value == param.default:
            continue
        if not param.opts:
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


def _opt(decls: str, kind: Any, text: str, **kw: Any) -> Callable[[Any], Any]:
    """One scenario option: its flags (``"--size sizes"``: the flag, then the
    parameter's name), its type and its help; ``kw`` as click's."""
    return click.option(*decls.split(), type=kind, help=text, **kw)


def scenario(name: str, *options: Callable[[Any], Any]) -> Callable[[Any], click.Command]:
    """``hwlab bench NAME``: ``options``, then :func:`bench_options`. The
    decorated function is the help (its docstring) and what click cannot
    check; it may name another module to run (else NAME's, :func:`_scenario`)."""

    def make(check: Callable[[click.Context], str | None]) -> click.Command:
        def command(ctx: click.Context, /, **_: Any) -> None:
            _scenario(ctx, check(ctx) or name.replace("-", "_"))

        command.__doc__ = check.__doc__
        made = bench_options(click.pass_context(command))
        for option in reversed(options):
            made = option(made)
        return bench.command(name)(made)

    return make


def _sizes(defaults: str) -> Callable[[Any], Any]:
    text = f"Lab size in nodes (repeatable; default {defaults}; smoke 20)."
    return _opt("--size sizes", WholeNumber(2, 10_000), text, multiple=True)


@scenario(
    "fault-detection",
    _opt("--runs", WholeNumber(1, 50), "Trials per cell (default 5; smoke 1)."),
    _opt(
        "--cap",
        Seconds(1, 900),
        "Seconds a trial may wait before it is reported as gave up (default 90; smoke 3).",
    ),
    _opt("--parallel", WholeNumber(1, 32), "Trials at once (default 10)."),
)
def fault_detection(ctx: click.Context) -> None:
    """Seconds from a power read to a typed fault (hang, refused, busy, wrong
    password): bmaas vs bare pyghmi, bare sushy and ipmitool as Ironic runs it."""


@scenario(
    "fleet-sweep",
    _sizes("100, 300 and 1000"),
    _opt("--rounds", WholeNumber(1, 20), "Rounds per size (default 3)."),
    _opt("--workers", WholeNumber(1, 256), "bmaas threads per process (default 32)."),
    _opt(
        "--processes",
        WholeNumber(1, 256),
        "Sweep processes of the sharded rows (default: one per core).",
    ),
    _opt(
        "--hung-fraction",
        FiniteFloat(0, 1, min_open=True, max_open=True),
        "Also hang this share of the nodes (0.05: 5%) and time the sync's passes "
        "once it has fenced them, over a healthy pass.",
    ),
)
def fleet_sweep(ctx: click.Context) -> None:
    """Power status of every node of labs up to 10,000 nodes: bmaas cold (a login
    per read) and steady (sessions kept, in one process and sharded over
    cores) vs one ipmitool process per IPMI node, 8 at a time (Ironic's power
    sync); nodes/s and client CPU per read."""


@scenario(
    "goodput",
    _opt("--nodes", WholeNumber(2, 1000), "Nodes in the lab (default 48)."),
    _opt("--requests", WholeNumber(1, 1000), "Deploy requests (default 32)."),
    _opt("--profile", None, "Fault profile(s) of the lab (default flaky,dead-bmc,brownout)."),
    _opt("--seed", WholeNumber(), "Seed of the lab (default 7)."),
    _opt(
        "--share shares",
        FiniteFloat(0, 1),
        "Faulty share for the success-rate chart (repeatable; default 0 0.1 0.25 0.5).",
        multiple=True,
    ),
    _opt(
        "--backend",
        click.Choice(["embedded", "ironic"]),
        "ironic: the same three strategies through a real Ironic (scripts/ironic-env.sh).",
        default="embedded",
        show_default=True,
    ),
)
def goodput(ctx: click.Context) -> str:
    """Deploys on a seeded flaky lab, three ways: no retry, blind reschedule
    (what Nova did) and bmaas's typed retry; success, time to active, BMC
    calls, ports, leaks. With --backend ironic, through a real Ironic
    (--nodes, --requests and --seed apply; the lab layout is fixed)."""
    if ctx.params["backend"] == "embedded":
        ctx.params.pop("backend")
        return "goodput"
    for unused in ("profile", "shares"):
        if ctx.params.pop(unused) not in (None, ()):
            raise click.UsageError(f"--{unused} applies to the embedded backend only")
    return "goodput_ironic"


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


@scenario(
    "ironic",
    _opt(
        "--fault faults",
        click.Choice(
            ["busy", "internal_error", "auth_fail", "hang", "power_stuck", *INCIDENT_NAMES]
        ),
        "Fault classes or field incidents to inject (repeatable; default all; smoke "
        "internal_error).",
        multiple=True,
    ),
    _opt(
        "--incidents",
        None,
        "The field-incident catalogue only, with a one-pass sync phase.",
        is_flag=True,
    ),
    _opt("--cap", Seconds(10, 3600), "Seconds to wait for Ironic (default 150)."),
    _opt(
        "--settle",
        Seconds(0, 3600),
        "Seconds of power sync before maintenance is read (default 40).",
    ),
    _opt("--sync-nodes", WholeNumber(1, 200), "Nodes per type (default 10)."),
    _opt("--passes", WholeNumber(1, 100), "Power sync passes (default 10)."),
    _opt("--busy", FiniteFloat(0, 1), "Busy share of reads (default 0.5)."),
)
def ironic(ctx: click.Context) -> None:
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


#: the Ironic a bench starts: another installed release, or the current one
release_option = _opt(
    "--release",
    Name(max_length=64),
    "Another Ironic release, installed by `scripts/ironic-env.sh --release RELEASE` "
    "(default: the current one, .venv-ironic).",
)


@scenario(
    "ironic-reboot",
    _opt("--rounds", WholeNumber(1, 20), "Rounds (default 2; smoke 1)."),
    _opt(
        "--window windows",
        Seconds(1, 600),
        "BMC reboot window in seconds (repeatable; default 10, 45 and 120; smoke 10).",
        multiple=True,
    ),
    _opt(
        "--busy",
        WholeNumber(0, 100),
        "'Node busy' answers per busy trial on the IPMI types (default 6; 0: none).",
    ),
    _opt(
        "--type types",
        click.Choice(["bmaas-ipmi", "ipmi", "bmaas-redfish", "redfish"]),
        "Hardware types (repeatable; default all four; smoke bmaas-ipmi, ipmi).",
        multiple=True,
    ),
    _opt("--cap", Seconds(10, 3600), "Seconds any one wait may take (default 300)."),
    _opt(
        "--watch",
        Seconds(0, 3600),
        "Seconds the machine is watched after the outcome for Ironic switching it back "
        "off (default 75: a power sync and its read; smoke 0).",
    ),
    release_option,
)
def ironic_reboot(ctx: click.Context) -> None:
    """Power on through Ironic's API while the BMC reboots (a firmware
    update) or answers 'node busy', as an operator does (needs
    scripts/ironic-env.sh): bmaas-ipmi/bmaas-redfish beside stock
    ipmi/redfish in one Ironic with the README's [bmaas] defaults; per trial
    the outcome (on, or the error) and the seconds from the request."""


@scenario(
    "lifecycle",
    _opt("--trials", WholeNumber(1, 20), "Trials per row (default 3; smoke 1)."),
    _opt(
        "--cap",
        Seconds(10, 3600),
        "Seconds a trial may wait for its end (default 600: stock's BMC update waits 300).",
    ),
    _opt(
        "--pending-cap",
        Seconds(5, 3600),
        "Seconds stock's pending-BIOS trial may wait (it keeps waiting; bmaas's end by "
        "themselves within --cap; default 60; smoke 30).",
    ),
    release_option,
)
def lifecycle(ctx: click.Context) -> None:
    """A BIOS change (clean, and a setting left pending) and a firmware
    update through a BMC reboot (needs scripts/ironic-env.sh): stock redfish
    and bmaas-redfish through Ironic's clean and service steps, and bmaas's CLI (`bios
    set --reboot`, `firmware update`); per row the trials that ended right,
    the median seconds to the end state, the end states and the faults."""


@scenario(
    "ironic-scale",
    _sizes("100 and 1000"),
    _opt(
        "--type types",
        click.Choice(["ipmi", "bmaas-ipmi", "redfish", "bmaas-redfish", "fake-hardware"]),
        "Hardware types to measure (repeatable; default the four real ones; smoke ipmi, "
        "bmaas-ipmi); fake-hardware (Ironic's own, no BMC asked) gives the floor: what a "
        "sync pass costs Ironic itself.",
        multiple=True,
    ),
    _opt(
        "--interval",
        WholeNumber(2, 3600),
        "Ironic's [conductor]sync_power_state_interval (default 120, Ironic's).",
    ),
    _opt("--passes", WholeNumber(1, 20), "Clean passes measured (default 2)."),
    _opt(
        "--fence/--no-fence",
        None,
        "Time how long Ironic takes to fence one dead BMC (default on).",
        default=None,
    ),
    _opt(
        "--hung-fraction",
        FiniteFloat(0, 1, min_open=True, max_open=True),
        "Also hang this share of the BMCs (0.05: 5%) and report the longest pass until "
        "Ironic has fenced them, over the clean median.",
    ),
    _opt("--cap", Seconds(10, 7200), "Seconds any one wait may take (default 1800)."),
    _opt(
        "--enroll-via",
        click.Choice(["api", "db"]),
        "api (default): create and manage each node through the REST API; db: write "
        "them manageable through Ironic's object layer before it starts (10,000 nodes in a "
        "minute instead of 40).",
    ),
    _opt(
        "--conf",
        None,
        "An ironic.conf setting for every Ironic of the run (repeatable), e.g. "
        "bmaas.keep_sessions=false.",
        multiple=True,
        metavar="SECTION.OPTION=VALUE",
    ),
    _opt(
        "--journal",
        click.Path(dir_okay=False),
        "Append each finished row to FILE as a JSON line (kept if the run is interrupted).",
    ),
)
def ironic_scale(ctx: click.Context) -> None:
    """Nodes per Ironic conductor (needs scripts/ironic-env.sh): for each size
    and hardware type, a fresh lab and Ironic; a clean power-sync pass's
    duration (Ironic's own timer), conductor CPU per node per pass with its
    children, API p95 during the sync, logins per node per pass, and the time
    until one dead BMC is fenced."""


@scenario(
    "lab-scale",
    _sizes("100, 500 and 1000"),
    _opt("--duration", Seconds(0.5, 300), "Seconds of reads per size (default 10)."),
)
def lab_scale(ctx: click.Context) -> None:
    """Lab start time, memory of all lab processes, and power reads per second
    one lab serves."""


@scenario("overhead", _opt("--calls", WholeNumber(5, 100000), "Reads per client (default 500)."))
def overhead(ctx: click.Context) -> None:
    """One power read through bmaas vs bare pyghmi and bare sushy on the same
    emulated BMC, sessions reused: median per call and the ratio."""


@scenario(
    "overrun",
    _opt("--calls", WholeNumber(1, 1000), "Calls per effect and protocol (default 10)."),
    _opt(
        "--deadline",
        Seconds(0.1, 60),
        "Seconds each call is given, as a Deadline (default 2; smoke 0.5).",
    ),
    _opt(
        "--only", None, "Only this matrix scenario (repeatable; default every one).", multiple=True
    ),
)
def overrun(ctx: click.Context) -> None:
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


@scenario(
    "overload",
    _opt("--nodes", WholeNumber(2, 2000), "Nodes in the lab (default 40)."),
    _opt("--sweeps", WholeNumber(1, 50), "Reads of every node (default 3)."),
)
def overload(ctx: click.Context) -> None:
    """Overload events each client sets off on a lab whose BMCs fall silent
    past 2 requests in flight or 5 a second: bmaas vs ipmitool x 8 (Ironic's
    sync) and bare sushy x 8 threads."""


#: the outside-change benches' shared options
_EVERY = _opt("--every", Seconds(0.1, 3600), "Seconds between outside changes (default 8).")
_LIVENESS = _opt(
    "--liveness-interval",
    Seconds(0, 86400),
    "The sync's --liveness-interval in seconds (default: the sync's, 300: 12 reads "
    "per node-hour of a streamed node's API; 1800: 2; 0: none).",
)


def _sse_keepalive(default: str) -> Callable[[Any], Any]:
    return _opt(
        "--sse-keepalive",
        Seconds(0, 86400),
        f"The lab's SSE keepalive comment, seconds ({default}; 0: none, as OpenBMC's bmcweb).",
    )


@scenario(
    "events",
    _opt("--nodes", WholeNumber(1, 10_000), "Redfish nodes (default 20)."),
    _opt(
        "--mode",
        click.Choice(["polling", "events", "push", "adversary"]),
        "A bmaas sync row (repeatable; default polling, events and adversary: push "
        "subscriptions while idle connections, garbage, deep frames and forged events hit "
        "the push listener).",
        multiple=True,
    ),
    _opt("--duration", Seconds(5, 86400), "Seconds per mode (default 300)."),
    _opt("--interval", Seconds(0.5, 3600), "The sync's --interval (default 60)."),
    _EVERY,
    _opt(
        "--safety-interval",
        Seconds(1, 86400),
        "The sync's --safety-interval in seconds (default 2400).",
    ),
    _LIVENESS,
    _sse_keepalive("default 30"),
    _opt("--seed", WholeNumber(), "Seed of the changes (default 37)."),
    _opt(
        "--ironic",
        click.Choice(["redfish", "bmaas-polling", "bmaas-events", "bmaas-push"]),
        "Also a row through a real Ironic (repeatable; needs scripts/ironic-env.sh), "
        "its power sync every --interval: stock redfish, bmaas-redfish with [bmaas]events "
        "off, on (SSE), or on through push subscriptions to the conductor's listener.",
        multiple=True,
    ),
    _opt("--ironic-only", None, "Only the --ironic rows (no bmaas sync rows).", is_flag=True),
)
def events(ctx: click.Context) -> None:
    """Outside power changes (the lab's control API) on a Redfish lab: how
    soon `bmaas sync` knows, BMC requests and client CPU per node-hour,
    polling at --interval vs events + the safety net; with --ironic, the same
    through a real Ironic's power sync. Not in `all` (it runs --duration per
    row)."""
    if ctx.params.get("ironic_only") and not ctx.params.get("ironic"):
        raise InputProblems([InputError("--ironic-only needs --ironic ROW", field="--ironic-only")])


@scenario(
    "sync-cpu",
    _opt("--nodes", WholeNumber(1, 2000), "Redfish nodes (default 200)."),
    _opt("--rounds", WholeNumber(1, 20), "Alternations (default 2)."),
    _opt("--passes", WholeNumber(3, 1000), "Passes a round (default 40)."),
    _opt("--duration", Seconds(5, 86400), "Seconds per hourly mode (default 600)."),
    _opt(
        "--safety-interval",
        Seconds(1, 86400),
        "The events mode's --safety-interval (default 300: an upper bound for 2400).",
    ),
    _EVERY,
    _LIVENESS,
    _opt(
        "--quiet-duration",
        Seconds(0, 86400),
        "Seconds per quiet row: polling, SSE and push with no outside change "
        "(default 300; 0: none).",
    ),
    _sse_keepalive("default 0"),
    _opt("--seed", WholeNumber(), "Seed of the lab and the changes (default 37)."),
)
def sync_cpu(ctx: click.Context) -> None:
    """bmaas sync's client CPU in one run on one Redfish lab: per node-pass
    against bare sushy x 8 (kept clients, session auth, as Ironic's power
    sync), and per node-hour with events against polling at 60 s. Not in
    `all`."""


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
