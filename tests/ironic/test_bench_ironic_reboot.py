"""``hwlab bench ironic-reboot --smoke``: one round through a real Ironic
(a 10 s BMC reboot and six "node busy" answers, bmaas-ipmi beside stock
ipmi). Figures are the benchmark's to report; what is asserted is that every
trial was measured and the behaviour it exists to show: bmaas-ipmi powers
the node on through both, within the operation deadline (issue 35)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas.hwlab.cli import cli as hwlab_cli

pytestmark = [pytest.mark.ironic, pytest.mark.timeout(900)]


def test_ironic_reboot_smoke(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        hwlab_cli, ["bench", "ironic-reboot", "--smoke", "--report", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "ironic-reboot.json").read_text())
    trials = report["data"]["trials"]
    assert sorted((t["driver"], t["fault"]) for t in trials) == [
        ("bmaas-ipmi", "busy x6"),
        ("bmaas-ipmi", "reboot 10s"),
        ("ipmi", "busy x6"),
        ("ipmi", "reboot 10s"),
    ]
    for trial in trials:
        assert trial["off_first"], trial
        assert trial["fired"] >= 1, trial  # the fault met a request
        assert trial["settled"], trial  # stock's outcome is its own; it was measured
    for trial in (t for t in trials if t["driver"] == "bmaas-ipmi"):
        assert trial["on"], trial
        assert trial["seconds"] <= report["params"]["operation_deadline"] + 30, trial
    assert (tmp_path / "ironic-reboot.md").exists()
