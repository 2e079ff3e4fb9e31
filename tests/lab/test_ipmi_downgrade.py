"""No silent IPMI downgrade (issue 36), end to end through the CLI on hwlab's
IPMI emulator: a BMC that offers only cipher suite 3 is refused by default
(one typed fault naming ``ipmi_cipher_suite``); with ``ipmi_cipher_suite:
auto`` it is used, recorded on the node, listed by ``node show`` and warned
about by ``status check``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bmaas.cli import App, cli
from bmaas.driver import Quirk
from tests.lab.conftest import PASSWORD, USER, Lab

pytestmark = pytest.mark.lab


def _bmaas(db: Path, *args: str) -> Result:
    result = CliRunner().invoke(cli, ["--db", str(db), *args], obj=App(), catch_exceptions=False)
    assert PASSWORD not in result.output
    return result


def _inventory(tmp_path: Path, lab: Lab, suites: dict[str, str | None]) -> Path:
    lines = ["nodes:"]
    for name, suite in suites.items():
        lines += [
            f"  - name: {name}",
            "    driver: ipmi",
            "    driver_info:",
            "      ipmi_address: 127.0.0.1",
            f"      ipmi_port: {lab.server.endpoints[name]}",
            f"      ipmi_username: {USER}",
            f"      ipmi_password: {PASSWORD}",
        ]
        if suite is not None:
            lines.append(f"      ipmi_cipher_suite: {suite}")
    path = tmp_path / "inventory.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_suite_3_only_with_auto_and_then_recorded_and_reported(lab: Lab, tmp_path: Path) -> None:
    lab.machine("strict", cipher_suites=(3,))
    lab.machine("lenient", cipher_suites=(3,))
    lab.machine("modern")  # 17 and 3
    db = tmp_path / "bmaas.db"
    inventory = _inventory(tmp_path, lab, {"strict": None, "lenient": "auto", "modern": "auto"})
    assert _bmaas(db, "enroll", str(inventory)).exit_code == 0

    result = _bmaas(db, "power", "status", "--all", "--json", "--bmc-timeout", "3")
    assert result.exit_code == 1
    rows = {r["node"]: r for r in json.loads(result.stdout)["results"]}
    assert rows["lenient"]["result"] == "off"
    assert rows["modern"]["result"] == "off"
    strict = rows["strict"]
    assert strict["fault"]["code"] == "unsupported_operation"
    assert strict["outcome"] == "unsupported"  # never counted, never fenced
    assert "set driver_info ipmi_cipher_suite: auto" in strict["fault"]["message"]

    # recorded on the node that was downgraded, and only there
    shown = json.loads(_bmaas(db, "node", "show", "lenient", "--json").stdout)
    assert shown["quirks"] == [str(Quirk.IPMI_SUITE_3)]
    assert any(e["kind"] == "bmc_quirk" for e in shown["events"])
    assert json.loads(_bmaas(db, "node", "show", "modern", "--json").stdout)["quirks"] == []
    text = _bmaas(db, "node", "show", "lenient").stdout
    assert f"quirks:         {Quirk.IPMI_SUITE_3}" in text
    strict_shown = json.loads(_bmaas(db, "node", "show", "strict", "--json").stdout)
    assert strict_shown["quirks"] == []
    assert strict_shown["maintenance"] is False
    assert strict_shown["fault_count"] == 0

    # reported by status check: a Warning naming the node
    result = _bmaas(db, "status", "check", "--only", "bmc", "--json", "--deadline", "10")
    (bmc,) = json.loads(result.stdout)["checks"]
    assert bmc["nodes"][str(Quirk.IPMI_SUITE_3)] == ["lenient"]
    assert any("cipher suite 3" in line and "lenient" in line for line in bmc["details"])
