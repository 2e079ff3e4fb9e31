"""hwlab bench sync-cpu's arithmetic without a lab: per-pass CPU from
cumulative samples (warm passes left out), medians, the two ratios, and the
machine in the report."""

from __future__ import annotations

from typing import Any

from bmaas.hwlab.harness.bench import events as events_bench
from bmaas.hwlab.harness.bench.sync_cpu import (
    BMAAS,
    SUSHY,
    Options,
    _per_pass,
    _report,
    hourly_modes,
    liveness_ceiling,
)


def test_per_pass_cpu_is_the_step_between_pass_ends_per_node_after_the_warm_ones() -> None:
    cumulative = [1.0, 1.5, 1.7, 1.9, 2.2]  # CPU seconds at each pass's end
    assert _per_pass(cumulative, nodes=10, warm=2) == [
        (1.7 - 1.5) / 10,
        (1.9 - 1.7) / 10,
        (2.2 - 1.9) / 10,
    ]
    assert _per_pass(cumulative, nodes=10, warm=5) == []


def test_the_report_has_both_ratios_medians_and_the_machine() -> None:
    options = Options(nodes=100, interval=60.0, safety_interval=300.0, duration=600.0)
    per_pass = {SUSHY: [0.0030, 0.0031, 0.0029], BMAAS: [0.0006, 0.0009, 0.0007]}
    polling = events_bench.Measured(
        "polling", steady_cpu=2.0, steady_seconds=600.0, steady_requests=1000
    )
    events = events_bench.Measured("events", steady_cpu=0.05, steady_seconds=600.0)
    report = _report(
        options, per_pass, {"polling": polling, "events": events}, [1.0, 1, 1], [2.0, 2, 2]
    )
    ratio = report.headline["CPU per node-pass, bmaas sync / bare sushy x 8 (median)"]
    assert ratio == round(0.0007 / 0.0030, 3)
    assert report.headline["CPU per node-hour, polling / events, a change every ~8 s (steady)"] == (
        40.0
    )
    assert (
        report.headline["CPU per node-hour, polling / events, no outside change (steady)"] is None
    )
    hourly = report.data["hourly"]
    assert round(hourly["polling"]["steady_requests_per_node_hour"], 6) == 60.0
    assert hourly["events"]["steady_cpu_s_per_node_hour"] == 0.05 / (100 * 600 / 3600)
    assert report.data["machine"]["load_before"] == [1.0, 1, 1]
    assert report.data["machine"]["nproc"]
    assert not report.unmeasured


def test_a_contender_without_a_steady_pass_is_unmeasured() -> None:
    report = _report(Options(), {SUSHY: [0.003], BMAAS: []}, {}, [0.0] * 3, [0.0] * 3)
    assert report.unmeasured == [f"{BMAAS}: no steady pass"]
    assert report.headline["CPU per node-pass, bmaas sync / bare sushy x 8 (median)"] is None


def test_quiet_rows_give_the_cost_of_a_change_and_the_rate_up_to_which_20x_holds() -> None:
    """100 nodes, 600 s windows: polling quiet 2.0 s, events quiet 0.05 s,
    events with 30 changes 0.11 s: a change costs (0.11 - 0.05) / 30 = 2 ms;
    per node-hour polling is 0.12 s and events quiet 0.003 s, so 20x holds
    while changes cost at most 0.12 / 20 - 0.003 = 0.003 s a node-hour:
    1.5 changes per node-hour."""
    options = Options(nodes=100, interval=60.0, safety_interval=300.0, duration=600.0)
    per_pass = {SUSHY: [0.003], BMAAS: [0.001]}

    def row(mode: str, cpu: float, changes: int = 0) -> events_bench.Measured:
        return events_bench.Measured(mode, changes=changes, steady_cpu=cpu, steady_seconds=600.0)

    hourly = {
        "polling": row("polling", 2.0, 30),
        "events": row("events", 0.11, 30),
        "polling (quiet)": row("polling", 2.0),
        "events (quiet)": row("events", 0.05),
    }
    report = _report(options, per_pass, hourly, [0.0] * 3, [0.0] * 3)
    headline = report.headline
    assert headline["CPU per node-hour, polling / events, no outside change (steady)"] == 40.0
    assert headline["events: client CPU ms per outside change"] == 2.0
    assert headline["events stay >= 20x below polling up to this many changes per node-hour"] == 1.5
    quiet_rows = [r for r in report.tables[1].rows if r[0].endswith("no outside change")]
    assert [r[1] for r in quiet_rows] == ["-", "-"]  # no change to be seen


def test_the_events_rows_run_at_the_liveness_interval_given_and_say_its_ceiling() -> None:
    """Issue 48's liveness reads bound the ratio whatever an event costs:
    polling at 60 s reads a node 60 times an hour, the default liveness (300 s)
    12 times, so events are at most 5x below polling; --liveness-interval 0
    (none) leaves no such ceiling, 1800 s gives 30x."""
    default = Options(interval=60.0)
    assert hourly_modes(default).liveness_interval is None  # the sync's own default
    assert liveness_ceiling(default) == 5.0
    assert hourly_modes(Options(liveness_interval=0.0)).liveness_interval == 0.0
    assert liveness_ceiling(Options(interval=60.0, liveness_interval=0.0)) is None
    assert liveness_ceiling(Options(interval=60.0, liveness_interval=1800.0)) == 30.0

    def notes(options: Options) -> tuple[list[str], Any]:
        report = _report(options, {SUSHY: [0.003], BMAAS: [0.001]}, {}, [0.0] * 3, [0.0] * 3)
        return report.notes, report.headline[
            "CPU per node-hour, polling / events, at most (the liveness reads alone)"
        ]

    text, ceiling = notes(default)
    assert ceiling == 5.0
    assert any(
        "every 300 s (the sync's default): 12 reads per node-hour against polling's 60" in n
        for n in text
    )
    text, ceiling = notes(Options(liveness_interval=0.0))
    assert ceiling is None
    assert any("no liveness read" in n for n in text)
