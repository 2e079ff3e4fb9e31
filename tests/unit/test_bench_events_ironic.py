"""hwlab bench events' Ironic rows without an Ironic: each row's
ironic.conf (events off, on, on through push; the sync interval; Ironic
not undoing the outside change), how the table names them, the headline
ratio, and the command line's refusals."""

from __future__ import annotations

from click.testing import CliRunner

from bmaas.hwlab.cli import cli as hwlab_cli
from bmaas.hwlab.harness.bench import events as bench
from bmaas.hwlab.harness.bench.events_ironic import MODES, driver_of, settings


def test_each_row_runs_its_own_ironic_conf() -> None:
    options = bench.Options(interval=59.6, safety_interval=300.0)
    confs = {mode: settings(mode, options) for mode in MODES}
    for conf in confs.values():
        assert conf.sync_interval == 60  # Ironic's option is whole seconds
        assert conf.extra["conductor"]["force_power_state_during_sync"] == "false"
        assert conf.extra["bmaas"]["events_safety_interval"] == 300.0
    assert confs["redfish"].extra["bmaas"]["events"] == "false"
    assert confs["bmaas-polling"].extra["bmaas"]["events"] == "false"
    assert confs["bmaas-events"].extra["bmaas"]["events"] == "true"
    assert "events_listen" not in confs["bmaas-events"].extra["bmaas"]
    push = confs["bmaas-push"].extra["bmaas"]
    assert push["events"] == "true"
    assert push["events_prefer_push"] == "true"
    host, _, port = push["events_listen"].rpartition(":")
    assert host == "127.0.0.1"
    assert int(port) > 0
    assert [driver_of(m) for m in MODES] == ["redfish", *["bmaas-redfish"] * 3]
    assert settings("bmaas-polling", bench.Options(interval=0.5)).sync_interval == 1
    assert "events_liveness_interval" not in confs["bmaas-events"].extra["bmaas"]
    slow = settings("bmaas-events", bench.Options(liveness_interval=1800.0))
    assert slow.extra["bmaas"]["events_liveness_interval"] == 1800.0


def test_rows_are_named_and_the_headline_has_ironic_s_ratio() -> None:
    options = bench.Options(nodes=10, interval=60.0, safety_interval=2400.0, ironic=MODES)
    assert bench.label("ironic-redfish", 60.0, 2400.0) == "Ironic redfish: polling every 60 s"
    assert bench.label("ironic-bmaas-push", 60.0, 2400.0) == (
        "Ironic bmaas-redfish: events (push) + safety net every 2400 s, sync every 60 s"
    )
    results = {
        "ironic-bmaas-polling": bench.Measured(
            "ironic-bmaas-polling", steady_requests=1200, steady_seconds=3600.0, latencies=[30.0]
        ),
        "ironic-bmaas-events": bench.Measured(
            "ironic-bmaas-events", steady_requests=20, steady_seconds=3600.0, latencies=[31.0]
        ),
    }
    report = bench._report(options, results)
    assert report.headline["Ironic BMC requests per node-hour, polling / events (steady)"] == 60.0
    assert report.headline["Ironic bmaas-redfish detection p99, events (s)"] == 31.0
    rows = report.tables[0].rows
    assert [r[0] for r in rows] == [
        "Ironic bmaas-redfish: polling every 60 s",
        "Ironic bmaas-redfish: events (SSE) + safety net every 2400 s, sync every 60 s",
    ]
    assert any("Ironic rows" in note for note in report.notes)


def test_ironic_only_needs_a_row_and_an_unknown_row_is_refused() -> None:
    runner = CliRunner()
    alone = runner.invoke(hwlab_cli, ["bench", "events", "--ironic-only"])
    assert alone.exit_code == 2
    assert "--ironic-only needs --ironic ROW" in alone.output
    assert "Traceback" not in alone.output
    unknown = runner.invoke(hwlab_cli, ["bench", "events", "--ironic", "ipmi"])
    assert unknown.exit_code == 2
    assert "Traceback" not in unknown.output
