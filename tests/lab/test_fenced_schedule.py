"""A fenced hung BMC is read on its back-off schedule, as the BMC sees it.

Two BMCs of a mixed lab hang on every power read (one IPMI, one Redfish).
The sync fences each after two faulted reads (``power failure``); from then
on :mod:`bmaas.fenced` reads it in the background on its back-off. The
production schedule (+30, +90, +210, ... s) is injected shorter (+0.5,
+1.5, +3.5 s: the same doubling), so a few seconds show three recovery
reads. The lab's event log, which records each hang it carries out, is the
BMC's side: after the two reads that fenced it, the hung BMC was asked
exactly as often as the back-off started reads, and those started no
sooner than the schedule allows, while the healthy nodes were read every
pass. No timing is asserted: gaps are lower bounds (a slow machine only
widens them).
"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import pytest

from bmaas import inventory as inventory_mod
from bmaas.driver import PowerState
from bmaas.fenced import FencedBackoff, FencedReads
from bmaas.health import HealthRule
from bmaas.hwlab.events import read_events
from bmaas.hwlab.harness.bench.common import running_lab
from bmaas.hwlab.labspec import generate
from bmaas.ops import NodeResult, driver_factory
from bmaas.retry import RetryLimits
from bmaas.runtime import Runtime
from bmaas.store import POWER_FAILURE, Store
from bmaas.sync import SyncParts, SyncReport, SyncSettings, sync_loop

pytestmark = pytest.mark.lab

HUNG = ("node-001", "node-002")  # IPMI, Redfish
HEALTHY = ("node-003", "node-004")
#: the sync runs until each hung BMC had RECOVERY back-off reads started
#: (on an idle machine about 60 passes; a starved one fences later), at most
#: MAX_PASSES
RECOVERY = 3
MAX_PASSES = 400
INTERVAL = 0.1
RULE = HealthRule(fault_after=2)
#: production: first 30 s, doubling, capped at 600 s; here the same doubling
BACKOFF = FencedBackoff(first=0.5, factor=2.0, cap=8.0, timeout=0.4)


@pytest.mark.timeout(180)
def test_a_fenced_hung_bmc_is_read_on_its_backoff_schedule(tmp_path: Path) -> None:
    spec = generate(len(HUNG) + len(HEALTHY), protocols="mixed", seed=3)
    with running_lab(spec, tmp_path / "lab") as lab:
        store = Store.open(str(tmp_path / "bmaas.db"), create=True)
        fenced: FencedReads[NodeResult[PowerState]] = FencedReads(
            BACKOFF, fault=RULE.fault, clock=time.monotonic
        )
        try:
            inventory_mod.enroll(store, inventory_mod.load(lab.inventory_path))
            for node in HUNG:
                lab.add_faults(node, [{"name": "test-hang", "effect": "hang"}])
            reports: list[SyncReport] = []
            stop = threading.Event()

            def on_pass(report: SyncReport) -> None:
                reports.append(report)
                begun = [node for node, _ in list(fenced.started)]
                if all(begun.count(node) >= RECOVERY for node in HUNG):
                    stop.set()

            with Runtime(probe=False) as rt:
                sync_loop(
                    store,
                    SyncSettings(interval=INTERVAL, count=MAX_PASSES, workers=4, health_rule=RULE),
                    SyncParts(driver_factory(bmc_timeout=0.3), rt=rt, fenced=fenced),
                    stop=stop,
                    on_pass=on_pass,
                )
                assert fenced.wait(5.0)  # the last background reads end by their deadline
            faults = {name: store.nodes.get(name).fault for name in (*HUNG, *HEALTHY)}
        finally:
            fenced.close()
            store.close()
        events = list(read_events(str(lab.events_path)))
    assert faults == {"node-001": POWER_FAILURE, "node-002": POWER_FAILURE} | dict.fromkeys(HEALTHY)
    # the healthy nodes: read every pass, never fenced (above); a read may
    # miss its 0.3 s on a loaded runner, which one pass of two does not fence
    for name in HEALTHY:
        read = [r for report in reports for r in report.results if r.node == name and r.started]
        assert len(read) == len(reports), name
    for name in HUNG:
        started = [at for node, at in fenced.started if node == name]
        assert len(started) >= RECOVERY, (name, started)  # recovery reads do happen
        gaps = [b - a for a, b in itertools.pairwise(started)]
        for n, gap in enumerate(gaps, start=1):
            assert gap >= BACKOFF.delay(n), (name, n, gaps)
        # The BMC's side: every hang it carried out is a read it was asked
        # for: the two that fenced it, then one per back-off read -- each
        # asked again at most as a timeout is when the timeout was the
        # client's own lateness on a loaded runner (bmaas.lateness: not
        # counted, so retried as a timeout)
        asked = [e["wall"] for e in events if e["node"] == name and e["effect"] == "hang"]
        reads = RULE.fault_after + len(started)
        most = reads * RetryLimits().timeout_attempts
        assert reads <= len(asked) <= most, (name, len(asked), len(started))
