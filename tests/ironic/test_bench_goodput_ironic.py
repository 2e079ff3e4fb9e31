"""``hwlab bench goodput --backend ironic --smoke``: the three strategies run
through a real Ironic and the report says what each cost (figures are not
asserted: they are the benchmark's to report, not a test's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas.hwlab.cli import cli as hwlab_cli

pytestmark = [
    pytest.mark.ironic,
    pytest.mark.timeout(900),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.OpenStackWarning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK50Warning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK60Warning"),
]


def test_goodput_through_ironic_smoke(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        hwlab_cli,
        ["bench", "goodput", "--backend", "ironic", "--smoke", "--report", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "goodput-ironic.json").read_text())
    strategies = report["data"]["strategies"]
    assert set(strategies) == {"no retry", "blind reschedule", "bmaas"}
    for figures in strategies.values():
        assert figures["ironic_api_calls"] > 0
        assert figures["bmc_calls"] > 0  # counted at the lab's BMCs
    assert strategies["bmaas"]["leaked_allocations"] == 0
    assert "--backend ironic" in report["command"]
    assert (tmp_path / "goodput-ironic.md").exists()


def test_embedded_only_options_are_refused_for_ironic() -> None:
    result = CliRunner().invoke(
        hwlab_cli, ["bench", "goodput", "--backend", "ironic", "--profile", "flaky"]
    )
    assert result.exit_code == 2
    assert "--profile applies to the embedded backend only" in result.output
