"""IPMI sessions outlive a sync interval far longer than the driver trusts an
idle session: keepalives (Get Device ID) from the runtime's keeper between
passes, as ``bmaas sync --interval`` runs it, so the lab's IPMI
BMCs see one login each over several passes.

The interval is scaled down rather than waited for: the driver's idle
threshold (20 s in production, against a 60-120 s sync interval) is set to
2.5 s here and the keepalive to 0.5 s, against a 3.5 s interval: the
interval is well past the idle limit, as in production, and a keepalive
may come 2 s late (a loaded runner) before the session is no longer
trusted. (With 0.25 s against 0.6 s, one keepalive 0.35 s late under four
CPU burners dropped a session and logged in again.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bmaas import inventory as inventory_mod
from bmaas.drivers.ipmi.driver import IPMIDriver
from bmaas.hwlab.harness.bench.common import running_lab
from bmaas.hwlab.labspec import generate
from bmaas.ops import driver_factory
from bmaas.runtime import Runtime
from bmaas.store import Store
from bmaas.sync import SyncParts, SyncReport, SyncSettings, sync_loop

pytestmark = pytest.mark.lab

NODES = 3
PASSES = 5


@pytest.mark.timeout(120)
@pytest.mark.parametrize("keepalive", [0.5, None])
def test_a_long_interval_logs_in_once_per_ipmi_bmc_with_keepalives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keepalive: float | None
) -> None:
    monkeypatch.setattr(IPMIDriver, "session_idle", 2.5)
    monkeypatch.setattr(IPMIDriver, "session_keepalive", keepalive)
    spec = generate(NODES, protocols="ipmi", seed=3)
    with running_lab(spec, tmp_path / "lab") as lab:
        store = Store.open(str(tmp_path / "bmaas.db"), create=True)
        try:
            inventory_mod.enroll(store, inventory_mod.load(lab.inventory_path))
            reports: list[SyncReport] = []
            rt = Runtime(keep=True, probe=False)
            rt.keeper.tick = 0.25  # the keeper's longest sleep, scaled as the interval is
            with rt:
                sync_loop(
                    store,
                    SyncSettings(interval=3.5, count=PASSES, workers=NODES),
                    SyncParts(driver_factory(bmc_timeout=1.0), rt=rt),
                    on_pass=reports.append,
                )
            status: dict[str, Any] = lab.status()
        finally:
            store.close()
    assert all(not r.failed for r in reports), [r.failed for r in reports]
    final = reports[-1].sessions
    assert final is not None
    assert final.reads == NODES * PASSES
    logins = {name: node["sessions"]["ipmi"]["logins"] for name, node in status["nodes"].items()}
    if keepalive is None:  # the control: the same loop without keepalives logs in every pass
        assert final.logins == NODES * PASSES
        assert all(n == PASSES for n in logins.values()), logins
        return
    assert final.logins == NODES, final
    assert all(n == 1 for n in logins.values()), logins
    assert final.keepalives >= NODES * (PASSES - 1)  # at least one per gap per BMC
