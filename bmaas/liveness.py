"""Liveness apart from events: a live stream proves the stream, not the API.

A BMC's event stream and its API are served by different code paths: a
wedged web API behind a stream that keeps its keepalives and events is a
field case (issue 48: 5 % of 200 Redfish BMCs hung that way were never read
and never fenced, the stream looking healthy for the safety read's 40
minutes). So a streamed node's API is read anyway every ``interval``
seconds -- one authenticated read, the ordinary periodic power read through
the pooled session, so its answer is written and a hung API faults, counts
and is fenced exactly as a polled node's (the policy table's health column,
the sync's ``fault_after``, Ironic's ``power_state_sync_max_retries``).

**Spread, not all at once.** Each node has its own phase in the interval
(a hash of its name), and its liveness read is due at the first pass after
its next ``phase + k * interval`` since its last read: a fleet whose
streams opened together is read a slice a pass, never in one burst, and a
pass meets at most that slice of its hung BMCs.

**Cost and bound.** A healthy streamed node costs exactly ``3600 /
interval`` reads an hour (:meth:`Liveness.per_hour`), whatever the pass
interval; a hung API is first read within ``interval`` plus one pass, then
fails every pass as without events (the figures against polling:
docs/operator.md). ``interval`` 0 turns the liveness read off.

::

    phase(n) = interval * crc32(n) / 2**32            due at the first pass
    |--------|--------------|--------------|---       after each ``o``:
    0      phase(n)   +interval      +2*interval
             o              o              o
"""

from __future__ import annotations

import dataclasses
import math
import zlib

__all__ = ["LIVENESS_INTERVAL", "Liveness"]

#: seconds between a streamed node's liveness reads (12 requests per node-hour)
LIVENESS_INTERVAL = 300.0


@dataclasses.dataclass(frozen=True)
class Liveness:
    """When a streamed node's API is read whatever its stream says (the
    module doc). ``interval``: seconds, 0 for never."""

    interval: float = LIVENESS_INTERVAL

    def __post_init__(self) -> None:
        if not (math.isfinite(self.interval) and self.interval >= 0):
            raise ValueError("the liveness interval must be a finite number of seconds >= 0")

    def phase(self, node: str) -> float:
        """``node``'s own offset in the interval (stable across processes)."""
        return self.interval * zlib.crc32(node.encode()) / 2**32

    def due(self, node: str, last_read: float | None, now: float) -> bool:
        """Whether ``node``, last read at ``last_read`` (None: never), is
        due its liveness read at ``now``: its next slot began since."""
        return last_read is None or now >= self.next(node, last_read)

    def next(self, node: str, last_read: float) -> float:
        """When ``node``, last read at ``last_read``, is next due (inf: never)."""
        if not self.interval:
            return math.inf
        phase = self.phase(node)
        return phase + (math.floor((last_read - phase) / self.interval) + 1) * self.interval

    def per_hour(self) -> float:
        """Liveness reads a healthy streamed node costs an hour."""
        return 3600.0 / self.interval if self.interval else 0.0
