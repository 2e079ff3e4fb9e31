"""``bmaas sync`` keeps sessions (reads per login in its output) and shards
a sweep over processes with --processes, writing the store from one process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas.cli import App, cli
from tests.fleet import write_inventory


def _enroll(tmp_path: Path, count: int) -> App:
    app = App(db=str(tmp_path / "b.db"))  # the real driver factory: "fake" drivers
    inventory = write_inventory(
        tmp_path / "inv.yaml", [{"name": f"q{i:02d}", "driver": "fake"} for i in range(count)]
    )
    assert CliRunner().invoke(cli, ["enroll", str(inventory)], obj=app).exit_code == 0
    return app


def _documents(text: str) -> list[dict]:
    decoder, out, at = json.JSONDecoder(), [], 0
    while text[at:].strip():
        at += len(text[at:]) - len(text[at:].lstrip())
        doc, at = decoder.raw_decode(text, at)
        out.append(doc)
    return out


def test_a_sync_loop_reports_reads_per_login(tmp_path: Path) -> None:
    app = _enroll(tmp_path, 5)
    result = CliRunner().invoke(
        cli, ["sync", "--interval", "0.01", "--count", "4", "--processes", "1"], obj=app
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 4
    assert "logins: 5, reads per login: 1.0" in lines[0]
    assert "logins: 5, reads per login: 4.0" in lines[3]


@pytest.mark.procs
def test_a_sharded_sync_reads_every_node_once_and_writes_the_store(tmp_path: Path) -> None:
    app = _enroll(tmp_path, 30)
    result = CliRunner().invoke(
        cli,
        ["sync", "--interval", "0.01", "--count", "2", "--processes", "2", "--json"],
        obj=app,
    )
    assert result.exit_code == 0, result.output
    passes = _documents(result.stdout)
    assert [p["pass"] for p in passes] == [1, 2]
    for report in passes:
        assert sorted(r["node"] for r in report["results"]) == [f"q{i:02d}" for i in range(30)]
        assert all(r["ok"] for r in report["results"])
    assert passes[1]["sessions"]["logins"] == 30  # kept by each worker across passes
    assert passes[1]["sessions"]["reads"] == 60
    shown = CliRunner().invoke(cli, ["node", "show", "q07", "--json"], obj=app)
    assert json.loads(shown.stdout)["power_state"] == "off"
