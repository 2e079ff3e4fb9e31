"""`hwlab bench ironic`'s report: what its headline counts (no Ironic needed;
the scenario itself runs against a real one, see docs/bench/ironic.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bmaas.hwlab.harness.bench import ironic


def _trial(driver: str, fault: str, seconds: float, text: str | None, gave_up: bool = True):
    return {
        "driver": driver,
        "fault": fault,
        "node": "x",
        "lab_name": "node-001",
        "seconds": seconds,
        "gave_up": gave_up,
        "last_error": text,
        "code": "bmc_busy" if text and text.startswith("[bmaas") else None,
        "maintenance": driver == "ipmi",
    }


def test_headline_counts_readable_codes_budget_and_fences() -> None:
    o = ironic.Options(operation_deadline=10.0)
    faults = [
        _trial("ipmi", "busy", 56.8, "IPMI call failed: power status."),
        _trial("redfish", "hang", 150.0, None, gave_up=False),
        _trial("bmaas-ipmi", "busy", 9.9, "[bmaas bmc_busy retry=same_node] n: ..."),
        _trial("bmaas-redfish", "busy", 40.0, "[bmaas bmc_busy retry=same_node] n: ..."),
    ]
    sync = [
        {
            "driver": d,
            "nodes": 2,
            "passes": 3,
            "fenced": f,
            "cpu_per_node_pass_ms": 1.0,
            "busy_answers": 4,
        }
        for d, f in (("ipmi", 2), ("bmaas-ipmi", 0), ("redfish", 1), ("bmaas-redfish", 0))
    ]
    report = ironic._report(o, faults, sync)
    assert report.headline["bmaas_codes_readable"] == 1.0
    assert report.headline["stock_codes_readable"] == 0.0
    assert report.headline["bmaas_within_budget"] == 0.5  # 40 s is past 10 s + 10 % + slack
    assert report.headline["bmaas_busy_fences"] == 0.0
    assert report.headline["stock_busy_fences"] == 3.0
    rows = report.tables[0].rows
    assert rows[1][2] == "pending"
    assert rows[1][3].startswith("≥")  # still pending at the cap
    assert [r[2] for r in rows] == ["error", "pending", "error", "error"]
    assert [r[5] for r in rows] == ["yes", "no", "no", "no"]


def test_the_command_line_names_every_incident_of_the_ironic_bench() -> None:
    from bmaas.hwlab.harness.bench.cli import INCIDENT_NAMES
    from bmaas.hwlab.harness.bench.ironic import INCIDENT_FAULTS, _applies

    assert set(INCIDENT_NAMES) == set(INCIDENT_FAULTS)
    assert _applies("idrac10-power-on-conflict", "bmaas-redfish")
    assert not _applies("idrac10-power-on-conflict", "ipmi")
    assert _applies("firmware-update", "ipmi")


def test_conductor_cpu_counts_the_children_it_waited_for(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Stock ``ipmi`` runs ipmitool once a read: the published CPU column
    left that out (psutil's user+system are the process's own). A child that
    burns CPU and is waited for now shows in ``cpu_seconds``."""
    import os
    import subprocess
    import sys

    from bmaas.hwlab.harness import ironic as harness

    service = harness.IronicService(tmp_path, venv=tmp_path)
    monkeypatch.setattr(service, "pids", lambda: [os.getpid()])
    before = service.cpu_seconds()
    own = os.times()
    subprocess.run([sys.executable, "-c", "sum(range(3 * 10**7))"], check=True, timeout=120)
    child = os.times().children_user - own.children_user
    assert child > 0.05  # the child did burn CPU
    assert service.cpu_seconds() - before >= child * 0.9
