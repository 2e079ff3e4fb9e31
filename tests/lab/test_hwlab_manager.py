"""hwlab as operators and lab CI use it: up/status/down through the CLI,
runtime control, profiles, determinism, and a clean teardown."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bmaas.faults import BmaasError
from bmaas.hwlab import profiles
from bmaas.hwlab.control import LabClient
from bmaas.hwlab.daemon import pid_alive, read_pid
from bmaas.hwlab.events import read_events
from bmaas.hwlab.lab import Lab
from bmaas.registry import build_driver
from tests.budgets import per_call
from tests.lab.proxy_support import port_is_free

pytestmark = pytest.mark.lab

HWLAB = shutil.which("hwlab") or "hwlab"


def hwlab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HWLAB, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "lab"
    yield path
    # Whatever a failing test left running goes down here.
    pid_file = path / "hwlab.pid"
    if pid_file.exists():
        hwlab("down", "--state-dir", str(path), "--timeout", "5")


def test_up_status_down_leaves_nothing_running(state_dir: Path) -> None:
    up = hwlab("up", "--nodes", "4", "--protocols", "ipmi", "--state-dir", str(state_dir), "--json")
    assert up.returncode == 0, up.stderr
    info = json.loads(up.stdout)
    assert info["state"] == "ready"
    pids = [info["pid"], *info["worker_pids"]]
    ports = [n["ports"]["ipmi"] for n in info["nodes"].values()]
    assert len(ports) == 4
    assert not any(port_is_free(p) for p in ports)

    status = hwlab("status", "--json", "--state-dir", str(state_dir))
    assert status.returncode == 0, status.stderr
    assert set(json.loads(status.stdout)["nodes"]) == {f"node-00{i}" for i in range(1, 5)}
    table = hwlab("status", "--state-dir", str(state_dir))
    assert "node-001" in table.stdout

    inventory = yaml.safe_load((state_dir / "inventory.yaml").read_text())
    assert [n["driver"] for n in inventory["nodes"]] == ["ipmi"] * 4
    assert oct((state_dir / "inventory.yaml").stat().st_mode & 0o777) == "0o600"

    down = hwlab("down", "--state-dir", str(state_dir))
    assert down.returncode == 0, down.stderr
    assert "lab stopped" in down.stdout
    assert not any(pid_alive(p) for p in pids)
    assert all(port_is_free(p) for p in ports)
    assert not (state_dir / "hwlab.pid").exists()

    again = hwlab("down", "--state-dir", str(state_dir))
    assert again.returncode == 0
    assert "no lab is running" in again.stdout


def test_starting_twice_is_refused_clearly(state_dir: Path) -> None:
    assert (
        hwlab("up", "--nodes", "1", "--protocols", "ipmi", "--state-dir", str(state_dir)).returncode
        == 0
    )
    second = hwlab("up", "--nodes", "1", "--protocols", "ipmi", "--state-dir", str(state_dir))
    assert second.returncode == 2
    assert "already running" in second.stderr
    assert "Traceback" not in second.stderr


def test_two_ups_at_once_on_a_fresh_state_dir_start_one_lab(state_dir: Path) -> None:
    """Both used to succeed (two daemons; pid file and lab.json disagreed):
    the state directory's lock lets one through, the other exits 2."""
    args = [HWLAB, "up", "--nodes", "1", "--protocols", "ipmi", "--state-dir", str(state_dir)]
    first, second = (
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    )
    results = [(p.wait(timeout=120), p.communicate()) for p in (first, second)]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    refused = next(err for code, (_, err) in results if code == 2)
    assert refused.count("\n") == 1, refused
    assert "already running or starting" in refused
    assert "Traceback" not in refused
    info = json.loads((state_dir / "lab.json").read_text())  # pid file and lab.json agree
    mark = read_pid(state_dir)
    assert mark is not None
    assert info["pid"] == mark.pid
    assert mark.holds()  # the daemon's pid, start time and executable, its session's leader
    assert pid_alive(info["pid"])
    status = hwlab("status", "--json", "--state-dir", str(state_dir))
    assert len(json.loads(status.stdout)["nodes"]) == 1


def test_stale_pid_file_is_cleaned_up(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (state_dir / "hwlab.pid").write_text(f"{dead.pid}\n")
    down = hwlab("down", "--state-dir", str(state_dir))
    assert "stale pid file" in down.stdout
    (state_dir / "hwlab.pid").write_text(f"{dead.pid}\n")
    up = hwlab("up", "--nodes", "1", "--protocols", "ipmi", "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stderr
    assert "stale pid file" in up.stderr


def test_a_port_already_taken_gets_a_clear_message(state_dir: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        up = hwlab(
            "up",
            "--nodes",
            "1",
            "--protocols",
            "ipmi",
            "--ipmi-base-port",
            str(port),
            "--state-dir",
            str(state_dir),
        )
    assert up.returncode == 2
    assert f"127.0.0.1:{port}" in up.stderr
    assert "node-001" in up.stderr
    assert "Traceback" not in up.stderr
    assert not (state_dir / "hwlab.pid").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["up", "--profile", "nope"], "unknown profile 'nope'"),
        (["fault", "add", "node-001", "effect"], "unknown effect 'effect'"),
        (["fault", "add", "node-001", "hang", "times"], "expected key=value"),
        (
            ["fault", "add", "node-001", "busy", "retry_after=-1"],
            "retry_after: must be a number from 0 to 86400",
        ),
        (["status"], "no lab is running"),
        (["fault", "clear"], "name one NODE or pass --all"),
        (["power", "node-001", "on"], "no lab is running"),
    ],
)
def test_bad_commands_get_one_clear_line(state_dir: Path, args: list[str], needle: str) -> None:
    result = hwlab(*args, "--state-dir", str(state_dir))
    assert result.returncode == 2
    assert needle in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_lab_file_names_file_line_and_field(state_dir: Path, tmp_path: Path) -> None:
    lab_file = tmp_path / "lab.yaml"
    lab_file.write_text("nodes:\n  - name: a\n    hardware: {cpus: lots}\n")
    result = hwlab("up", "--lab-file", str(lab_file), "--state-dir", str(state_dir))
    assert result.returncode == 2
    assert f"{lab_file}:3: nodes[0].hardware.cpus: must be a whole number" in result.stderr


def test_a_lab_file_with_five_mistakes_reports_all_five(state_dir: Path, tmp_path: Path) -> None:
    from tests.unit.hwlab.test_labspec import FIVE_MISTAKES

    lab_file = tmp_path / "lab.yaml"
    lab_file.write_text(FIVE_MISTAKES)
    result = hwlab("up", "--lab-file", str(lab_file), "--state-dir", str(state_dir))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 5, result.stderr
    for line, field in (
        (2, "name"),
        (4, "power_on_time"),
        (5, "password"),
        (7, "count"),
        (9, "effect"),
    ):
        assert any(x.startswith(f"error: {lab_file}:{line}: ") and field in x for x in lines)
    assert "Traceback" not in result.stderr
    assert not (state_dir / "hwlab.pid").exists()


def test_runtime_control_through_the_api(state_dir: Path) -> None:
    assert (
        hwlab("up", "--nodes", "2", "--protocols", "ipmi", "--state-dir", str(state_dir)).returncode
        == 0
    )
    client = LabClient.from_state_dir(state_dir)
    inventory = yaml.safe_load((state_dir / "inventory.yaml").read_text())
    node = inventory["nodes"][0]
    driver = build_driver(node["name"], "ipmi", node["driver_info"], bmc_timeout=1.0)
    try:
        added = hwlab(
            "fault",
            "add",
            node["name"],
            "effect=busy,operation=power.get",
            "--state-dir",
            str(state_dir),
            "--json",
        )
        assert added.returncode == 0, added.stderr
        assert json.loads(added.stdout) == {
            "node": node["name"],
            "added": [{"effect": "busy", "operation": "power.get"}],
            "in_force": 1,
        }
        with pytest.raises(BmaasError) as info:
            driver.get_power_state(deadline=per_call(driver))
        assert type(info.value).__name__ == "BMCBusy"
        assert hwlab("fault", "clear", "--all", "--state-dir", str(state_dir)).returncode == 0
        assert str(driver.get_power_state(deadline=per_call(driver))) == "off"
        assert hwlab("power", node["name"], "on", "--state-dir", str(state_dir)).returncode == 0
        assert str(driver.get_power_state(deadline=per_call(driver))) == "on"
    finally:
        driver.close()
    status = client.status()["nodes"][node["name"]]
    assert status["power"] == "on"
    assert status["rules"] == []
    events = list(read_events(str(state_dir / "events.jsonl")))
    assert [(e["node"], e["effect"], e["operation"]) for e in events] == [
        (node["name"], "busy", "power.get")
    ]


@pytest.mark.parametrize("profile", sorted(profiles.PROFILES))
def test_every_builtin_profile_comes_up(hwlab_lab: Callable[..., Lab], profile: str) -> None:
    lab = hwlab_lab(nodes=6, protocols="ipmi", profile=profile, seed=5)
    status = lab.status()
    assert len(status["nodes"]) == 6
    in_force = sum(len(n["rules"]) for n in status["nodes"].values())
    expected = sum(
        len(r)
        for r in profiles.assign(
            profiles.resolve(profile), [f"node-00{i}" for i in range(1, 7)], 5
        ).values()
    )
    assert in_force == expected
    assert (in_force == 0) == (profile == "healthy")


def _drive(lab: Lab, calls: int) -> list[tuple[str, str]]:
    """The same client calls every time: reads on every node, no retries."""
    seen = []
    for node in lab.inventory()["nodes"]:
        driver = build_driver(node["name"], node["driver"], node["driver_info"], bmc_timeout=1.0)
        try:
            for _ in range(calls):
                try:
                    seen.append(
                        (node["name"], str(driver.get_power_state(deadline=per_call(driver))))
                    )
                except BmaasError as exc:
                    seen.append((node["name"], type(exc).__name__))
        finally:
            driver.close()
    return seen


def _events(lab: Lab) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in e.items() if k not in ("wall", "time")}
        for e in read_events(str(lab.events_path))
    ]


def test_same_seed_same_event_log(hwlab_lab: Callable[..., Lab], tmp_path: Path) -> None:
    lab_file = tmp_path / "lab.yaml"
    lab_file.write_text(
        "defaults:\n  protocols: [ipmi]\n  faults:\n"
        "    - {effect: busy, operation: power.get, probability: 0.3}\n"
        "    - {effect: internal_error, operation: power.get, probability: 0.1}\n"
        "nodes:\n  - {name: 'n{n}', count: 3}\n"
    )
    runs = []
    for _ in range(2):
        lab = hwlab_lab(lab_file=str(lab_file), seed=11)
        outcomes = _drive(lab, 20)
        runs.append((outcomes, _events(lab)))
        lab.stop()
    assert runs[0] == runs[1]
    assert len(runs[0][1]) > 10
    other = hwlab_lab(lab_file=str(lab_file), seed=12)
    _drive(other, 20)
    assert _events(other) != runs[0][1]


def test_generated_inventory_enrolls_as_is(hwlab_lab: Callable[..., Lab], tmp_path: Path) -> None:
    lab = hwlab_lab(nodes=3, protocols="ipmi")
    db = tmp_path / "bmaas.db"
    env = {**os.environ, "BMAAS_DB": str(db)}
    bmaas = shutil.which("bmaas") or "bmaas"
    enroll = subprocess.run(
        [bmaas, "enroll", str(lab.inventory_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert enroll.returncode == 0, enroll.stderr
    status = subprocess.run(
        [bmaas, "power", "status", "--all", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert status.returncode == 0, status.stderr
    assert "hwlab-password" not in status.stdout + status.stderr
    assert [r["result"] for r in json.loads(status.stdout)["results"]] == ["off"] * 3


def test_sigkilled_daemon_is_cleaned_up_by_down(state_dir: Path) -> None:
    up = hwlab("up", "--nodes", "1", "--protocols", "ipmi", "--state-dir", str(state_dir), "--json")
    info = json.loads(up.stdout)
    os.kill(info["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pid_alive(info["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    down = hwlab("down", "--state-dir", str(state_dir))
    assert down.returncode == 0
    assert "stale pid file" in down.stdout
    # the orphaned worker notices its parent is gone and stops serving
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in info["worker_pids"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(pid_alive(p) for p in info["worker_pids"])


def test_tls_lab_across_workers_verifies_every_node(hwlab_lab: Callable[..., Lab]) -> None:
    # Two workers, each with its own lab CA: every node must name the right one.
    lab = hwlab_lab(nodes=4, protocols="redfish", redfish_tls=True, shard_size=2)
    assert len(lab.pids()) == 2
    nodes = lab.inventory()["nodes"]
    assert len({n["driver_info"]["redfish_verify_ca"] for n in nodes}) == 2
    for node in nodes:
        assert node["driver_info"]["redfish_address"].startswith("https://")
        driver = build_driver(node["name"], "redfish", node["driver_info"], bmc_timeout=2.0)
        try:
            assert str(driver.get_power_state(deadline=per_call(driver))) == "off"
        finally:
            driver.close()
