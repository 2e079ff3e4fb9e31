"""Power-state sync: read every node's power state, count faults, act on streaks.

One pass (:func:`sync_pass`):

1. reclaim what dead processes held (expired leases) - the sync is the one
   long-running bmaas process, so it is the natural janitor;
2. read every node's power state in parallel (``bmaas.ops``);
3. record the reads in the store with hysteresis (:mod:`bmaas.health`): a
   node whose reads fault ``fault_after`` times in a row goes into
   maintenance with ``fault="power failure"`` (by "system"); it comes out
   after ``recover_after`` good reads in a row; a person's maintenance stays.

Only BMC faults count toward a power failure. A node that cannot even be
asked (a password variable unset, a driver not installed) is a configuration
problem: its ``last_error`` says so and its streaks are left alone.

:func:`sync_loop` repeats passes every ``interval`` seconds (measured start to
start, never sleeping a negative time) until stopped.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from bmaas.driver import BMCDriver, PowerState
from bmaas.faults import BmaasError, BMCFault
from bmaas.health import Change, Hysteresis
from bmaas.metrics import SyncMetrics
from bmaas.ops import DEFAULT_WORKERS, DriverFactory, NodeResult, run_on_nodes
from bmaas.provision.reclaim import reclaim
from bmaas.store import HealthChange, Reclaimed, Store

__all__ = ["SyncReport", "sync_loop", "sync_pass"]

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class SyncReport:
    results: list[NodeResult[PowerState]]
    changes: list[HealthChange]
    reclaimed: list[Reclaimed]
    #: seconds the pass took (monotonic)
    duration: float
    #: wall-clock time the pass ended
    finished_at: float

    @property
    def failed(self) -> list[NodeResult[PowerState]]:
        return [r for r in self.results if not r.ok]

    def nodes_with(self, change: Change) -> list[str]:
        return [c.node for c in self.changes if c.change is change]

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": len(self.results),
            "failed": len(self.failed),
            "duration": round(self.duration, 3),
            "faulted": self.nodes_with(Change.FAULTED),
            "recovered": self.nodes_with(Change.RECOVERED),
            "reclaimed": [r.owner.describe() for r in self.reclaimed],
            "results": [r.to_dict() for r in self.results],
        }


def _read_power(driver: BMCDriver) -> PowerState:
    return driver.get_power_state()


def sync_pass(
    store: Store,
    *,
    factory: DriverFactory,
    policy: Hysteresis = Hysteresis(),  # noqa: B008 - frozen dataclass
    workers: int = DEFAULT_WORKERS,
    metrics: SyncMetrics | None = None,
    names: Sequence[str] | None = None,
    on_result: Callable[[NodeResult[PowerState]], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> SyncReport:
    """One pass over every node (or ``names``). See the module docstring."""
    start = clock()
    # Nodes taken back from dead clients are powered off before they are used.
    reclaimed, _cleaned = reclaim(store, driver_factory=factory)
    records = store.require_nodes(names) if names is not None else store.nodes()
    results = run_on_nodes(
        records, _read_power, factory=factory, workers=workers, on_result=on_result, clock=clock
    )
    reads: list[tuple[str, PowerState | BmaasError]] = []
    config_errors: dict[str, str] = {}
    for result in results:
        if result.error is None:
            assert result.value is not None
            reads.append((result.node, result.value))
        elif isinstance(result.error, BMCFault):
            reads.append((result.node, result.error))
        else:
            config_errors[result.node] = str(result.error)
    changes = store.record_power_reads(reads, policy=policy)
    if config_errors:
        store.note_power(errors=config_errors)
    for change in changes:
        if change.change is Change.FAULTED:
            LOG.warning("%s: put into maintenance (%s)", change.node, policy.fault)
        elif change.change is Change.RECOVERED:
            LOG.warning("%s: %s cleared", change.node, policy.fault)
    report = SyncReport(results, changes, reclaimed, clock() - start, store.clock())
    if metrics is not None:
        metrics.observe_pass(report, store.node_counts())
    return report


def sync_loop(
    store: Store,
    *,
    interval: float,
    count: int | None = None,
    stop: threading.Event | None = None,
    on_pass: Callable[[SyncReport], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    wait: Callable[[float], object] | None = None,
    **kw: Any,
) -> int:
    """Run passes every ``interval`` seconds until ``stop`` is set (or ``count``
    passes ran). Returns the number of passes run.

    Between passes it waits on ``stop`` (so a signal ends the wait at once);
    tests pass ``wait=fake_clock.sleep`` and a fake ``clock``.
    """
    if interval <= 0:
        raise ValueError("interval must be positive")
    stop = stop or threading.Event()
    wait = wait or stop.wait
    passes = 0
    while not stop.is_set():
        started = clock()
        report = sync_pass(store, clock=clock, **kw)
        passes += 1
        if on_pass is not None:
            on_pass(report)
        if count is not None and passes >= count:
            break
        wait(max(0.0, interval - (clock() - started)))
    return passes
