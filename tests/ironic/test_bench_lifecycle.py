"""``hwlab bench lifecycle --smoke``: one trial of every row through a real
Ironic and bmaas's CLI (issue 51). Figures are the benchmark's to report;
what is asserted is that every row was measured (stock's firmware clean row
says why it is not run) and the behaviour it exists to show: bmaas's ways
apply a BIOS change and a firmware update through a BMC reboot, and end a
setting left pending typed ``settings_not_applied``; servicing an active
node, both types update the BMC through its reboot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas.hwlab.cli import cli as hwlab_cli

pytestmark = [pytest.mark.ironic, pytest.mark.timeout(900)]


def test_lifecycle_smoke(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        hwlab_cli, ["bench", "lifecycle", "--smoke", "--report", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "lifecycle.json").read_text())
    trials = {(t["what"], t["way"]): t for t in report["data"]["trials"]}
    ours = ("bmaas-redfish", "bmaas CLI")
    assert sorted(trials) == sorted(
        [
            (what, way)
            for what in ("BIOS change", "BIOS change, left pending")
            for way in ("redfish", *ours)
        ]
        + [("firmware update through a BMC reboot", way) for way in ours]
        + [("firmware update through a BMC reboot, servicing", way) for way in ("redfish", ours[0])]
    )
    for way in ours:
        assert trials["BIOS change", way]["right"], trials["BIOS change", way]
        assert trials["firmware update through a BMC reboot", way]["right"]
        pending = trials["BIOS change, left pending", way]
        assert pending["right"], pending
        assert pending["code"] == "settings_not_applied", pending
    assert trials["BIOS change", "redfish"]["right"]  # stock applies a clean change too
    # stock's firmware update needs no ramdisk as a service step: both types
    # update the BMC through its reboot and are active again with the new version
    for way in ("redfish", "bmaas-redfish"):
        serviced = trials["firmware update through a BMC reboot, servicing", way]
        assert serviced["right"], serviced
        assert serviced["end"] == "active", serviced
    overview = report["tables"][0]["rows"]
    stock_firmware = next(r for r in overview if r[0].startswith("firmware") and r[1] == "redfish")
    assert "ramdisk" in stock_firmware[-1], stock_firmware
    assert (tmp_path / "lifecycle.md").exists()
