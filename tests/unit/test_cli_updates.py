"""``bmaas firmware update`` and ``bmaas bmc reset`` over a fake fleet on a
fake clock (issue 51): lines, JSON, progress, the roll-out stopped by the
first rejected image, the BMC waited for, and bad input exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bmaas.cli import App
from bmaas.driver import PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.fleet import FakeFleet
from tests.fleet import enrolled_app
from tests.unit.test_cli_lifecycle import bmaas

NAMES = ["u0", "u1", "u2"]
FAST = ("--poll", "1", "--back-interval", "1")


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


def _rule(fleet: FakeFleet, node: str, **rule: object) -> None:
    fleet.machine(node).plan.add(FaultRule.from_dict({"operation": "firmware.update", **rule}))


def test_an_update_is_followed_verified_and_shown(app: App, fleet: FakeFleet) -> None:
    image = "http://img/bios-2.0.bin"
    result = bmaas(app, "firmware", "update", "u0", "--image", image, "--targets", "BIOS", *FAST)
    assert result.exit_code == 0, result.output
    assert "u0: update taken (task: fake-task/1)" in result.output
    assert "u0: task Completed 100%" in result.output
    line = next(x for x in result.stdout.splitlines() if x.startswith("u0"))
    assert "ok" in line
    assert "now BMC fake-1.0, BIOS bios-2.0.bin, NIC1 fake-nic-1.0" in line
    assert [c.version for c in fleet.machine("u0").firmware if c.id == "BIOS"] == ["bios-2.0.bin"]


def test_json_gives_the_versions_after_and_no_progress(app: App) -> None:
    result = bmaas(app, "firmware", "update", "u1", "--image", "http://img/b.bin", "--json", *FAST)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    after = {c["id"]: c["version"] for c in data["results"][0]["result"]}
    assert after["BIOS"] == "b.bin"
    assert "task Completed" not in result.output


def test_the_first_rejected_image_stops_the_roll_out(app: App, fleet: FakeFleet) -> None:
    _rule(fleet, "u0", effect="update_rejected")
    result = bmaas(
        app, "firmware", "update", "--all", "--image", "http://img/bad.bin", "--workers", "1",
        "--json", *FAST,
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    outcome = {r["node"]: r["outcome"] for r in json.loads(result.stdout)["results"]}
    assert outcome == {"u0": "rejected", "u1": "skipped", "u2": "skipped"}
    assert fleet.machine("u1").updates == []  # never sent


@pytest.mark.parametrize(
    ("rule", "fault"),
    [
        ({"effect": "task_hang"}, "TaskStuck"),
        ({"effect": "version_unchanged"}, "SettingsNotApplied"),
        ({"effect": "update_reboot", "duration": 120}, "BMCNotBack"),
    ],
)
def test_each_failure_fails_its_node_typed(
    app: App, fleet: FakeFleet, rule: dict[str, object], fault: str
) -> None:
    _rule(fleet, "u2", **rule)
    result = bmaas(
        app, "firmware", "update", "u2", "--image", "http://img/x.bin", "--task-timeout", "10",
        "--back-timeout", "20", *FAST,
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    line = next(x for x in result.stdout.splitlines() if x.startswith("u2"))
    assert f"FAIL  {fault}" in line


def test_bmc_reset_waits_for_the_bmc(app: App) -> None:
    result = bmaas(app, "bmc", "reset", "u0", "--back-interval", "1", "--back-checks", "2")
    assert result.exit_code == 0, result.output
    assert "u0: reset taken: waiting for the BMC" in result.output
    assert "u0: BMC answers (2 of 2)" in result.output
    assert "back after" in result.stdout


def test_every_problem_of_the_command_line_at_once(app: App) -> None:
    result = bmaas(app, "firmware", "update", "--image", "ftp://img/x", "--targets", "BIOS,")
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        "error: NODE: name at least one node, or give --all",
        "error: --image: 'ftp://img/x' is not an http, https or file URI or a path",
        "error: --targets: an empty component id",
    ]
