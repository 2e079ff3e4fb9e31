"""Fleet commands retry what the policy table says is retryable, report what is
left by the table's fleet column, and ``power reboot`` is the safe reboot.
A fake fleet on a fake clock: no real sleeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bmaas.cli import App, cli
from bmaas.driver import PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.fleet import FakeFleet
from tests.fleet import enrolled_app

NAMES = [f"q{i:02d}" for i in range(4)]


@pytest.fixture
def fleet() -> FakeFleet:
    fleet = FakeFleet(clock=FakeClock())
    for name in NAMES:
        fleet.add(name, power=PowerState.OFF)
    return fleet


@pytest.fixture
def app(tmp_path: Path, fleet: FakeFleet) -> App:
    app: App = enrolled_app(tmp_path, fleet, NAMES)
    return app


def bmaas(app: App, *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), obj=app, catch_exceptions=False)


def words(result: Result) -> dict[str, str]:
    return {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()}


def busy_now_and_then(fleet: FakeFleet, times: int = 2) -> None:
    for name in NAMES[:2]:
        rule = {"effect": "busy", "operation": "*", "times": times, "retry_after": 0.25}
        fleet.machine(name).plan.add(FaultRule.from_dict(rule))


def test_power_on_all_retries_busy_bmcs_and_exits_0(app: App, fleet: FakeFleet) -> None:
    busy_now_and_then(fleet)
    result = bmaas(app, "power", "on", "--all", "--workers", "1")
    assert result.exit_code == 0, result.output
    assert set(words(result).values()) == {"ok"}
    assert all(fleet.machine(n).power_state() is PowerState.ON for n in NAMES)
    # two busy answers per busy node, backoff 0.5 then 1.0 (jitter off)
    assert fleet.clock.sleeps.count(0.5) >= 2
    assert fleet.clock.sleeps.count(1.0) >= 2


def test_no_retry_shows_the_raw_first_answer_by_the_table(app: App, fleet: FakeFleet) -> None:
    busy_now_and_then(fleet)
    fleet.machine(NAMES[2]).plan.add(FaultRule.from_dict({"effect": "auth_fail"}))
    result = bmaas(app, "power", "status", "--all", "--no-retry")
    assert result.exit_code == 1
    assert words(result) == {NAMES[0]: "BUSY", NAMES[1]: "BUSY", NAMES[2]: "AUTH", NAMES[3]: "ok"}
    assert "1 ok, 3 failed (1 auth, 2 busy)" in result.stderr
    assert fleet.clock.sleeps == []
    report = json.loads(bmaas(app, "power", "status", "--all", "--no-retry", "--json").stdout)
    outcomes = [r["outcome"] for r in report["results"]]
    assert outcomes == ["busy", "busy", "auth", "ok"]  # each busy node's second answer


@pytest.mark.parametrize(
    "args",
    [
        ("boot-device", "set", "--all", "--device", "pxe"),
        ("vmedia", "insert", "--all", "--url", "http://127.0.0.1/x.iso"),
        ("vmedia", "eject", "--all"),
        ("sync",),
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_every_fleet_command_retries(app: App, fleet: FakeFleet, args: tuple[str, ...]) -> None:
    busy_now_and_then(fleet)
    result = bmaas(app, *args)
    assert result.exit_code == 0, result.output
    assert set(words(result).values()) == {"ok"}


def test_auth_is_never_retried_so_no_account_is_locked(app: App, fleet: FakeFleet) -> None:
    fleet.machine(NAMES[0]).plan.add(FaultRule.from_dict({"effect": "auth_fail", "times": 1}))
    result = bmaas(app, "power", "on", NAMES[0])
    assert result.exit_code == 1
    assert words(result) == {NAMES[0]: "AUTH"}
    assert fleet.clock.sleeps == []


def test_power_reboot_is_the_safe_reboot(app: App, fleet: FakeFleet) -> None:
    """A reset whose answer is lost is never resent: the power state is read,
    and idempotent OFF then ON finish the job: one boot, exit 0."""
    node = NAMES[0]
    assert bmaas(app, "power", "on", node).exit_code == 0
    machine = fleet.machine(node)
    boots = machine.boots
    machine.plan.add(FaultRule.from_dict({"effect": "hang", "operation": "power.set", "times": 1}))
    result = bmaas(app, "power", "reboot", node, "--bmc-timeout", "2")
    assert result.exit_code == 0, result.output
    assert words(result) == {node: "ok"}
    assert machine.boots == boots + 1
    assert machine.power_state() is PowerState.ON
