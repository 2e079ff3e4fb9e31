"""hwlab bench sync-cpu's arithmetic without a lab: per-pass CPU from
cumulative samples (warm passes left out), medians, the two ratios, and the
machine in the report."""

from __future__ import annotations

from bmaas.hwlab.harness.bench import events as events_bench
from bmaas.hwlab.harness.bench.sync_cpu import BMAAS, SUSHY, Options, _per_pass, _report


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
    assert report.headline["CPU per node-hour, polling / events (steady)"] == 40.0
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
