"""Evacuate: take nodes out of service and move their instances elsewhere,
through the same reschedule loop as every request, then say whether each
node is ready for work on it.

"Ready for maintenance" is one rule (the backend's :meth:`readiness`): the
node is in maintenance and holds nothing (no allocation, no bound port).
A node can be ready while its instance could not be moved only if nothing
held it; otherwise it stays "not ready" and the report says what holds it.

::

    report = evacuate(provisioner, ["r1-n04"], reason="PSU swap", by="alice")
    for rec in report.readiness:
        print(rec.node, "ready" if rec.ready else rec.detail)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from bmaas.deadline import Deadline
from bmaas.faults import BmaasError, ProvisionFailed
from bmaas.provision.backend import Readiness
from bmaas.provision.cancel import CancelToken
from bmaas.provision.provisioner import Provisioner
from bmaas.provision.records import Moved

__all__ = ["Evacuation", "evacuate"]


@dataclasses.dataclass(frozen=True)
class Evacuation:
    """What an evacuation did, node by node."""

    #: instances moved off the nodes, in node order
    moved: tuple[tuple[str, Moved], ...]
    #: (node, why its instance could not be moved): ProvisionFailed with the
    #: move's whole history, or the error that stopped it (bad input, lease lost)
    failed: tuple[tuple[str, BmaasError], ...]
    readiness: tuple[Readiness, ...]

    @property
    def ok(self) -> bool:
        return not self.failed and all(r.ready for r in self.readiness)

    def to_dict(self) -> dict[str, Any]:
        return {
            "moved": [
                {"node": n, "instance": m.instance, "target": m.target, "elapsed": m.elapsed}
                for n, m in self.moved
            ],
            "failed": [{"node": n, **e.to_dict()} for n, e in self.failed],
            "readiness": [r.to_dict() for r in self.readiness],
            "ok": self.ok,
        }


def evacuate(
    provisioner: Provisioner,
    nodes: Sequence[str],
    *,
    reason: str,
    by: str,
    deadline: Deadline | None = None,
    cancel: CancelToken | None = None,
) -> Evacuation:
    """Put ``nodes`` into maintenance (never claimed while there), move every
    instance they hold to another node, and report each node's readiness.

    Each move is one job of the reschedule loop: its own attempts, the
    policy's stop conditions, and its share of ``deadline``. A move that
    fails leaves the instance where it was (the node stays "not ready")."""
    backend = provisioner.backend
    token = cancel or provisioner.cancel
    for node in nodes:
        backend.set_maintenance(node, reason=reason, by=by)
    moved: list[tuple[str, Moved]] = []
    failed: list[tuple[str, BmaasError]] = []
    for node in nodes:
        holder = backend.holder(node)
        if holder is None:
            continue
        try:
            moved.append((node, provisioner.move(holder.id, deadline=deadline, cancel=token)))
        except ProvisionFailed as exc:
            failed.append((node, exc))
        except BmaasError as exc:  # bad input, lease lost: this node's move stops
            failed.append((node, exc))
    readiness = tuple(backend.readiness(n) for n in nodes)
    return Evacuation(tuple(moved), tuple(failed), readiness)
