"""The ``bmaas`` console script as an operator runs it (real processes, a temp
DB, fake nodes through the ``fake`` entry point), one-line errors, and the
progress bar's rules."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas.cli import App, cli
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.fleet import FakeFleet
from bmaas.ops import driver_factory
from tests.fleet import write_inventory


def run(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("bmaas") or pytest.fail("bmaas is not installed on PATH")
    env = {**os.environ, "BMAAS_DB": str(db)}
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=60, env=env)


def test_the_console_script_end_to_end(tmp_path: Path) -> None:
    db = tmp_path / "state" / "bmaas.db"
    inventory = write_inventory(
        tmp_path / "inv.yaml", [{"name": f"p{i}", "driver": "fake"} for i in range(3)]
    )
    enrolled = run(db, "enroll", str(inventory))
    assert enrolled.returncode == 0, enrolled.stderr
    assert "3 enrolled" in enrolled.stdout
    status = run(db, "power", "status", "--all", "--json")
    assert status.returncode == 0
    assert json.loads(status.stdout)["ok"] == 3
    assert status.stderr == ""  # --json: no progress, no summary noise
    listed = json.loads(run(db, "node", "list", "--json").stdout)
    assert [n["power_state"] for n in listed] == ["off", "off", "off"]


def test_errors_are_one_line_and_debug_brings_the_traceback(tmp_path: Path) -> None:
    db = tmp_path / "bmaas.db"
    assert run(db, "db", "upgrade").returncode == 0
    missing = run(db, "power", "status", "ghost")
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == ["error: node 'ghost': no such node"]
    debug = run(db, "--debug", "power", "status", "ghost")
    assert debug.returncode == 2  # --debug changes the output, never the exit code
    assert "Traceback" in debug.stderr
    blocked = tmp_path / "file"
    blocked.write_text("")
    bad_db = run(blocked / "sub" / "x.db", "node", "list")
    assert bad_db.returncode == 2
    assert len(bad_db.stderr.strip().splitlines()) == 1
    assert bad_db.stderr.startswith("error: ")


@pytest.fixture
def twelve(tmp_path: Path) -> tuple[App, Path]:
    fleet = FakeFleet(clock=FakeClock())
    app = App(db=str(tmp_path / "b.db"), make_factory=lambda **_: driver_factory(fleet=fleet))
    inventory = write_inventory(
        tmp_path / "inv.yaml", [{"name": f"q{i:02d}", "driver": "fake"} for i in range(12)]
    )
    return app, inventory


def test_a_long_run_shows_progress_on_a_terminal_only(
    twelve: tuple[App, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, inventory = twelve
    runner = CliRunner()
    assert runner.invoke(cli, ["enroll", str(inventory)], obj=app).exit_code == 0
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich treats stderr as a terminal
    shown = runner.invoke(cli, ["power", "status", "--all"], obj=app)
    assert shown.exit_code == 0
    assert "power status" in shown.stderr  # the bar's label
    assert len(shown.stdout.splitlines()) == 12  # results stay clean on stdout
    quiet = runner.invoke(cli, ["power", "status", "--all", "--json"], obj=app)
    assert quiet.stderr == ""
    monkeypatch.delenv("FORCE_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    plain = runner.invoke(cli, ["power", "status", "--all"], obj=app)
    assert "power status" not in plain.stderr  # not a terminal: no bar
