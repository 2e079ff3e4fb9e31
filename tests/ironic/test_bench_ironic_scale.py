"""``hwlab bench ironic-scale --smoke``: one real Ironic per hardware type,
its power sync timed by its own statsd timer. Figures are the benchmark's to
report; what is asserted is that each was measured, and the one behaviour the
bench exists to show: ``bmaas-ipmi`` keeps its IPMI sessions across Ironic's
sync interval while stock ``ipmi`` (ipmitool) logs in on every read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas.hwlab.cli import cli as hwlab_cli

pytestmark = [pytest.mark.ironic, pytest.mark.timeout(900)]


def test_ironic_scale_smoke(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        hwlab_cli, ["bench", "ironic-scale", "--smoke", "--report", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "ironic-scale.json").read_text())
    trials = {t["driver"]: t for t in report["data"]["trials"]}
    assert set(trials) == {"ipmi", "bmaas-ipmi"}
    for trial in trials.values():
        assert trial["passes"] >= 1, trial  # Ironic's timer was heard after enrollment
        assert trial["pass_median_s"] > 0
        assert trial["cpu_per_node_pass_ms"] is not None
    assert trials["ipmi"]["logins_per_node_pass"] >= 1.0  # ipmitool: a session a read
    assert trials["bmaas-ipmi"]["logins_per_node_pass"] < 0.5  # kept across the interval
    # the dead BMC was fenced (maintenance, fault "power failure") within the smoke's cap
    assert trials["bmaas-ipmi"]["fence_capped"] is False
    assert "fence_s" not in trials["ipmi"]  # stock is not timed in the smoke
    assert (tmp_path / "ironic-scale.md").exists()
