"""What one sync pass did: the reads, the health changes, what was reclaimed.

Its own module so that :mod:`bmaas.metrics` can read a pass without
importing the sync that produces it (and the sync, the metrics).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from bmaas.driver import PowerState
from bmaas.faults import BMCAuthError
from bmaas.health import Change
from bmaas.ops import NodeResult
from bmaas.pool import PoolStats

if TYPE_CHECKING:  # plain records: importing the store's would load SQLAlchemy
    from bmaas.store import HealthChange, Reclaimed

__all__ = ["SyncReport"]


@dataclasses.dataclass(frozen=True)
class SyncReport:
    results: list[NodeResult[PowerState]]
    changes: list[HealthChange]
    reclaimed: list[Reclaimed]
    #: seconds the pass took (monotonic)
    duration: float
    #: wall-clock time the pass ended
    finished_at: float
    #: the driver pool's counters so far (None without a pool)
    sessions: PoolStats | None = None
    #: fenced nodes not read in this pass: not due on their back-off, or
    #: their background read is still running (see :mod:`bmaas.fenced`)
    backed_off: list[str] = dataclasses.field(default_factory=list)

    @property
    def failed(self) -> list[NodeResult[PowerState]]:
        return [r for r in self.results if not r.ok]

    @property
    def auth_failed(self) -> list[str]:
        """Nodes whose BMC rejected the credentials: fix the password, not the node."""
        return [r.node for r in self.results if isinstance(r.error, BMCAuthError)]

    def nodes_with(self, change: Change) -> list[str]:
        return [c.node for c in self.changes if c.change is change]

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": len(self.results),
            "failed": len(self.failed),
            "auth_failed": self.auth_failed,
            "duration": round(self.duration, 3),
            # wall clock (Unix seconds): when each pass ran, for scripts that
            # line passes up with other events (a worker's death, a lease)
            "started_at": round(self.finished_at - self.duration, 3),
            "finished_at": round(self.finished_at, 3),
            "faulted": self.nodes_with(Change.FAULTED),
            "recovered": self.nodes_with(Change.RECOVERED),
            "reclaimed": [r.owner.describe() for r in self.reclaimed],
            "sessions": None if self.sessions is None else self.sessions.to_dict(),
            "backed_off": self.backed_off,
            "results": [r.to_dict() for r in self.results],
        }
