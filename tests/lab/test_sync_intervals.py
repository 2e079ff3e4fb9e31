"""A power sync at a long interval logs in once per BMC, both protocols.

``bmaas sync --interval 30`` (and Ironic's default 120 s) on a healthy mixed
lab, 5 passes: each IPMI and Redfish BMC sees one login. Time is scaled
down by ``SCALE`` rather than waited for, every limit with it, so the
proportions are the production ones: the IPMI driver's 20 s idle trust and
10 s keepalive, the Redfish driver's 300 s idle trust, the pool's 60 s
default idle (made explicit: ``DriverPool()``'s default is bound at import).
At 120 s the interval is past the pool's default idle: the loop raises it
(:func:`bmaas.pool.idle_for_interval`), or every Redfish session would be
logged out between passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bmaas import inventory as inventory_mod
from bmaas.drivers.ipmi.driver import IPMIDriver
from bmaas.drivers.redfish.driver import RedfishDriver
from bmaas.hwlab.harness.bench.common import running_lab
from bmaas.hwlab.labspec import generate
from bmaas.ops import driver_factory
from bmaas.runtime import Runtime
from bmaas.store import Store
from bmaas.sync import SyncParts, SyncReport, SyncSettings, sync_loop

pytestmark = pytest.mark.lab

NODES = 4  # node-001, -003 speak IPMI; -002, -004 Redfish
PASSES = 5
#: lab seconds per production second. The scale shrinks every margin with
#: the times, and the one that matters is the IPMI keepalive's: sent after
#: 10 s of idleness, 10 s before the 20 s its session is trusted for. The
#: loop that sends it wakes late on a loaded machine, and that lateness
#: does not scale: at 0.03 (a 0.3 s margin) keepalives ran late at load
#: 20 on 2 cores and sessions idled out (issue 50: 6 logins, 4 expected;
#: the sleeper lateness measured there: p99 0.26 s, worst 3 s within a
#: sync with 12 busy threads). At 0.1 the margin is 1 s, and production's
#: proportions stand (they need no change: 10 s of margin is far beyond
#: any lateness a sync loop sees).
SCALE = 0.1


@pytest.mark.timeout(240)  # [120.0]: 5 passes 12 s apart
@pytest.mark.parametrize("interval", [30.0, 120.0])
def test_a_long_interval_sync_logs_in_once_per_bmc_over_five_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interval: float
) -> None:
    monkeypatch.setattr(IPMIDriver, "session_idle", 20.0 * SCALE)
    monkeypatch.setattr(IPMIDriver, "session_keepalive", 10.0 * SCALE)
    monkeypatch.setattr(RedfishDriver, "session_idle", 300.0 * SCALE)
    monkeypatch.setattr("bmaas.pool.DEFAULT_IDLE", 60.0 * SCALE)
    spec = generate(NODES, protocols="mixed", seed=3)
    with running_lab(spec, tmp_path / "lab") as lab:
        store = Store.open(str(tmp_path / "bmaas.db"), create=True)
        try:
            inventory_mod.enroll(store, inventory_mod.load(lab.inventory_path))
            reports: list[SyncReport] = []
            rt = Runtime(idle=60.0 * SCALE, keep=True, probe=False)  # as `bmaas sync` builds it
            rt.keeper.tick = 5.0 * SCALE  # the keeper's longest sleep, scaled
            with rt:
                sync_loop(
                    store,
                    SyncSettings(interval=interval * SCALE, count=PASSES, workers=NODES),
                    # healthy BMCs: a long bound costs nothing, and at load 28
                    # a starved client missed 1 s at the first pass's logins
                    SyncParts(driver_factory(bmc_timeout=5.0), rt=rt),
                    on_pass=reports.append,
                )
            status: dict[str, Any] = lab.status()
        finally:
            store.close()
    assert all(not r.failed for r in reports), [r.failed for r in reports]
    final = reports[-1].sessions
    assert final is not None
    assert final.reads == NODES * PASSES
    assert final.logins == NODES, final
    assert final.reads_per_login == PASSES
    assert final.idled == 0
    logins = {
        name: (protocol, counters["logins"])
        for name, node in status["nodes"].items()
        for protocol, counters in node["sessions"].items()
    }
    assert logins == {
        "node-001": ("ipmi", 1),
        "node-002": ("redfish", 1),
        "node-003": ("ipmi", 1),
        "node-004": ("redfish", 1),
    }
