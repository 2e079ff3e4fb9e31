"""``bmaas bios``, ``bmaas firmware`` and ``bmaas inventory`` over a fake fleet
on a fake clock (issue 51): exit codes, JSON shapes, the per-node lines,
a BIOS change verified after its reboot, and secrets never printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bmaas.cli import App, cli
from bmaas.driver import PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.fleet import FakeFleet
from bmaas.hardware import AttributeInfo
from tests.fleet import enrolled_app

NAMES = ["b0", "b1"]


@pytest.fixture
def fleet() -> FakeFleet:
    fleet = FakeFleet(clock=FakeClock())
    for name in NAMES:
        fleet.add(name, power=PowerState.ON)
    return fleet


@pytest.fixture
def app(tmp_path: Path, fleet: FakeFleet) -> App:
    app: App = enrolled_app(tmp_path, fleet, NAMES)
    return app


def bmaas(app: App, *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), obj=app, catch_exceptions=False)


def lines(result: Result) -> dict[str, str]:
    return {line.split()[0]: line for line in result.stdout.splitlines()}


def test_bios_get_json_has_current_pending_and_the_registry(app: App) -> None:
    result = bmaas(app, "bios", "get", "--all", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] == 2
    first = data["results"][0]["result"]
    assert first["current"]["ProcTurboMode"] == "Enabled"
    assert first["pending"] == {}
    assert first["registry"]["ProcCoreDisable"] == {
        "type": "Integer",
        "allowed": None,
        "read_only": False,
        "lower": 0,
        "upper": 7,
        "max_length": None,
    }


def test_bios_set_stages_and_prints_what_is_pending(app: App, fleet: FakeFleet) -> None:
    result = bmaas(app, "bios", "set", "b0", "b1", "ProcTurboMode=Disabled", "ProcCoreDisable=2")
    assert result.exit_code == 0, result.output
    assert "pending: ProcTurboMode=Disabled ProcCoreDisable=2" in lines(result)["b0"]
    # typed by the registry: the integer went as an integer
    assert fleet.machine("b0").bios.pending == {"ProcTurboMode": "Disabled", "ProcCoreDisable": 2}
    assert fleet.machine("b0").bios.current["ProcTurboMode"] == "Enabled"


def test_bios_set_with_reboot_verifies_and_reports_what_did_not_apply(
    app: App, fleet: FakeFleet
) -> None:
    fleet.machine("b1").bios.applies = "never"
    boots = fleet.machine("b0").boots
    result = bmaas(app, "bios", "set", "--all", "ProcTurboMode=Disabled", "--reboot", "--json")
    assert result.exit_code == 1, result.output
    by_node = {r["node"]: r for r in json.loads(result.stdout)["results"]}
    assert by_node["b0"]["ok"]
    assert by_node["b0"]["result"]["applied"] == {"ProcTurboMode": "Disabled"}
    assert fleet.machine("b0").boots == boots + 1
    fault = by_node["b1"]["fault"]
    assert fault["code"] == "settings_not_applied"
    assert fault["attributes"]["ProcTurboMode"] == {
        "wanted": "Disabled",
        "current": "Enabled",
        "pending": True,
    }
    assert by_node["b1"]["outcome"] == "failed"


def test_bios_set_text_line_names_the_attribute_not_applied(app: App, fleet: FakeFleet) -> None:
    fleet.machine("b0").bios.applies = "partly"
    fleet.machine("b0").bios.sticky = {"ProcHyperthreading"}
    result = bmaas(
        app,
        "bios",
        "set",
        "b0",
        "ProcTurboMode=Disabled",
        "ProcHyperthreading=Disabled",
        "--reboot",
    )
    assert result.exit_code == 1
    line = lines(result)["b0"]
    assert "FAIL" in line
    assert "SettingsNotApplied" in line
    assert "ProcHyperthreading: wanted 'Disabled', reads 'Enabled' (still pending)" in line
    assert "ProcTurboMode:" not in line


def test_bios_set_lists_every_problem_of_a_node_and_sends_nothing(
    app: App, fleet: FakeFleet
) -> None:
    result = bmaas(
        app, "bios", "set", "b0", "Nope=1", "SystemModelName=x", "ProcCoreDisable=99", "--json"
    )
    assert result.exit_code == 1
    fault = json.loads(result.stdout)["results"][0]["fault"]
    assert fault["code"] == "input_error"
    assert fault["problems"] == [
        "node 'b0': bios.Nope: no such attribute in the BMC's registry",
        "node 'b0': bios.SystemModelName: is read-only",
        "node 'b0': bios.ProcCoreDisable: 99 is above 7 (allowed 0..7)",
    ]
    assert json.loads(result.stdout)["results"][0]["outcome"] == "config"
    assert fleet.machine("b0").bios.pending == {}


def test_bios_set_without_a_change_is_a_usage_error(app: App) -> None:
    result = bmaas(app, "bios", "set", "b0")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: ATTR=VALUE: give the changes as ATTR=VALUE"


def test_password_attributes_are_never_printed(app: App, fleet: FakeFleet) -> None:
    for name in NAMES:
        bios = fleet.machine(name).bios
        assert bios.registry is not None
        bios.registry["AdminPassword"] = AttributeInfo("Password")
        bios.current["AdminPassword"] = None
    secret = "s3cret-bios-pw"
    for extra in ((), ("--json",)):
        result = bmaas(app, "bios", "set", "--all", f"AdminPassword={secret}", *extra)
        assert result.exit_code == 0, result.output
        assert secret not in result.output
        assert "***" in result.output
    got = bmaas(app, "bios", "get", "--all", "--json")
    assert secret not in got.output


def test_firmware_list_lines_and_json(app: App) -> None:
    result = bmaas(app, "firmware", "list", "b0")
    assert result.exit_code == 0, result.output
    assert "BMC fake-1.0 (updateable), BIOS fake-bios-1.0 (updateable)" in lines(result)["b0"]
    data = json.loads(bmaas(app, "firmware", "list", "b0", "--json").stdout)
    assert data["results"][0]["result"][0] == {
        "id": "BMC",
        "name": "BMC firmware",
        "version": "fake-1.0",
        "updateable": True,
    }


def test_inventory_json_lists_parts_with_macs(app: App) -> None:
    result = bmaas(app, "inventory", "--all", "--json")
    assert result.exit_code == 0, result.output
    first = json.loads(result.stdout)["results"][0]["result"]
    assert first["cpus"] == 8
    assert first["nics"][0]["mac"].startswith("52:54:00:")
    assert len(first["dimms"]) == 2
    assert [c["id"] for c in first["firmware"]] == ["BMC", "BIOS", "NIC1"]
    text = bmaas(app, "inventory", "b0")
    assert "NICs NIC1=52:54:00:" in lines(text)["b0"]


def test_an_unknown_node_is_a_usage_error(app: App) -> None:
    # an unknown node is still exit 2, as every fleet command
    assert bmaas(app, "bios", "get", "ghost").exit_code == 2
