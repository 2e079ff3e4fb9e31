"""``hwlab fault add`` on a running proxy refuses an incident whose vendor
answers over the other protocol, as for an emulated node (issue 36): exit 2,
one ``error:`` line naming the rule, nothing added; the proxy's own
protocol's incident is taken."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.lab.proxy_support import HWLAB, hwlab, wait_ready

pytestmark = pytest.mark.lab


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
        wait_ready(state, process, timeout=30)
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
