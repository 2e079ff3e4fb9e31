"""A command whose ``--deadline`` passed leaves: it waits on no BMC past it
(issue 36, "worst end-to-end overrun <= 1 s").

Two Redfish BMCs (one service each) answer the login, never answer a power
read, and never answer the logout either: a BMC that stopped answering
mid-command. ``bmaas power status --all --deadline 2 --bmc-timeout 20`` cuts
the reads at the deadline and drops the sessions; their logouts hang on
threads of their own. Before, the command then waited for those logouts
(``DriverPool.close``), and the interpreter joined their threads at exit: the
whole ``--bmc-timeout`` past the deadline. Now nothing is waited for past it.

Measured as a person sees it -- from just before ``exec`` to the exit, on the
monotonic clock the whole machine shares -- and against a no-op run of the
same console script (``--version``) under the same conditions, so a loaded
machine's slow start does not fail it: the end comes within 1 s plus four
no-op runs of the deadline (the slowest of three: the load changes while
the test runs), and at most half the ``--bmc-timeout`` a waited logout
would add. On a machine so loaded that start-up leaves no room to ask a BMC,
the command ends on either documented line for that, nothing asked.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bmaas.fakes.faults import FaultRule
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.hwlab.pyexec import python_argv
from bmaas.hwlab.redfish import RedfishServer

pytestmark = pytest.mark.lab

DEADLINE = 2.0
#: what a waited-for logout to a silent BMC would add past the deadline:
#: far above what a loaded machine's own start and exit add (4.1 s past
#: the deadline at load 27 on 2 cores, issue 50), so the cap of the bound
#: below (half of it) tells the two apart at any load
BMC_TIMEOUT = 20.0
#: the console script's own code (``python -c`` so the test needs no PATH)
ENTRY = "import sys; sys.argv[0] = 'bmaas'; from bmaas.cli import main; main()"


def bmaas(db: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Seconds from just before ``exec`` to the exit, and the run."""
    begun = time.monotonic()
    done = subprocess.run(
        [*python_argv("-c", ENTRY), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "BMAAS_DB": str(db)},
    )
    return time.monotonic() - begun, done


def ended_by_start_up(stderr: str) -> bool:
    """Whether the command ended on one of the two documented lines of a
    start-up that left no room to ask a BMC (docs/operator.md): its start-up
    spent the whole ``--deadline`` ("... was spent by start-up ..."), or more
    than half of it, so the database would not load in time ("... would
    pass while the database loads ..."). On a loaded machine either may come
    (issue 50: start-up took more than half of 2 s at load 18-25); both end
    "nothing was asked", exit 1, and print no report."""
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    return len(lines) == 1 and lines[0].endswith("; nothing was asked")


@pytest.fixture
def silent_fleet(tmp_path: Path) -> Iterator[Path]:
    """Two Redfish systems, one service each, enrolled: the login answers,
    power reads and the logout never do. The database's path."""
    machines = [FakeMachine(f"blade-{i}", Hardware()) for i in range(2)]
    with RedfishServer() as server:
        ports = [server.add_service([m], username="admin", password="password") for m in machines]
        nodes = [
            {
                "name": f"sys-{i}",
                "driver": "redfish",
                "driver_info": {
                    "redfish_address": server.url(port),
                    "redfish_system_id": f"/redfish/v1/Systems/{m.name}",
                    "redfish_username": "admin",
                    "redfish_password": "password",
                },
            }
            for i, (m, port) in enumerate(zip(machines, ports, strict=True))
        ]
        inventory = tmp_path / "inventory.yaml"
        inventory.write_text(yaml.safe_dump({"nodes": nodes}))
        db = tmp_path / "bmaas.db"
        _, enrolled = bmaas(db, "enroll", str(inventory))
        assert enrolled.returncode == 0, enrolled.stderr
        hang_reads = {"effect": "hang", "operation": "power.get"}
        # the session's POST is its first login operation, its DELETE the second
        hang_logout = {"effect": "hang", "operation": "login", "nth": 2}
        for machine in machines:
            machine.plan.add(FaultRule.from_dict(hang_reads))
            machine.plan.add(FaultRule.from_dict(hang_logout))
        yield db


def test_a_command_past_its_deadline_waits_for_no_logout(silent_fleet: Path) -> None:
    noops = [bmaas(silent_fleet, "--version")[0] for _ in range(3)]
    took, done = bmaas(
        silent_fleet, "power", "status", "--all", "--json",
        "--deadline", str(DEADLINE), "--bmc-timeout", str(BMC_TIMEOUT),
    )  # fmt: skip
    noop = max(noops)  # the load varies within the test: its worst start, not a typical one
    print(f"exec to exit {took:.3f} s with --deadline {DEADLINE}; no-op {noop:.3f} s")
    assert done.returncode == 1, done.stderr
    if not ended_by_start_up(done.stderr):
        report = json.loads(done.stdout)
        assert report["ok"] == 0
        assert {r["fault"]["class"] for r in report["results"]} <= {"BMCTimeout", "SlotTimeout"}
    bound = min(1.0 + 4 * noop, BMC_TIMEOUT / 2)
    assert took - DEADLINE < bound, f"{took - DEADLINE:.2f} s past the deadline (bound {bound:.2f})"
