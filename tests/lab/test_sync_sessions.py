"""A sync loop of 50 passes over a lab keeps its sessions: the lab counts
logins at each BMC, and there are no more than one per BMC plus one per
injected session expiry (``auth_fail scope=session``) or BMC reboot; no BMC
ever holds two sessions from us; none is left open after the loop ends."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bmaas import inventory as inventory_mod
from bmaas.health import HealthRule
from bmaas.hwlab.harness.bench.common import running_lab
from bmaas.hwlab.labspec import generate
from bmaas.ops import driver_factory
from bmaas.runtime import Runtime
from bmaas.store import Store
from bmaas.sync import SyncParts, SyncReport, SyncSettings, sync_loop

pytestmark = pytest.mark.lab

NODES = 8
PASSES = 50
#: node -> the rules injected there (node-001, -003, ... speak IPMI; the others Redfish)
INJECTED: dict[str, list[dict[str, Any]]] = {
    "node-001": [
        {"effect": "auth_fail", "scope": "session", "operation": "power.get", "nth": [10, 30]}
    ],
    "node-002": [
        {"effect": "auth_fail", "scope": "session", "operation": "power.get", "nth": [10, 30]}
    ],
    "node-003": [{"effect": "bmc_reboot", "duration": 0.5, "operation": "power.get", "nth": [20]}],
    "node-004": [{"effect": "bmc_reboot", "duration": 0.5, "operation": "power.get", "nth": [20]}],
}


def sessions(status: dict[str, Any]) -> dict[str, dict[str, int]]:
    """node -> its BMC's session counters (each lab node speaks one protocol)."""
    out = {}
    for name, node in status["nodes"].items():
        ((_protocol, counters),) = node["sessions"].items()
        out[name] = counters
    return out


@pytest.mark.timeout(240)
def test_fifty_passes_log_in_once_per_bmc_plus_what_faults_forced(tmp_path: Path) -> None:
    spec = generate(NODES, protocols="mixed", seed=5)
    with running_lab(spec, tmp_path / "lab") as lab:
        store = Store.open(str(tmp_path / "bmaas.db"), create=True)
        try:
            inventory_mod.enroll(store, inventory_mod.load(lab.inventory_path))
            for node, rules in INJECTED.items():
                lab.add_faults(node, rules)
            open_during: list[dict[str, int]] = []
            reports: list[SyncReport] = []

            def on_pass(report: SyncReport) -> None:
                reports.append(report)
                open_during.append({n: s["open"] for n, s in sessions(lab.status()).items()})

            with Runtime(probe=False) as rt:
                passes = sync_loop(
                    store,
                    # A 0.5 s reboot spans two or three passes 0.05 s apart, and
                    # three refused reads in a row fence the Redfish node (the
                    # rule doing its job, CI's run 54); a fenced node is read in
                    # the background on its back-off, not by the passes whose
                    # sessions this test counts.
                    SyncSettings(
                        interval=0.05,
                        count=PASSES,
                        workers=8,
                        health_rule=HealthRule(fault_after=PASSES + 1),
                    ),
                    SyncParts(driver_factory(bmc_timeout=1.0), rt=rt),
                    on_pass=on_pass,
                )
            assert passes == PASSES

            # IPMI's Close Session is sent, not waited for: give the lab a moment.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                after = sessions(lab.status())
                if all(s["open"] == 0 for s in after.values()):
                    break
                time.sleep(0.1)
            status = lab.status()
        finally:
            store.close()

    after = sessions(status)
    print(after, reports[-1].sessions)
    fired = sum(sum(node["fired"].values()) for node in status["nodes"].values())
    assert fired == 2 + 2 + 1 + 1  # every injected fault happened, once per nth
    # A read that failed (a BMC reboot, or on a loaded machine a read past its
    # 1 s) drops its session: the next pass may log in again, once per failure.
    failures = Counter(r.node for report in reports for r in report.failed)
    forced = fired + sum(failures.values())
    assert sum(failures.values()) <= PASSES  # a leak would be one per pass or worse
    logins = sum(s["logins"] for s in after.values())
    assert NODES <= logins <= NODES + forced, (after, failures)
    for name, counters in after.items():
        assert counters["peak"] <= 1, f"{name} held {counters['peak']} sessions at once"
        assert counters["open"] == 0, f"{name} still has a session open after the loop"
        if name not in INJECTED:
            assert counters["logins"] <= 1 + failures[name], f"{name}: {counters}"
    assert all(count <= 1 for sample in open_during for count in sample.values())
    # the loop saw it the same way: one login per BMC, the rest forced by faults
    final = reports[-1].sessions
    assert final is not None
    assert final.reads == NODES * PASSES
    assert NODES <= final.logins <= NODES + forced
    assert final.reads_per_login is not None
    assert final.reads_per_login >= PASSES * NODES / (NODES + forced)
