"""Which nodes may serve a request, best first (Nova's "alternates").

A candidate matches the request's resource class and properties (numbers are
minimums, anything else must be equal) and can be claimed now: not in
maintenance, not faulted, not allocated, not left needing cleaning by a
failed attempt (:mod:`bmaas.provision.leftovers`), not already tried by this
request.

Nova computes its alternates once, when it schedules; bmaas recomputes them
before each attempt, so a node another request claimed in the meantime is
simply not offered, and a node that just came out of maintenance is.

Ranking: nodes with no recent faults first, then the tightest fit (least
spare CPU and memory: big nodes stay free for big requests), then name.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from bmaas.store.records import NodeRecord

if TYPE_CHECKING:  # the caller's store: importing it here would load SQLAlchemy
    from bmaas.store import Store

__all__ = ["candidates", "matches", "rank"]

#: properties compared as "at least" when both sides are numbers
_NUMERIC = (int, float)


def matches(node: NodeRecord, resource_class: str | None, properties: Mapping[str, Any]) -> bool:
    """Whether ``node`` can serve a request with these needs."""
    if resource_class is not None and node.resource_class != resource_class:
        return False
    for key, wanted in properties.items():
        have = node.properties.get(key)
        if isinstance(wanted, _NUMERIC) and not isinstance(wanted, bool):
            if not isinstance(have, _NUMERIC) or isinstance(have, bool) or have < wanted:
                return False
        elif have != wanted:
            return False
    return True


def _spare(node: NodeRecord, properties: Mapping[str, Any]) -> float:
    """How much a node has beyond what is asked, relative to what is asked."""
    spare = 0.0
    for key in ("memory_mb", "cpus"):
        have = node.properties.get(key)
        wanted = properties.get(key) or 0
        if isinstance(have, _NUMERIC):
            spare += (have - wanted) / max(have, 1)
    return spare


def rank(nodes: Iterable[NodeRecord], properties: Mapping[str, Any]) -> list[NodeRecord]:
    return sorted(nodes, key=lambda n: (n.fault_count, _spare(n, properties), n.name))


def candidates(
    store: Store,
    *,
    resource_class: str | None = None,
    properties: Mapping[str, Any] | None = None,
    exclude: Collection[str] = (),
    among: Collection[str] | None = None,
) -> list[str]:
    """Names of the nodes that could serve the request now, best first.
    ``among`` limits the choice to a caller's list (kept in its order)."""
    properties = properties or {}
    free = store.nodes.find(
        maintenance=False,
        faulted=False,
        allocated=False,
        needs_cleaning=False,
        resource_class=resource_class,
    )
    usable = [n for n in free if n.name not in exclude and matches(n, resource_class, properties)]
    if among is not None:
        order = {name: i for i, name in enumerate(among)}
        return [
            n.name
            for n in sorted(usable, key=lambda n: order.get(n.name, 1 << 30))
            if n.name in order
        ]
    return [n.name for n in rank(usable, properties)]
