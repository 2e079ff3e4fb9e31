"""events: power from the BMC's own word vs polling, side by side.

One lab of Redfish nodes (hwlab worker processes, each BMC with its
EventService), enrolled in a fresh store. For each mode in turn, a real
``bmaas sync --interval I`` process runs for ``duration`` seconds while the
bench makes **outside power changes** at random times (seeded) through the
lab's control API -- the console power-off no client asked for -- on random
nodes, and watches the store for each change to show:

* ``polling``: ``bmaas sync --interval I --no-events`` (every node every pass);
* ``events``: ``bmaas sync --interval I`` (SSE per service; a node whose
  stream is up read once its last read is ``--safety-interval`` seconds old);
* ``adversary``: events through push subscriptions while the push listener
  is attacked (:mod:`bmaas.hwlab.harness.bench.adversary`: idle
  connections, garbage, deep frames, forged events): what the attack cost
  the sync and what it missed, forged store rows included (must be 0);
* ``push`` (``--mode push``): the same without the attack.

Measured per mode: detection latency (outside change -> the store shows it;
p50, p99, max; a change not seen by the end is waited for, outside the
measured window, up to :func:`~bmaas.hwlab.harness.bench.outside.late_grace`
more seconds, and counts as missed only if never seen), BMC requests
per node-hour counted **at the BMCs** (a zero-second ``delay`` rule on
``*`` and one on ``event.subscribe`` on every node: a rule that fires on
every request and changes nothing; its count is the request count), and
the sync process's CPU per node-hour (psutil, user + system; the lab's
workers are separate processes, not in it), and its threads, file
descriptors and RSS at the start and end of the steady window. A run this short carries each
mode's start-up (logins, the first pass, opening the streams): the table
says so, and the steady figures are the rate after the first pass.

With ``--ironic ROW`` (repeatable), the same lab and the same kind of
changes through a real Ironic's power sync, a fresh Ironic per row
(:mod:`bmaas.hwlab.harness.bench.events_ironic`: stock ``redfish``,
``bmaas-redfish`` with ``[bmaas]events`` off, on, and on through push);
``--ironic-only`` leaves the bmaas sync rows out.

Changes are made only until one interval (plus 5 s) before the end, so a
poll can still see the last of them. With events the steady figures start
one interval later: the sync's second pass reads every node once more (it
reconciles what changed before the streams were up), a start-up cost.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import signal
import subprocess
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bmaas.hwlab.harness.bench import adversary
from bmaas.hwlab.harness.bench.common import (
    bmaas_console,
    enrolled_lab,
    per_node_hour,
    percentile,
    sampled,
    tree_cpu,
)
from bmaas.hwlab.harness.bench.outside import (
    WARMUP,
    WATCH_TICK,
    Measured,
    Options,
    count_requests,
    first_passes,
    late_grace,
    outside_changes,
    steady_window,
)
from bmaas.hwlab.harness.bench.report import Report, Table, fmt_ratio
from bmaas.hwlab.harness.bench.report import ratio as ratio_of
from bmaas.hwlab.labspec import generate
from bmaas.hwlab.proxy.stock import free_port
from bmaas.store import Store

__all__ = ["ALL_MODES", "MODES", "Measured", "Options", "label", "one_mode", "run", "sync_args"]

#: the ways a sync learns power: "push" is events through bmaas's own
#: listener (--events-listen on 127.0.0.1, --events-prefer-push: no stream
#: held); one_mode also runs "adversary": push under attack
#: (bmaas.hwlab.harness.bench.adversary)
ALL_MODES = ("polling", "events", "push")
#: the default rows
MODES = ("polling", "events", "adversary")


class SyncDied(RuntimeError):
    """The row's ``bmaas sync`` exited before the row was measured."""


def one_mode(
    mode: str,
    lab: Any,
    db: Path,
    names: list[str],
    options: Options,
    progress: Callable[[str], None],
    *,
    quiet: bool = False,
) -> Measured:
    """One row. ``quiet``: no outside change at all for the whole run (what
    a fleet costs its sync while nothing happens; each change's cost is the
    difference to a row with changes)."""
    rng = random.Random(f"{options.seed}/{mode}")
    count_requests(lab, names)
    listener = f"http://127.0.0.1:{free_port()}/bmaas/events"
    args = sync_args(mode, options, listener)
    env = {**os.environ, "BMAAS_DB": str(db)}
    log = db.parent / f"sync-{mode}.log"  # what a sync that died said
    with log.open("wb") as stderr:
        sync = subprocess.Popen(  # noqa: S603 - our own console script
            args, env=env, stdout=subprocess.DEVNULL, stderr=stderr
        )

    def alive() -> None:
        if sync.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-5:]
            raise SyncDied(f"bmaas sync ({mode}) exited {sync.returncode}: " + " | ".join(tail))

    measured = Measured(mode)
    store = Store.open(str(db))
    attacked = mode == "adversary"
    forged = adversary.targets(names, max(1, min(5, len(names) // 4))) if attacked else []
    changed = [n for n in names if n not in forged]
    try:
        started = time.monotonic()
        # the first pass; with events the streams' opens and the pass after
        # them, which reads every node once more (it reconciles what changed
        # before they were up): start-up too
        first_passes(lab, names, mode != "polling", options.interval,
                     started + options.duration / 2, alive)  # fmt: skip
        end = started + options.duration

        def recorded(wanted: list[str]) -> dict[str, str]:
            return {name: str(store.nodes.get(name).power_state) for name in wanted}

        def during(ended: Callable[[], None]) -> int:
            if quiet:
                time.sleep(max(0.0, end - time.monotonic()))
                return 0
            return outside_changes(lab, changed, rng, measured, recorded, options.every, end,
                                   end - options.interval - 5.0, WATCH_TICK, ended,
                                   late_grace(options.interval))  # fmt: skip

        with contextlib.ExitStack() as stack:
            measured.footprint = stack.enter_context(sampled(sync.pid))
            if attacked:
                infos = {n["name"]: n["driver_info"] for n in lab.inventory()["nodes"]}
                attack = stack.enter_context(adversary.attacking(
                    listener, {n: infos[n] for n in forged}, lambda: recorded(forged)
                ))  # fmt: skip
            steady_window(lab, names, measured, lambda: tree_cpu(sync.pid), started, during)
        if attacked:
            measured.adversary = attack.to_dict()
    finally:
        sync.send_signal(signal.SIGINT)
        try:
            sync.wait(30)
        except subprocess.TimeoutExpired:
            sync.kill()
            sync.wait(10)
        store.close()
    what = "no outside changes" if quiet else f"{measured.changes} changes"
    progress(f"{mode}: {what}, {len(measured.latencies)} seen")
    return measured


def run(options: Options, *, progress: Callable[[str], None] = lambda _: None) -> Report:
    spec = generate(
        options.nodes, protocols="redfish", seed=options.seed, sse_keepalive=options.sse_keepalive
    )
    results: dict[str, Measured] = {}
    unmeasured: list[str] = []
    with enrolled_lab(spec, "hwlab-bench-events-") as (lab, db, names):
        for mode in () if options.ironic_only else options.mode or MODES:
            try:
                results[mode] = one_mode(mode, lab, db, names, options, progress)
            except SyncDied as exc:  # the other rows still count
                progress(str(exc))
                unmeasured.append(str(exc)[:300])
        if options.ironic:
            from bmaas.hwlab.harness.bench import events_ironic

            for mode in options.ironic:
                try:
                    results[f"ironic-{mode}"] = events_ironic.one_mode(
                        mode, lab, db.parent, names, options, progress
                    )
                except events_ironic.IronicError as exc:  # the other rows still count
                    progress(f"ironic {mode}: {exc}")
                    unmeasured.append(f"ironic {mode}: {' '.join(str(exc).split())[:300]}")
    report = _report(options, results)
    report.unmeasured += unmeasured
    return report


def sync_args(mode: str, options: Options, listener: str) -> list[str]:
    """The row's ``bmaas sync`` command line (``listener``: the push row's URL)."""
    # the operator's command: split on, as --interval defaults (its claim a pass counts)
    args = [bmaas_console(), "sync", "--interval", str(options.interval)]
    args += ["--safety-interval", str(options.safety_interval)]
    if options.liveness_interval is not None:
        args += ["--liveness-interval", str(options.liveness_interval)]
    if mode == "polling":
        args.append("--no-events")
    elif mode in ("push", "adversary"):
        where = urllib.parse.urlsplit(listener).netloc
        args += ["--events-listen", where, "--events-prefer-push"]
    return args


def label(mode: str, interval: float, safety: float) -> str:
    """A mode as the tables name it."""
    if mode.startswith("ironic-"):
        from bmaas.hwlab.harness.bench.events_ironic import ironic_label

        return ironic_label(mode.removeprefix("ironic-"), interval, safety)
    if mode == "polling":
        return f"polling every {interval:g} s"
    via = "SSE" if mode == "events" else "push"
    attacked = ", under attack" if mode == "adversary" else ""
    return f"events ({via}{attacked}) + safety net every {safety:g} s"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f} ms" if value < 10 else f"{value:.1f} s"


def _by_operation(m: Measured, nodes: int) -> dict[str, float | None]:
    """The steady window's requests per node-hour, by operation."""
    return {
        op: per_node_hour(n, nodes, m.steady_seconds) for op, n in m.steady_by_operation.items()
    }


def _breakdown_note(data: dict[str, Any]) -> list[str]:
    """One note line: each row's steady requests per node-hour by operation."""
    parts = []
    for mode, row in data.items():
        shares = row["steady_requests_by_operation_per_node_hour"]
        if shares:
            text = ", ".join(f"{op} {v:.2f}" for op, v in shares.items() if v is not None)
            parts.append(f"{mode}: {text}")
    if not parts:
        return []
    return [
        "steady requests per node-hour by operation (login: a session's POST or DELETE; "
        "power.get: the system's GET) -- " + "; ".join(parts)
    ]


def _report(options: Options, results: dict[str, Measured]) -> Report:
    rows = []
    data: dict[str, Any] = {}
    unmeasured = []
    for mode, m in results.items():
        p50, p99 = percentile(m.latencies, 0.5), percentile(m.latencies, 0.99)
        worst = max(m.latencies) if m.latencies else None
        req = per_node_hour(m.requests, options.nodes, m.seconds)
        steady_req = per_node_hour(m.steady_requests, options.nodes, m.steady_seconds)
        cpu = per_node_hour(m.cpu, options.nodes, m.seconds)
        steady_cpu = per_node_hour(m.steady_cpu, options.nodes, m.steady_seconds)
        name = label(mode, options.interval, options.safety_interval)
        rows.append(
            [
                name,
                f"{len(m.latencies)}/{m.changes}",
                _ms(p50),
                _ms(p99),
                _ms(worst),
                f"{req:.1f}" if req is not None else "-",
                f"{steady_req:.1f}" if steady_req is not None else "-",
                f"{cpu:.2f} s" if cpu is not None else "-",
                f"{steady_cpu:.2f} s" if steady_cpu is not None else "-",
                *(_span(m.footprint, key) for key in ("threads", "fds", "rss_mib")),
            ]
        )
        if not m.latencies:
            unmeasured.append(f"{mode}: no outside change was seen")
        data[mode] = dataclasses.asdict(m) | {
            "steady_requests_by_operation_per_node_hour": _by_operation(m, options.nodes),
            "p50_s": p50,
            "p99_s": p99,
            "requests_per_node_hour": req,
            "steady_requests_per_node_hour": steady_req,
            "cpu_s_per_node_hour": cpu,
            "steady_cpu_s_per_node_hour": steady_cpu,
        }
    poll, ev = data.get("polling", {}), data.get("events", {})

    def ratio(key: str) -> float | None:
        return ratio_of(poll.get(key), ev.get(key), 1)

    headline = {
        "detection p99, events (s)": ev.get("p99_s"),
        "detection p99, polling (s)": poll.get("p99_s"),
        "BMC requests per node-hour, polling / events (steady)": ratio(
            "steady_requests_per_node_hour"
        ),
        "client CPU per node-hour, polling / events (steady)": ratio("steady_cpu_s_per_node_hour"),
    }
    ipoll, iev = data.get("ironic-bmaas-polling", {}), data.get("ironic-bmaas-events", {})
    if ipoll or iev:
        headline |= {
            "Ironic bmaas-redfish detection p99, events (s)": iev.get("p99_s"),
            "Ironic bmaas-redfish detection p99, polling (s)": ipoll.get("p99_s"),
            "Ironic BMC requests per node-hour, polling / events (steady)": ratio_of(
                ipoll.get("steady_requests_per_node_hour"),
                iev.get("steady_requests_per_node_hour"),
                1,
            ),
        }
    return Report(
        scenario="events",
        title="Events: power from the BMC's own word vs polling",
        params=dataclasses.asdict(options),
        tables=[
            Table(
                f"{options.nodes} Redfish nodes, outside power changes every ~{options.every:g} s "
                f"(control API), {options.duration:g} s per mode",
                [
                    "mode",
                    "seen",
                    "p50",
                    "p99",
                    "max",
                    "req/node-h",
                    "req/node-h steady",
                    "CPU/node-h",
                    "CPU/node-h steady",
                    "threads",
                    "fds",
                    "RSS MiB",
                ],
                rows,
            ),
            *_adversary_table(results),
        ],
        headline=headline,
        notes=[
            "requests counted at the BMCs (every HTTP request, the SSE GETs and push "
            "subscriptions included); the lab's workers are apart from every CPU figure",
            *_breakdown_note(data),
            "threads, fds, RSS: the sync's, its sweep workers' summed in (one process a "
            "core on a large fleet), at the start of the steady window -> at its end "
            "(the peak and the process count are in the JSON report)",
            *(
                [
                    "sync rows: CPU is the bmaas sync's, its sweep workers' included (user + "
                    "system); 'steady' "
                    f"starts {WARMUP:g} s after the sync has read every node (polling), or "
                    "every node's stream has opened and one more pass has reconciled it "
                    f"(events), at most {options.duration / 2:g} s in; the totals include "
                    "each mode's start-up (process, logins, first pass, streams), which a "
                    "short run does not amortise",
                    f"ratio {fmt_ratio(ratio('steady_requests_per_node_hour'))} fewer requests",
                ]
                if poll or ev
                else []
            ),
            "a streamed node's API is read every "
            + (
                "300 s (the sync's default --liveness-interval: 12 requests per node-hour)"
                if options.liveness_interval is None
                else f"{options.liveness_interval:g} s (--liveness-interval)"
            ),
            *(_ironic_notes(options) if options.ironic else []),
        ],
        data=data,
        plot=plot,
        unmeasured=unmeasured,
    )


def _span(footprint: dict[str, dict[str, float]], key: str) -> str:
    """``start -> end`` of one footprint figure (``-`` where not sampled)."""
    start, end = footprint.get("start", {}).get(key), footprint.get("end", {}).get(key)
    return "-" if start is None or end is None else f"{start:g} -> {end:g}"


def _adversary_table(results: dict[str, Measured]) -> list[Table]:
    """What the adversary row's attack cost the sync next to the push row
    (or the events row), and what it missed."""
    attacked = results.get("adversary")
    if attacked is None or not attacked.adversary:
        return []
    a, peak = attacked.adversary, attacked.footprint.get("peak", {})

    def cpu(m: Measured) -> str:
        return f"{m.steady_cpu / m.steady_seconds:.3f} ({m.mode})" if m.steady_seconds else "-"

    base = results.get("push") or results.get("events")
    figures = {
        "sent": ", ".join(f"{n} {k}" for k, n in sorted(a["sent"].items()))
        + f"; {a['idle']} idle connections held ({a['idle_opened']} opened)",
        "answered": ", ".join(f"{k}: {n}" for k, n in sorted(a["answers"].items())) or "-",
        "sync CPU, s per s": " vs ".join(cpu(m) for m in (attacked, base) if m is not None),
        "sync threads / fds / RSS MiB, peak": " / ".join(
            str(peak.get(k, "-")) for k in ("threads", "fds", "rss_mib")
        ),
        "outside changes missed": f"{attacked.missed} of {attacked.changes}",
        "store rows changed by forgeries (must be 0)": f"{a['forged_rows']} of {a['targets']}",
    }
    return [
        Table(
            "adversary: the push listener under attack (idle connections, garbage, deep "
            "frames, forged events with the Context read off the BMC)",
            ["what", "figure"],
            [[k, v] for k, v in figures.items()],
        )
    ]


def _ironic_notes(options: Options) -> list[str]:
    from bmaas.hwlab.harness.bench.events_ironic import notes

    return notes(options)


def plot(fig: Any, report: Report) -> None:
    """Detection p99, BMC requests and client CPU per node-hour, per mode."""
    modes = list(report.data)
    panels = (
        ("p99_s", "detection p99 (s)"),
        ("steady_requests_per_node_hour", "BMC requests per node-hour"),
        ("steady_cpu_s_per_node_hour", "client CPU s per node-hour"),
    )
    axes = fig.subplots(1, len(panels))
    for ax, (key, label) in zip(axes, panels, strict=True):
        values = [report.data[m].get(key) or 0.0 for m in modes]
        colours = ["#c44e52", "#4c72b0", "#55a868", "#8172b2", "#ccb974", "#64b5cd", "#937860"]
        bars = ax.bar(modes, values, color=[colours[i % len(colours)] for i in range(len(modes))])
        for bar, value in zip(bars, values, strict=True):
            middle = bar.get_x() + bar.get_width() / 2
            ax.text(middle, value, f"{value:.3g}", ha="center", va="bottom")
        ax.set_title(label, fontsize=9)
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(report.title)
    fig.tight_layout()
