"""The hung-BMC pass ratio of a power sync: a share of the fleet hangs.

Issue 26's goal: "a pass of 1000 nodes with 5 % hung BMCs takes <= 1.2 x
the healthy pass". A pass that reads a hung BMC waits for that read's
deadline, so the goal is about the sync's steady state: the sync fences
such a node (``power failure`` after ``fault_after`` faulted reads in a
row) and from then on reads it only on its back-off, in the background,
never waited for (:mod:`bmaas.fenced`). Measured here on the lab of
:mod:`~bmaas.hwlab.harness.bench.fleet_sweep` with :func:`bmaas.sync.sync_loop`
as ``bmaas sync --interval`` runs it (pooled sessions, production
back-off: the first recovery read 30 s after the fence):

* healthy passes: one that logs in, then ``STEADY`` timed (their median
  is the healthy pass);
* ``hang`` on ``fraction`` of the nodes, spread over both protocols;
* ``fault_after`` passes that fence them (hung reads cut at the silence
  bound, but the one after a cut: :mod:`bmaas.silence`; up to
  ``LATE_PASSES`` more until every hung node is fenced), then ``STEADY``
  passes timed: each over the healthy median is a ratio.

The hung nodes are left fenced in the bench's store; their faults are
cleared in the lab.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from bmaas.driver import PowerState
from bmaas.fenced import FencedReads
from bmaas.health import HealthRule
from bmaas.ops import NodeResult, driver_factory
from bmaas.runtime import Runtime
from bmaas.store import Store
from bmaas.store.records import NodeRecord
from bmaas.sync import SyncParts, SyncReport, SyncSettings, sync_loop

__all__ = ["BMC_TIMEOUT", "STEADY", "hung_nodes", "measure"]

#: seconds a read of a hung BMC waits before the pass gives up on it (the
#: passes before the fence cost this; ``bmaas sync`` defaults to 10 s)
BMC_TIMEOUT = 2.0
#: fenced passes timed after the fence
STEADY = 3
#: a pass start to the next (a short interval: only the passes' own length counts)
INTERVAL = 0.05
#: passes past ``fault_after`` the fencing may take: one whose hung read a
#: starved client cut late counts against no BMC (at load 36 the smoke's
#: IPMI node was still unfenced after ``fault_after`` passes)
LATE_PASSES = 5


def _fenced(store: Store, names: set[str], fault: str) -> set[str]:
    """The nodes of ``names`` that carry ``fault`` in ``store``: fenced."""
    return {record.name for record in store.nodes.find(sorted(names)) if record.fault == fault}


class _Node(Protocol):
    @property
    def driver(self) -> str: ...


N = TypeVar("N", bound=_Node)


def hung_nodes(every: Sequence[N], fraction: float) -> list[N]:
    """``fraction`` of each protocol's nodes in ``every`` (at least one of
    each), evenly spaced through them, in ``every``'s order: a mixed
    fleet's hung BMCs are IPMI and Redfish alike."""
    if not 0 < fraction < 1:
        raise ValueError("the hung fraction must be between 0 and 1")
    chosen: set[int] = set()
    for driver in sorted({node.driver for node in every}):
        group = [i for i, node in enumerate(every) if node.driver == driver]
        count = max(1, round(len(group) * fraction))
        step = len(group) / count
        chosen.update(group[int(k * step)] for k in range(count))
    return [every[i] for i in sorted(chosen)]


def measure(
    lab: Any, store: Store, every: Sequence[NodeRecord], *, workers: int, fraction: float
) -> dict[str, Any]:
    """Sync passes over every node, healthy then with ``fraction`` hung."""
    rule = HealthRule()
    hung = hung_nodes(every, fraction)
    names = {node.name for node in hung}
    factory = driver_factory(bmc_timeout=BMC_TIMEOUT)
    fenced: FencedReads[NodeResult[PowerState]] = FencedReads(
        fault=rule.fault, clock=time.monotonic
    )

    def passes(count: int) -> list[SyncReport]:
        reports: list[SyncReport] = []
        sync_loop(
            store,
            SyncSettings(interval=INTERVAL, count=count, workers=workers, health_rule=rule),
            SyncParts(factory, rt=rt, fenced=fenced),
            on_pass=reports.append,
        )
        return reports

    # the sync's one runtime, as `bmaas sync --interval` builds it
    with Runtime(keep=True, probe=False) as rt:
        try:
            healthy = passes(1 + STEADY)[1:]  # the first logs in
            for node in hung:
                lab.add_faults(node.name, [{"name": "bench-hang", "effect": "hang"}])
            try:
                fencing = passes(rule.fault_after)
                # a hung read the client's own lateness cut is not counted
                # against the BMC (bmaas.lateness): on a loaded runner a
                # node may need a pass or two more before it is fenced
                for _ in range(LATE_PASSES):
                    if _fenced(store, names, rule.fault) == names:
                        break
                    fencing += passes(1)
                steady = passes(STEADY)
                fenced_nodes = _fenced(store, names, rule.fault)
            finally:
                for node in hung:
                    lab.clear_faults(node.name)
            stats = rt.pool.stats.to_dict()
        finally:
            fenced.close()
    base = statistics.median(r.duration for r in healthy)
    late = dict.fromkeys(sorted(names), 0)
    for report in fencing + steady:
        for result in report.failed:
            if result.node in late and getattr(result.error, "late", None) is not None:
                late[result.node] += 1
    ratios = [r.duration / base for r in steady] if base else []
    return {
        "nodes": len(every),
        "hung_nodes": len(hung),
        "hung_fraction": fraction,
        "bmc_timeout_s": BMC_TIMEOUT,
        "healthy_s": base,
        "healthy_pass_s": [r.duration for r in healthy],
        "fencing_pass_s": [r.duration for r in fencing],
        "fenced_pass_s": [r.duration for r in steady],
        # from the store: a fenced node whose recovery read (30 s after its
        # fence) came due in the last pass was read then, not backed off
        "fenced_nodes": len(fenced_nodes),
        "unfenced": sorted(names - fenced_nodes),
        "fault_after": rule.fault_after,
        # per hung node, its reads (one a pass, fencing and steady passes) the
        # client's own lateness cut (bmaas.lateness): counted against no BMC,
        # so a node with too many is left unfenced on a loaded runner, by design
        "late_reads": late,
        "backed_off_last_pass": len(steady[-1].backed_off) if steady else 0,
        "failed_healthy": [sum(1 for x in r.failed if x.node not in names) for r in steady],
        "ratio": ratios,
        "ratio_median": statistics.median(ratios) if ratios else None,
        "failed_healthy_before": [len(r.failed) for r in healthy],
        "sessions": stats,
    }
