"""sync-cpu: what `bmaas sync` costs the client, against bare sushy and against itself.

One lab of Redfish nodes (hwlab worker processes), enrolled in a fresh
store; in one run, on that lab:

**Per node-pass** (``rounds`` times, the two contenders alternating):

* ``bare sushy x 8``: :mod:`bmaas.hwlab.harness.bench.sushy_poll` in a
  process of its own: a kept ``sushy.Sushy`` client (session auth) and
  ``System`` per node, ``system.refresh()`` a read, 8 threads -- as
  Ironic's power sync keeps its clients;
* ``bmaas sync``: a real ``bmaas sync --interval F --no-events`` process as
  an operator runs it (the store, split on, pooled sessions, the lean
  read), ``passes`` passes.

Both at the same pass interval ``F`` (every node read every pass); each
process's CPU (user + system) from one pass's end to the next's, divided by
the nodes: the **median over the steady passes** (after ``warm`` passes:
logins, the lean read's connection). Goal: bmaas <= 1/3 of bare sushy.

**Per node-hour**: the events bench's two modes
(:mod:`bmaas.hwlab.harness.bench.events`) on the same lab, ``duration``
seconds each, outside power changes at random times: ``bmaas sync
--interval 60 --no-events`` vs ``bmaas sync --interval 60`` with events and
the safety net every ``safety_interval`` seconds, over SSE and by push to
bmaas's own listener (``--events-prefer-push``); then all three
again for ``quiet_duration`` seconds with no outside change at all. Steady
client CPU (the process's own CPU-time clock, to the nanosecond) and BMC
requests per node-hour (counted at the BMCs). Goal: CPU >= 20x lower with
events. A change costs either client a store write, and the events client
also its event: the report gives the events client's CPU per change (the
row with changes less the quiet row) and the change rate up to which the
goal holds. The lab's BMCs send no SSE keepalive by default
(``sse_keepalive`` 0), as OpenBMC's bmcweb does not. With a
``safety_interval`` shorter than the default (2400 s) the events row reads
each node more often than it would: its CPU and requests are an upper bound
for the default's.

Each streamed node's API is also read every ``liveness_interval`` seconds
(issue 48; the sync's default, 300 s, unless given): 12 reads an hour
against polling's 60 at a 60 s interval, so polling / events cannot pass
``liveness / interval`` (5x) whatever an event costs. The report gives that
ceiling; ``--liveness-interval 0`` measures what the events themselves cost.

The report carries ``nproc`` and the load average before and after.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import statistics
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bmaas.hwlab.harness.bench import events as events_bench
from bmaas.hwlab.harness.bench.common import (
    bmaas_console,
    enrolled_lab,
    per_node_hour,
    tree_cpu,
)
from bmaas.hwlab.harness.bench.report import Report, Table, fmt_ratio, ratio, rounded
from bmaas.hwlab.harness.bench.sushy_poll import node_job
from bmaas.hwlab.labspec import generate
from bmaas.hwlab.pyexec import python_argv
from bmaas.liveness import LIVENESS_INTERVAL
from bmaas.store import Store

__all__ = ["GOALS", "Options", "run"]

SUSHY, BMAAS = "bare sushy x 8", "bmaas sync"
#: the rows run again with no outside change (the key's suffix), and which
QUIET, QUIET_MODES = " (quiet)", ("polling", "events", "push")
GOALS = {"cpu_per_node_pass_vs_sushy": 1 / 3, "cpu_per_node_hour_polling_over_events": 20.0}
#: seconds a contender may take beyond its passes before it is stopped
SLACK = 300.0


@dataclasses.dataclass(frozen=True)
class Options:
    nodes: int = 200
    #: alternations of the two per-node-pass contenders
    rounds: int = 2
    #: passes per contender and round; the first ``warm`` are not counted
    passes: int = 40
    warm: int = 5
    #: seconds between pass starts of both contenders (every node every pass)
    fast_interval: float = 0.2
    #: the per-node-hour modes: seconds each, the sync's interval, safety net
    duration: float = 600.0
    interval: float = 60.0
    safety_interval: float = 300.0
    every: float = 8.0
    #: the events modes' --liveness-interval (None: the sync's default, 300 s;
    #: 0: none -- the events' own cost, without issue 48's reads of the API)
    liveness_interval: float | None = None
    #: seconds per quiet row (polling, SSE and push with no outside change; 0: none)
    quiet_duration: float = 300.0
    #: the lab's SSE keepalive (0: none, as OpenBMC's bmcweb, the reference
    #: SSE server; hwlab's own default is 30 s)
    sse_keepalive: float = 0.0
    seed: int = 37

    @classmethod
    def smoke(cls) -> Options:
        return cls(
            nodes=4,
            rounds=1,
            passes=8,
            warm=3,
            duration=30.0,
            interval=3.0,
            safety_interval=10.0,
            every=1.5,
            quiet_duration=12.0,
        )


def _per_pass(cumulative: list[float], nodes: int, warm: int) -> list[float]:
    """CPU seconds per node of each steady pass, from cumulative samples at
    each pass's end (pass k costs sample k - sample k-1)."""
    steps = [b - a for a, b in itertools.pairwise(cumulative)]
    return [s / nodes for s in steps[max(0, warm - 1) :]]


def _sushy_round(jobs: list[dict[str, Any]], options: Options) -> list[float]:
    job = {
        "nodes": jobs,
        "workers": 8,
        "passes": options.passes,
        "interval": options.fast_interval,
        "duration": SLACK,
    }
    proc = subprocess.run(  # noqa: S603 - our own module, no shell
        python_argv("-m", "bmaas.hwlab.harness.bench.sushy_poll"),
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=SLACK + 60,
        check=True,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return _per_pass([float(x["cpu"]) for x in lines], len(jobs), options.warm)


def _bmaas_round(db: Path, nodes: int, options: Options) -> list[float]:
    args = [bmaas_console(), "sync", "--interval", str(options.fast_interval), "--no-events"]
    args += ["--count", str(options.passes)]
    env = {**os.environ, "BMAAS_DB": str(db), "PYTHONUNBUFFERED": "1"}
    sync = subprocess.Popen(  # noqa: S603 - our own console script
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    samples: list[float] = []
    try:
        assert sync.stdout is not None
        for line in sync.stdout:  # one line a pass, printed as it ends
            if line.startswith("pass "):
                samples.append(tree_cpu(sync.pid))
        sync.wait(SLACK)
    finally:
        if sync.poll() is None:
            sync.kill()
            sync.wait(10)
    return _per_pass(samples, nodes, options.warm)


def _jobs(db: Path) -> list[dict[str, Any]]:
    store = Store.open(str(db))
    try:
        return [node_job(record) for record in store.nodes.find(driver="redfish")]
    finally:
        store.close()


def run(options: Options, *, progress: Callable[[str], None] = lambda _: None) -> Report:
    spec = generate(
        options.nodes, protocols="redfish", seed=options.seed, sse_keepalive=options.sse_keepalive
    )
    load_before = [round(x, 2) for x in os.getloadavg()]
    per_pass: dict[str, list[float]] = {SUSHY: [], BMAAS: []}
    hourly: dict[str, events_bench.Measured] = {}
    with enrolled_lab(spec, "hwlab-bench-sync-cpu-") as (lab, db, names):
        jobs = _jobs(db)
        for number in range(options.rounds):
            order = (SUSHY, BMAAS) if number % 2 == 0 else (BMAAS, SUSHY)
            for who in order:
                if who == SUSHY:
                    per_pass[who] += _sushy_round(jobs, options)
                else:
                    per_pass[who] += _bmaas_round(db, len(names), options)
                progress(f"round {number + 1}: {who} done")
        modes = hourly_modes(options)
        for mode in events_bench.ALL_MODES:
            hourly[mode] = events_bench.one_mode(mode, lab, db, names, modes, progress)
        if options.quiet_duration > 0:
            still = dataclasses.replace(modes, duration=options.quiet_duration)
            for mode in QUIET_MODES:
                hourly[f"{mode}{QUIET}"] = events_bench.one_mode(
                    mode, lab, db, names, still, progress, quiet=True
                )
    load_after = [round(x, 2) for x in os.getloadavg()]
    return _report(options, per_pass, hourly, load_before, load_after)


def hourly_modes(options: Options) -> events_bench.Options:
    """The events bench's options for the per-node-hour rows."""
    return events_bench.Options(
        nodes=options.nodes,
        duration=options.duration,
        interval=options.interval,
        every=options.every,
        safety_interval=options.safety_interval,
        liveness_interval=options.liveness_interval,
        seed=options.seed,
        sse_keepalive=options.sse_keepalive,
    )


def liveness_ceiling(options: Options) -> float | None:
    """The most polling / events can be in CPU per node-hour while every
    streamed node's API is read every liveness interval (issue 48), were
    events, changes and the safety net free and a read cost the same in both:
    reads per node-hour, polling's (3600 / interval) over the liveness reads'
    (3600 / liveness). None: no liveness read, no such ceiling."""
    liveness = _liveness(options)
    return liveness / options.interval if liveness else None


def _liveness(options: Options) -> float:
    """The events rows' liveness interval in seconds (the sync's default unless given)."""
    return LIVENESS_INTERVAL if options.liveness_interval is None else options.liveness_interval


def _change_cost(
    events: events_bench.Measured | None,
    quiet: float | None,
    polling: float | None,
    nodes: int,
) -> tuple[float | None, float | None]:
    """CPU seconds the events sync spends per outside change (its steady
    window with changes, less what the quiet row spends in as long), and the
    changes per node-hour up to which events stay 20x below polling (the
    quiet polling row: polling's own cost grows with changes too, so this
    is the lower bound)."""
    if events is None or quiet is None or not events.changes or not events.steady_seconds:
        return None, None
    idle = quiet * nodes * events.steady_seconds / 3600.0
    per_change = max(0.0, events.steady_cpu - idle) / events.changes
    if polling is None or per_change <= 0:
        return per_change, None
    goal = GOALS["cpu_per_node_hour_polling_over_events"]
    return per_change, max(0.0, polling / goal - quiet) / per_change


def _median_ms(values: list[float]) -> float | None:
    return statistics.median(values) * 1000 if values else None


def _report(
    options: Options,
    per_pass: dict[str, list[float]],
    hourly: dict[str, events_bench.Measured],
    load_before: list[float],
    load_after: list[float],
) -> Report:
    sushy, ours = _median_ms(per_pass[SUSHY]), _median_ms(per_pass[BMAAS])
    pass_ratio = ours / sushy if ours is not None and sushy else None
    rows = [
        [who, len(values), f"{ms:.3f}" if (ms := _median_ms(values)) is not None else "-"]
        for who, values in per_pass.items()
    ]
    hour_rows, data_hourly = [], {}
    for mode, m in hourly.items():
        cpu = per_node_hour(m.steady_cpu, options.nodes, m.steady_seconds)
        req = per_node_hour(m.steady_requests, options.nodes, m.steady_seconds)
        quiet = mode.endswith(QUIET)
        name = events_bench.label(
            mode.removesuffix(QUIET), options.interval, options.safety_interval
        )
        hour_rows.append(
            [
                f"{name}, no outside change" if quiet else name,
                "-" if quiet else f"{len(m.latencies)}/{m.changes}",
                f"{cpu * 1000:.2f} ms" if cpu is not None else "-",
                f"{req:.1f}" if req is not None else "-",
            ]
        )
        data_hourly[mode] = dataclasses.asdict(m) | {
            "steady_cpu_s_per_node_hour": cpu,
            "steady_requests_per_node_hour": req,
        }

    def hourly_cpu(mode: str) -> float | None:
        value = data_hourly.get(mode, {}).get("steady_cpu_s_per_node_hour")
        return float(value) if value is not None else None

    poll, ev, pushed = hourly_cpu("polling"), hourly_cpu("events"), hourly_cpu("push")
    poll_quiet, ev_quiet = hourly_cpu(f"polling{QUIET}"), hourly_cpu(f"events{QUIET}")
    push_quiet = hourly_cpu(f"push{QUIET}")
    hour_ratio, push_ratio = ratio(poll, ev), ratio(poll, pushed)
    quiet_ratio, push_quiet_ratio = ratio(poll_quiet, ev_quiet), ratio(poll_quiet, push_quiet)
    per_change, break_even = _change_cost(hourly.get("events"), ev_quiet, poll_quiet, options.nodes)
    ceiling = liveness_ceiling(options)
    liveness = _liveness(options)
    unmeasured = [f"{who}: no steady pass" for who, v in per_pass.items() if not v]
    machine = {"nproc": os.cpu_count(), "load_before": load_before, "load_after": load_after}
    return Report(
        scenario="sync-cpu",
        title="bmaas sync's client CPU: per node-pass vs bare sushy, per node-hour with events",
        params=dataclasses.asdict(options),
        tables=[
            Table(
                f"{options.nodes} Redfish nodes, every node read every pass, passes "
                f"{options.fast_interval:g} s apart, median over {options.rounds} x "
                f"{options.passes - options.warm} steady passes",
                ["client", "steady passes", "CPU ms per node-pass (median)"],
                rows,
            ),
            Table(
                f"{options.nodes} Redfish nodes, `bmaas sync --interval {options.interval:g}`, "
                f"{options.duration:g} s per mode with outside power changes every "
                f"~{options.every:g} s, {options.quiet_duration:g} s per quiet row",
                ["mode", "seen", "CPU per node-hour (steady)", "BMC requests per node-hour"],
                hour_rows,
            ),
        ],
        headline={
            "CPU per node-pass, bmaas sync / bare sushy x 8 (median)": rounded(pass_ratio, 3),
            "CPU per node-hour, polling / events, no outside change (steady)": rounded(
                quiet_ratio, 1
            ),
            "CPU per node-hour, polling / events by push, no outside change (steady)": rounded(
                push_quiet_ratio, 1
            ),
            f"CPU per node-hour, polling / events, a change every ~{options.every:g} s "
            "(steady)": rounded(hour_ratio, 1),
            f"CPU per node-hour, polling / events by push, a change every ~{options.every:g} s "
            "(steady)": rounded(push_ratio, 1),
            "events: client CPU ms per outside change": rounded(
                per_change * 1000 if per_change is not None else None, 3
            ),
            "events stay >= 20x below polling up to this many changes per node-hour": rounded(
                break_even, 2
            ),
            "CPU per node-hour, polling / events, at most (the liveness reads alone)": rounded(
                ceiling, 1
            ),
        },
        notes=[
            f"nproc {machine['nproc']}, load average before {load_before}, after {load_after}",
            "CPU is each client process's (user + system; a sharded sync's workers "
            "included), never the lab's; per node-pass: from one pass's end to the next's",
            "goals: per node-pass <= 1/3 of bare sushy "
            f"({fmt_ratio(1 / pass_ratio) if pass_ratio else '-'} lower here); "
            f"per node-hour >= 20x lower with events ({fmt_ratio(quiet_ratio)} with no "
            f"outside change, {fmt_ratio(hour_ratio)} with one every ~{options.every:g} s "
            f"over {options.nodes} nodes)",
            "CPU from each client process's own CPU-time clock (every thread, to the "
            "nanosecond), not /proc's 10 ms ticks: a quiet events row uses a few ticks",
            "an outside change costs both clients a store write; with events also the "
            "event's parse and the listener's wake-up: the per-change cost is the events "
            "row with changes less the quiet events row, per change",
            "the lab's BMCs send "
            + (
                f"an SSE keepalive comment every {options.sse_keepalive:g} s"
                if options.sse_keepalive
                else "no SSE keepalive comment (as OpenBMC's bmcweb)"
            ),
            (
                f"liveness read of every streamed node every {liveness:g} s"
                + (" (the sync's default)" if options.liveness_interval is None else "")
                + f": {3600 / liveness:g} reads per node-hour against polling's "
                f"{3600 / options.interval:g}, so events stay at most {ceiling:g}x below "
                "polling whatever an event costs"
                if ceiling
                else "no liveness read (--liveness-interval 0): what events alone cost"
            ),
            f"safety net every {options.safety_interval:g} s: more reads than the default "
            "(2400 s) when shorter, so the events row is an upper bound for the default's",
        ],
        data={"per_pass": per_pass, "hourly": data_hourly, "machine": machine},
        plot=plot,
        unmeasured=unmeasured,
    )


def plot(fig: Any, report: Report) -> None:
    """CPU ms per node-pass (medians) and per node-hour (steady), per client or mode."""
    per_pass = {k: _median_ms(v) or 0.0 for k, v in report.data["per_pass"].items()}
    hourly = {
        mode: 1000 * (m.get("steady_cpu_s_per_node_hour") or 0.0)
        for mode, m in report.data["hourly"].items()
    }
    left, right = fig.subplots(1, 2)
    for ax, values, title in (
        (left, per_pass, "client CPU ms per node-pass (median)"),
        (right, hourly, "client CPU ms per node-hour (steady)"),
    ):
        bars = ax.bar(list(values), list(values.values()), color="#4c72b0")
        for bar, value in zip(bars, values.values(), strict=True):
            ax.text(bar.get_x() + bar.get_width() / 2, value, f"{value:.3g}", ha="center")
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(report.title, fontsize=10)
    fig.tight_layout()
