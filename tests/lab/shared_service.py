"""Many systems behind one Redfish service, driven through the ``bmaas`` CLI.

Shared by the lab tests against stock ``sushy-emulator`` (its fake driver)
and against hwlab's shared-service option: enroll N nodes on one service
root, power them on and off, deploy N at once while a sync loop reads them,
and count at the server what reached it (service-root reads: one per bmaas
process, i.e. one client and one session per service).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

#: seconds any one CLI command may take here (the lab is shared and loaded)
COMMAND_TIMEOUT = 240


@dataclass
class Run:
    """What a shared-service run measured."""

    power_on: dict[str, Any]
    power_off: dict[str, Any]
    deploy: dict[str, Any]
    sync_failed_reads: int
    sync_passes: int


def write_inventory(path: Path, address: str, systems: list[str]) -> Path:
    nodes = [
        {
            "name": f"sys-{i}",
            "driver": "redfish",
            "driver_info": {
                "redfish_address": address,
                "redfish_system_id": system,
                "redfish_username": "admin",
                "redfish_password": "password",
            },
        }
        for i, system in enumerate(systems)
    ]
    path.write_text(yaml.safe_dump({"nodes": nodes}))
    return path


def bmaas(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("bmaas") or pytest.fail("bmaas is not installed on PATH")
    env = {**os.environ, "BMAAS_DB": str(db)}
    return subprocess.run(
        [exe, *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT, env=env
    )


def _json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.stdout, done.stderr
    out = json.loads(done.stdout)
    assert isinstance(out, dict)
    return out


def run_fleet(tmp_path: Path, inventory: Path, nodes: int) -> Run:
    """Enroll, power on --all, deploy ``nodes`` at once beside a sync loop,
    power off --all; every command a separate bmaas process."""
    db = tmp_path / "bmaas.db"
    enrolled = bmaas(db, "enroll", str(inventory))
    assert enrolled.returncode == 0, enrolled.stderr
    power_on = _json(bmaas(db, "power", "on", "--all", "--json"))
    sync_log = tmp_path / "sync.json"
    env = {**os.environ, "BMAAS_DB": str(db)}
    exe = shutil.which("bmaas") or pytest.fail("bmaas is not installed on PATH")
    with sync_log.open("w") as out:
        # --no-split: one sync worker, no lease rows to race the deploys' claims
        syncing = subprocess.Popen(
            [exe, "sync", "--interval", "0.5", "--count", "12", "--no-split", "--json"],
            stdout=out,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            deploy = _json(
                bmaas(
                    db,
                    "deploy",
                    "--count",
                    str(nodes),
                    "--workers",
                    str(nodes),
                    "--settle",
                    "2",
                    "--json",
                )
            )
        finally:
            syncing.wait(COMMAND_TIMEOUT)
    passes = _documents(sync_log.read_text())
    failed_reads = sum(_failed(p) for p in passes)
    power_off = _json(bmaas(db, "power", "off", "--all", "--json"))
    return Run(power_on, power_off, deploy, failed_reads, len(passes))


def _documents(text: str) -> list[dict[str, Any]]:
    """The JSON documents ``sync --interval --json`` printed, one per pass."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return found
        doc, at = decoder.raw_decode(text, at)
        found.append(doc)


def _failed(report: dict[str, Any]) -> int:
    failed = report.get("failed", 0)
    return len(failed) if isinstance(failed, list) else int(failed)


def assert_shared_service_run(run: Run, nodes: int, clients: Callable[[], int]) -> None:
    """The issue's bar: every deploy active at the first try, no failed
    power action, no failed sync read, one client per service per process
    (``clients``: what the server counted -- service-root reads, or session
    logins where the service has a SessionService)."""
    assert run.power_on["ok"] == nodes, run.power_on
    assert run.power_on["failed"] == 0
    assert run.deploy["ok"] == nodes, run.deploy
    assert run.deploy["failed"] == 0
    assert sum(r["attempts"] for r in run.deploy["requests"]) == nodes, run.deploy
    # the only thing a request met was a candidate another request claimed first
    assert all(set(r["faults"]) <= {"node_unavailable"} for r in run.deploy["requests"])
    assert run.sync_passes >= 1
    assert run.sync_failed_reads == 0
    assert run.power_off["ok"] == nodes, run.power_off
    assert run.power_off["failed"] == 0
    # 4 bmaas processes spoke to the service (power on, deploy, sync, power
    # off): each read the service root once -- one client, one session each
    assert clients() == 4
