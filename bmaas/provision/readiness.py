"""Ready for maintenance, on the embedded store: the node is in
maintenance and holds nothing (no allocation, no bound port). What still
holds it is said one line each, with the holder's lease where it has one, so
an operator knows whether to wait (a live lease) or not (an expired one is
reclaimed by the next run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bmaas.provision.backend import Readiness

if TYPE_CHECKING:  # the caller's store: importing it here would load SQLAlchemy
    from bmaas.store import Store

__all__ = ["readiness"]


def readiness(store: Store, node: str) -> Readiness:
    """Is the node ready for work on it: in maintenance and holding nothing?"""
    rec = store.nodes.get(node)
    allocation = store.owners.allocation(node)
    holds: list[str] = []
    if allocation is not None:
        owner = allocation.owner
        text = f"held by {owner.describe()}"
        if owner.lease_expires_at is not None:
            left = owner.lease_expires_at - store.clock()
            text += f", holder {owner.holder}, lease " + (
                f"expires in {left:.0f}s" if left > 0 else "expired (reclaimed by the next run)"
            )
        holds.append(text)
    holds += [f"port {p.id[:8]} bound ({p.ip_address})" for p in store.ports.find(node=node)]
    if not rec.maintenance:
        why = "not in maintenance: it may be claimed at any time"
    elif holds:
        why = "; ".join(holds)
    else:
        why = f"maintenance by {rec.maintenance_by}: {rec.maintenance_reason}; holds nothing"
    return Readiness(
        node=node,
        ready=rec.maintenance and not holds,
        maintenance=rec.maintenance,
        maintenance_by=rec.maintenance_by,
        reason=rec.maintenance_reason,
        fault=rec.fault,
        held_by=tuple(holds),
        detail=why,
    )
