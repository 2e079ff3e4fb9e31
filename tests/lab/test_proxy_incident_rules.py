"""``hwlab fault add`` on a running proxy refuses an incident whose vendor
answers over the other protocol, as for an emulated node (issue 36): exit 2,
one ``error:`` line naming the rule, nothing added; the proxy's own
protocol's incident is taken."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.lab

HWLAB = shutil.which("hwlab") or "hwlab"


def hwlab(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HWLAB, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _ready(state: Path, process: subprocess.Popen[str], timeout: float = 30) -> dict[str, Any]:
    limit = time.monotonic() + timeout
    while time.monotonic() < limit:
        try:
            info = json.loads((state / "lab.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            info = {}
        if info.get("state") == "ready":
            return info
        assert process.poll() is None, "hwlab proxy exited early"
        time.sleep(0.05)
    raise AssertionError("hwlab proxy did not become ready")


def test_fault_add_refuses_an_incident_of_the_other_protocol_on_a_proxy(tmp_path: Path) -> None:
    state = tmp_path / "state"
    process = subprocess.Popen(  # a Redfish proxy; its upstream is never asked here
        [
            HWLAB,
            "proxy",
            *("--protocol", "redfish", "--upstream", "http://127.0.0.1:9"),
            *("--node", "r1", "--state-dir", str(state)),
        ],
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _ready(state, process)
        refused = hwlab(
            "fault", "add", "r1", "incident", "incident=ipmi-node-busy", "--state-dir", str(state)
        )
        assert refused.returncode == 2, refused.stderr
        lines = [line for line in refused.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, lines
        assert lines[0].startswith("error: ")
        assert "incident 'ipmi-node-busy' answers over ipmi only" in lines[0]
        assert "Traceback" not in refused.stderr
        taken = hwlab(
            "fault",
            "add",
            "r1",
            "incident",
            "incident=idrac10-power-on-conflict",
            "--state-dir",
            str(state),
        )
        assert taken.returncode == 0, taken.stderr
        assert "1 rule(s) added, 1 in force" in taken.stdout  # the refused one was not added
        assert hwlab("down", "--state-dir", str(state)).returncode == 0
        process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.communicate(timeout=10)
