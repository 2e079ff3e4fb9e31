"""What a sync is told, and what it works through: two values passed whole.

:class:`SyncSettings` holds the numbers and choices (``bmaas sync``'s
options, built once by :mod:`bmaas.cli.sync`); :class:`SyncParts` holds the
objects the caller made for the run (the driver factory, the host's runtime,
the worker processes, the fleet share, the event watch, the metrics, the
clock) and closes when it ends. :func:`bmaas.sync.sync_pass` and
:func:`bmaas.sync.sync_loop` take one of each; nothing below them splices
their fields back into keyword arguments.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from bmaas.driver import DEFAULT_BMC_TIMEOUT, PowerState
from bmaas.events import SAFETY_INTERVAL, EventWatch, PushSettings
from bmaas.fenced import FencedReads
from bmaas.health import HealthRule
from bmaas.liveness import LIVENESS_INTERVAL
from bmaas.ops import DEFAULT_WORKERS, DriverFactory, NodeResult
from bmaas.pool import DriverPool
from bmaas.retry import RetryLimits
from bmaas.runtime import Runtime
from bmaas.share import FleetShare
from bmaas.store.records import DEFAULT_LEASE_TTL
from bmaas.sweep import ShardedSweeper

if TYPE_CHECKING:  # prometheus_client: imported only by a loop that serves metrics
    from bmaas.metrics import SyncMetrics

__all__ = ["SyncParts", "SyncSettings"]


@dataclasses.dataclass(frozen=True)
class SyncSettings:
    """How a sync reads and judges the fleet (values only)."""

    #: a loop: seconds from one pass's start to the next's (None: one pass)
    interval: float | None = None
    #: a loop: stop after this many passes (None: until stopped)
    count: int | None = None
    #: seconds a pass may take (a loop makes each pass's Deadline as it
    #: starts; inf: no bound on a pass, only each call's ``bmc_timeout``)
    deadline: float = math.inf
    #: seconds one BMC call may take
    bmc_timeout: float = DEFAULT_BMC_TIMEOUT
    #: nodes read at once (in each worker process, with ``processes``)
    workers: int = DEFAULT_WORKERS
    #: faulted reads in a row that fence a node, good ones that clear it
    health_rule: HealthRule = dataclasses.field(default_factory=HealthRule)
    #: each read's retry (None: one attempt)
    retry: RetryLimits | None = None
    #: split the fleet with the other sync workers on the database
    split: bool = False
    #: with ``split``: seconds after which a dead worker's nodes are taken over
    lease_ttl: float = DEFAULT_LEASE_TTL
    #: worker processes the reads are sharded over (None: as the fleet suits)
    processes: int | None = None
    #: a loop: follow the events of BMCs that stream them (:mod:`bmaas.events`)
    events: bool = False
    #: with ``events``: a streamed node is still read once its last read is this old
    safety_interval: float = SAFETY_INTERVAL
    #: with ``events``: a streamed node's API is read this often anyway (0: never)
    liveness_interval: float = LIVENESS_INTERVAL
    #: with ``events``: where pushed events are taken (None: no push listener)
    push: PushSettings | None = None


@dataclasses.dataclass(frozen=True)
class SyncParts:
    """What a sync works through, made (and closed) by its caller.

    ``rt``: the host's runtime, one login per BMC for the run. ``sweeper``:
    reads sharded over worker processes (each with its own runtime; ``factory``
    and ``rt`` are then the sweeper's business). ``share``: only this
    worker's share of the fleet. ``fenced``: the nodes the sync fenced, read
    on their back-off schedule in the background (:mod:`bmaas.fenced`).
    ``events``: streamed nodes read only as a safety net (a loop's).
    ``metrics``: observes every pass. ``clock``: the passes' clock (tests: a
    fake one)."""

    factory: DriverFactory
    rt: Runtime | None = None
    sweeper: ShardedSweeper | None = None
    share: FleetShare | None = None
    fenced: FencedReads[NodeResult[PowerState]] | None = None
    events: EventWatch | None = None
    metrics: SyncMetrics | None = None
    clock: Callable[[], float] = time.monotonic

    @property
    def pool(self) -> DriverPool | None:
        """The runtime's pool (None: a driver built and closed per read)."""
        return None if self.rt is None else self.rt.pool
