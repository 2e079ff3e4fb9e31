"""``hwlab bench sync-cpu --smoke``: both contenders measured per node-pass
on one lab, both modes per node-hour, the machine in the report, and the
ratios present (not their values: a smoke on a busy machine proves the
bench runs whole, the full run measures)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab

HWLAB = str(Path(sys.executable).with_name("hwlab"))


# A hang guard, not a timing: the smoke runs 2 x 8 passes, 3 x 30 s, 3 x 12 s and a lab's start.
@pytest.mark.timeout(600)
def test_sync_cpu_bench_smoke_measures_every_row(tmp_path: Path) -> None:
    run = subprocess.run(
        [HWLAB, "bench", "sync-cpu", "--smoke", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=570,
        env={**os.environ, "COLUMNS": "120"},
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["scenario"] == "sync-cpu"
    per_pass = report["data"]["per_pass"]
    assert len(per_pass["bare sushy x 8"]) == 8 - 3
    assert len(per_pass["bmaas sync"]) == 8 - 3
    assert all(v >= 0 for v in per_pass["bmaas sync"] + per_pass["bare sushy x 8"])
    hourly = report["data"]["hourly"]
    assert set(hourly) == {
        "polling",
        "events",
        "push",
        "polling (quiet)",
        "events (quiet)",
        "push (quiet)",
    }
    assert hourly["events"]["missed"] == hourly["push"]["missed"] == 0
    assert hourly["events"]["changes"] > 0
    # the quiet rows: no outside change, and a CPU figure all the same (the
    # process's own clock: not rounded away to zero ticks)
    assert hourly["polling (quiet)"]["changes"] == hourly["events (quiet)"]["changes"] == 0
    assert hourly["events (quiet)"]["steady_cpu"] > 0
    assert hourly["polling (quiet)"]["steady_cpu"] > 0
    assert report["data"]["machine"]["nproc"] >= 1
    headline = report["headline"]
    assert headline["CPU per node-pass, bmaas sync / bare sushy x 8 (median)"]
    assert headline["CPU per node-hour, polling / events, no outside change (steady)"]
    assert "CPU per node-hour, polling / events, a change every ~1.5 s (steady)" in headline
    assert "events: client CPU ms per outside change" in headline
    assert any("no SSE keepalive comment" in note for note in report["notes"])
