"""``hwlab bench events --smoke``: every default row measured, side by side.

What a bench measures is its report's business (never timed here); what is
held: every outside change was seen in every row (the adversary's too),
counted requests at the BMCs are fewer with events than with polling, the
sync's threads, fds and RSS are reported, the adversary's forgeries changed
no store row and each of its attacks was refused, and the report is whole.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab

HWLAB = str(Path(sys.executable).with_name("hwlab"))


# A hang guard, not a timing: the smoke runs 3 x 40 s plus a lab's start.
@pytest.mark.timeout(480)
def test_events_bench_smoke_sees_every_change_with_fewer_requests(tmp_path: Path) -> None:
    out = tmp_path / "report"
    run = subprocess.run(
        [HWLAB, "bench", "events", "--smoke", "--json", "--report", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=450,
        env={**os.environ, "COLUMNS": "120"},
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["scenario"] == "events"
    assert report["command"] == f"hwlab bench events --smoke --json --report {out}"
    polling, events = report["data"]["polling"], report["data"]["events"]
    attacked = report["data"]["adversary"]
    for mode in (polling, events, attacked):
        assert mode["changes"] >= 1
        assert mode["missed"] == 0
        assert len(mode["latencies"]) == mode["changes"]
        assert set(mode["footprint"]) == {"start", "end", "peak"}
        assert mode["footprint"]["peak"]["threads"] <= 32
    attack = attacked["adversary"]
    assert attack["forged_rows"] == 0  # a forgery costs a read, never a write
    assert attack["targets"] >= 1
    assert attack["answers"].get("forged 204", 0) >= 1  # the Context was right
    assert attack["answers"].get("deep 400", 0) >= 1
    assert attack["answers"].get("garbage 403", 0) >= 1
    assert attack["idle_opened"] >= attack["idle"]
    assert events["steady_requests"] < polling["steady_requests"]
    assert events["subscribes"] >= 2  # the EventService read and the SSE GET, per node
    assert polling["subscribes"] == 0
    assert (out / "events.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report["title"] in (out / "events.md").read_text()
