"""A lab that survives its own faults: kill -9 of a worker mid-run."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from bmaas.driver import PowerState
from bmaas.hwlab.daemon import pid_alive
from bmaas.registry import build_driver
from tests.budgets import per_call
from tests.lab.test_hwlab_manager import hwlab, state_dir

__all__ = ["state_dir"]  # the fixture, shared with the manager's tests

pytestmark = pytest.mark.lab


def _status(state: Path) -> dict[str, Any]:
    result = hwlab("status", "--json", "--state-dir", str(state))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _wait(state: Path, until: Any, limit: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + limit
    while True:
        info = _status(state)
        if until(info):
            return info
        assert time.monotonic() < deadline, info["workers"]
        time.sleep(0.2)


def _up(state: Path, *extra: str) -> None:
    args = ("up", "--nodes", "4", "--shard-size", "2", "--state-dir", str(state), *extra)
    result = hwlab(*args)
    assert result.returncode == 0, result.stderr


def _kill_worker_of(state: Path, node: str) -> int:
    info = _status(state)
    owner = sorted(info["nodes"]).index(node) % len(info["workers"])  # shards deal nodes round
    pid = next(w["pid"] for w in info["workers"] if w["index"] == owner)
    os.kill(pid, signal.SIGKILL)
    return pid


def test_a_killed_worker_is_reported_then_restarted_with_its_machines(state_dir: Path) -> None:
    _up(state_dir)
    assert (
        hwlab(
            "fault",
            "add",
            "node-002",
            "hang",
            "operation=vmedia.eject",
            "--state-dir",
            str(state_dir),
        ).returncode
        == 0
    )
    assert hwlab("power", "node-002", "on", "--state-dir", str(state_dir)).returncode == 0
    pid = _kill_worker_of(state_dir, "node-002")

    # The death is reported, and still after the restart: a restart (about a
    # second) can finish between two `hwlab status` calls, each a CLI start-up.
    # What a shard looks like while it is down is test_no_restart_... below.
    seen = _wait(state_dir, lambda i: any(w["died_pid"] == pid for w in i["workers"]))
    dead = next(w for w in seen["workers"] if w["died_pid"] == pid)
    assert "signal 9" in dead["cause"]
    assert dead["died_at"] is not None

    back = _wait(state_dir, lambda i: all(w["state"] == "alive" for w in i["workers"]))
    node = back["nodes"]["node-002"]
    assert node["power"] == "on"  # machine state carried over
    assert node["rules"] == ["hang on vmedia.eject"]  # and its rules
    text = hwlab("status", "--state-dir", str(state_dir)).stdout
    assert (
        f"worker {dead['index']}: restarted 1 time(s), last killed by signal 9 (pid {pid})" in text
    ), text
    assert "died (killed by signal 9)" in (state_dir / "hwlab.log").read_text()
    lab_json = json.loads((state_dir / "lab.json").read_text())
    assert pid not in lab_json["worker_pids"]
    assert sorted(lab_json["worker_pids"]) == sorted(w["pid"] for w in back["workers"])

    # Clients recover: the inventory hwlab wrote still reaches the node.
    inventory = yaml.safe_load((state_dir / "inventory.yaml").read_text())
    record = next(n for n in inventory["nodes"] if n["name"] == "node-002")
    driver = build_driver("node-002", record["driver"], record["driver_info"], bmc_timeout=5.0)
    try:
        assert driver.get_power_state(deadline=per_call(driver)) is PowerState.ON
    finally:
        driver.close()
    assert not pid_alive(pid)


def test_no_restart_leaves_the_worker_dead_and_says_so(state_dir: Path) -> None:
    _up(state_dir, "--no-restart")
    pid = _kill_worker_of(state_dir, "node-001")
    info = _wait(state_dir, lambda i: any(w["state"] == "dead" for w in i["workers"]))
    time.sleep(1.5)  # several supervisor passes: still dead
    info = _status(state_dir)
    assert [w["state"] for w in info["workers"]].count("dead") == 1
    dead = next(w for w in info["workers"] if w["state"] == "dead")
    assert dead["pid"] == dead["died_pid"] == pid
    assert "signal 9" in dead["cause"]
    assert info["nodes"]["node-001"]["worker_down"] == "dead"
    # the living shard is still listed, with its real state
    assert len([n for n, v in info["nodes"].items() if "worker_down" not in v]) == 2
    result = hwlab("status", "--state-dir", str(state_dir))
    assert result.returncode == 0
    assert f"(pid {pid}) dead" in result.stdout
    assert "left dead (--no-restart)" in result.stdout
    refused = hwlab("fault", "add", "node-001", "hang", "--state-dir", str(state_dir))
    assert refused.returncode == 2
    assert "worker" in refused.stderr
