"""``hwlab bench events --smoke --ironic ... --ironic-only``: the Ironic rows
of the events bench (issue 37), each through a real Ironic of its own on the
bench's lab: bmaas-redfish with ``[bmaas]events`` off, on (SSE), and on
through push subscriptions to the conductor's listener.

Figures are the benchmark's to report (never timed here); what is held:
every outside change was seen in every row, and with events (SSE or push)
the BMCs served fewer requests than with polling, counted at the BMCs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas.hwlab.cli import cli as hwlab_cli
from bmaas.hwlab.harness.bench import events_ironic

# a hang guard, not a timing: three Ironics, one after the other, 30 s of changes each
pytestmark = [pytest.mark.ironic, pytest.mark.timeout(900)]

ROWS = ("bmaas-polling", "bmaas-events", "bmaas-push")


def test_events_bench_ironic_rows_smoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # every row enrolled as a fleet over API_ENROLL_MAX is (10,000 nodes):
    # written to Ironic's database before the conductor starts; the REST
    # enrollment is ironic-scale's (tests/ironic/test_bench_ironic_scale.py)
    monkeypatch.setattr(events_ironic, "API_ENROLL_MAX", 0)
    args = ["bench", "events", "--smoke", "--ironic-only", "--report", str(tmp_path)]
    for row in ROWS:
        args += ["--ironic", row]
    result = CliRunner().invoke(hwlab_cli, args)
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "events.json").read_text())
    data = report["data"]
    assert set(data) == {f"ironic-{row}" for row in ROWS}
    for row in data.values():
        assert row["changes"] >= 1, row
        assert row["missed"] == 0, row
        assert len(row["latencies"]) == row["changes"], row
        # the conductor's footprint through the steady window
        for when in ("start", "end", "peak"):
            assert row["footprint"][when]["threads"] > 0, row["footprint"]
            assert row["footprint"][when]["fds"] > 0, row["footprint"]
    polling = data["ironic-bmaas-polling"]
    for mode in ("ironic-bmaas-events", "ironic-bmaas-push"):
        assert data[mode]["steady_requests"] < polling["steady_requests"], (mode, data[mode])
        assert data[mode]["subscribes"] >= 1, data[mode]  # the stream or subscription it made
    assert polling["subscribes"] == 0
    assert "Ironic bmaas-redfish: events (push)" in (tmp_path / "events.md").read_text()
    assert any("written to Ironic's database manageable" in n for n in report["notes"])
    # None when the events row's steady window asked the BMCs nothing (a short run)
    assert "Ironic BMC requests per node-hour, polling / events (steady)" in report["headline"]
