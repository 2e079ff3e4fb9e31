"""Networks, segments and ports (the network-aware scheduling design).

A network has segments, each with IP pools; a node sits in one segment. A
request's ports are created before any node is picked (they need only the
network), *bound* once a node is held (the IP comes from that node's
segment), *unbound* when the attempt fails, and bound again for the next
attempt: the port, its id and MAC survive the reschedule.

Two invariants the store keeps:

* a port is bound only to a node its owner holds (directly or through one of
  its attempts), and dropping an allocation unbinds every port on that node;
* cleanup deletes only ports bmaas created; a user's port is unbound and
  handed back (owner cleared), never deleted.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import sqlalchemy as sa

from bmaas.faults import InputError, NodeUnavailable
from bmaas.store import schema as t
from bmaas.store.base import Database, Tx, require_alive
from bmaas.store.errors import SegmentExhausted
from bmaas.store.records import Network, Port, PortOrigin, Segment

__all__ = ["PortCleanup", "PortsRepo", "cleanup_owner_ports", "unbind"]

#: attempts at picking a free IP when another writer took it first (PostgreSQL)
_BIND_TRIES = 3


@dataclasses.dataclass(frozen=True)
class PortCleanup:
    deleted: list[str]
    detached: list[str]


def _port_query() -> sa.Select[Any]:
    p, n, s, net = t.ports, t.nodes, t.segments, t.networks
    return (
        sa.select(
            p,
            net.c.name.label("network_name"),
            n.c.name.label("node_name"),
            s.c.name.label("segment_name"),
        )
        .select_from(
            p.join(net, net.c.id == p.c.network_id)
            .outerjoin(n, n.c.id == p.c.node_id)
            .outerjoin(s, s.c.id == p.c.segment_id)
        )
        .order_by(p.c.created_at, p.c.id)
    )


def _port(row: sa.Row[Any]) -> Port:
    m = row._mapping
    return Port(
        id=m["id"],
        network=m["network_name"],
        owner_id=m["owner_id"],
        created_by=PortOrigin(m["created_by"]),
        name=m["name"],
        mac_address=m["mac_address"],
        node=m["node_name"],
        segment=m["segment_name"],
        ip_address=m["ip_address"],
        created_at=m["created_at"],
        bound_at=m["bound_at"],
    )


def pool_addresses(
    pools: Iterable[dict[str, str]], *, skip: Iterable[str] = ()
) -> Iterator[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """Every address in the pools, in order, lazily (an IPv6 pool is huge)."""
    skipped = {ipaddress.ip_address(a) for a in skip if a}
    for pool in pools:
        start, end = ipaddress.ip_address(pool["start"]), ipaddress.ip_address(pool["end"])
        for value in range(int(start), int(end) + 1):
            address = ipaddress.ip_address(value)
            if address not in skipped:
                yield address


class PortsRepo:
    """``store.ports``: networks, segments, ports and IP binding."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # -- networks ----------------------------------------------------------------

    def networks(self) -> list[Network]:
        net, s = t.networks, t.segments
        with self._db.read() as tx:
            nets = tx.execute(sa.select(net).order_by(net.c.name)).all()
            segs = tx.execute(sa.select(s).order_by(s.c.name)).all()
        names = {row.id: row.name for row in nets}
        by_net: dict[int, list[Segment]] = {row.id: [] for row in nets}
        for row in segs:
            by_net[row.network_id].append(
                Segment(
                    row.name,
                    names[row.network_id],
                    row.cidr,
                    row.gateway_ip,
                    list(row.allocation_pools),
                )
            )
        return [Network(row.name, by_net[row.id]) for row in nets]

    # -- ports -----------------------------------------------------------------

    def create(
        self,
        network: str,
        *,
        owner_id: str | None = None,
        created_by: PortOrigin | str = PortOrigin.BMAAS,
        name: str | None = None,
        mac_address: str | None = None,
    ) -> Port:
        """A port on ``network``, unbound. Ports bmaas creates always have an
        owner (a request); a user's port may be created without one and
        attached to a request later with ``attach``."""
        origin = PortOrigin(created_by)
        if origin is PortOrigin.BMAAS and owner_id is None:
            raise InputError("a port bmaas creates needs an owner", field="owner_id")
        port_id = str(uuid.uuid4())
        with self._db.write() as tx:
            network_id = tx.scalar(sa.select(t.networks.c.id).where(t.networks.c.name == network))
            if network_id is None:
                raise InputError(f"no such network {network!r}", field="network")
            if owner_id is not None:
                require_alive(tx, owner_id)
            tx.execute(
                t.ports.insert().values(
                    id=port_id,
                    network_id=network_id,
                    owner_id=owner_id,
                    created_by=origin.value,
                    name=name,
                    mac_address=mac_address,
                    created_at=self._db.now(),
                )
            )
            return port_in(tx, port_id)

    def attach(self, port_id: str, owner_id: str) -> Port:
        """Give an unowned (user) port to ``owner_id``; idempotent for the same owner."""
        with self._db.write() as tx:
            require_alive(tx, owner_id)
            port = port_in(tx, port_id)
            if port.owner_id not in (None, owner_id):
                raise InputError("is held by another owner", field=f"port {port_id}")
            tx.execute(t.ports.update().where(t.ports.c.id == port_id).values(owner_id=owner_id))
            return port_in(tx, port_id)

    def get(self, port_id: str) -> Port:
        with self._db.read() as tx:
            return port_in(tx, port_id)

    def find(
        self,
        *,
        owner_id: str | None = None,
        node: str | None = None,
        network: str | None = None,
        orphaned: bool | None = None,
    ) -> list[Port]:
        """Ports, filtered. ``orphaned=True``: ports bmaas created whose owner is
        gone or whose lease expired (what ``bmaas status check`` reports)."""
        p, o = t.ports, t.owners
        query = _port_query()
        if owner_id is not None:
            query = query.where(p.c.owner_id == owner_id)
        if node is not None:
            query = query.where(t.nodes.c.name == node)
        if network is not None:
            query = query.where(t.networks.c.name == network)
        if orphaned is not None:
            expired = sa.exists().where(
                o.c.id == p.c.owner_id,
                o.c.lease_expires_at.is_not(None),
                o.c.lease_expires_at <= self._db.now(),
            )
            condition = sa.and_(
                p.c.created_by == PortOrigin.BMAAS.value,
                sa.or_(p.c.owner_id.is_(None), expired),
            )
            query = query.where(condition if orphaned else ~condition)
        with self._db.read() as tx:
            return [_port(row) for row in tx.execute(query)]

    def bind(self, port_id: str, node: str) -> Port:
        """Bind a port to a node its owner holds, with an IP from the node's
        segment. Idempotent for the same node. ``SegmentExhausted`` (scope:
        elsewhere) when the segment has no free IP; ``NodeUnavailable`` when
        the node is not on the port's network."""
        for attempt in range(_BIND_TRIES):
            try:
                with self._db.write() as tx:
                    return bind(tx, port_id, node)
            except sa.exc.IntegrityError:
                # Another writer took the same IP between our read and write.
                if attempt == _BIND_TRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def unbind(self, port_id: str) -> Port:
        """Release a port's binding and IP; the port stays for the next attempt."""
        with self._db.write() as tx:
            port_in(tx, port_id)
            unbind(tx, t.ports.c.id == port_id)
            return port_in(tx, port_id)

    def cleanup(self, owner_id: str) -> PortCleanup:
        """End of a request: delete the ports bmaas created for it, unbind and
        detach the ones the user supplied."""
        with self._db.write() as tx:
            return cleanup_owner_ports(tx, owner_id)


def bind(tx: Tx, port_id: str, node: str) -> Port:
    port = port_in(tx, port_id)
    if port.node == node:
        return port
    if port.node is not None:
        raise InputError(f"is bound to {port.node}; unbind it first", field=f"port {port_id}")
    n, s, a, o = t.nodes, t.segments, t.allocations, t.owners
    row = tx.execute(
        sa.select(n.c.id, s.c.id.label("segment_id"), s.c.name.label("segment"), s.c.network_id)
        .select_from(n.outerjoin(s, s.c.id == n.c.segment_id))
        .where(n.c.name == node)
    ).first()
    if row is None:
        raise tx.unknown_node(node)
    holder = tx.execute(
        sa.select(o.c.id, o.c.parent_id)
        .select_from(a.join(o, o.c.id == a.c.owner_id))
        .where(a.c.node_id == row.id)
    ).first()
    if (
        port.owner_id is None
        or holder is None
        or port.owner_id not in (holder.id, holder.parent_id)
    ):
        raise NodeUnavailable(
            f"port {port_id} may be bound only to a node its owner holds",
            node=node,
            reason="not held by the port's owner",
        )
    if row.segment_id is None:
        raise NodeUnavailable("has no network segment", node=node, reason="no segment")
    seg = tx.execute(sa.select(s).where(s.c.id == row.segment_id)).one()
    network_id = tx.scalar(sa.select(t.ports.c.network_id).where(t.ports.c.id == port_id))
    if seg.network_id != network_id:
        raise NodeUnavailable(
            f"segment {seg.name} is not on network {port.network}",
            node=node,
            reason="not on the port's network",
        )
    used = set(
        tx.scalars(
            sa.select(t.ports.c.ip_address).where(
                t.ports.c.segment_id == seg.id, t.ports.c.ip_address.is_not(None)
            )
        )
    )
    free = (
        str(ip)
        for ip in pool_addresses(seg.allocation_pools, skip=[seg.gateway_ip])
        if str(ip) not in used
    )
    address = next(free, None)
    if address is None:
        raise SegmentExhausted(
            f"no free IP in segment {seg.name} ({len(used)} bound)",
            node=node,
            reason=f"segment {seg.name} out of IPs",
        )
    tx.execute(
        t.ports.update()
        .where(t.ports.c.id == port_id)
        .values(node_id=row.id, segment_id=seg.id, ip_address=address, bound_at=tx.now())
    )
    tx.event(row.id, "port_bound", f"port {port_id[:8]} bound, {address}")
    return port_in(tx, port_id)


def port_in(tx: Tx, port_id: str) -> Port:
    row = tx.execute(_port_query().where(t.ports.c.id == port_id)).first()
    if row is None:
        raise InputError("no such port", field=f"port {port_id}")
    return _port(row)


def unbind(tx: Tx, where: sa.ColumnElement[bool]) -> list[str]:
    """Unbind the ports matching ``where`` (an event on each node)."""
    p = t.ports
    bound = tx.execute(
        sa.select(p.c.id, p.c.node_id, p.c.ip_address).where(where, p.c.node_id.is_not(None))
    ).all()
    for row in bound:
        tx.event(row.node_id, "port_unbound", f"port {row.id[:8]} unbound, {row.ip_address}")
    if bound:
        tx.execute(
            p.update()
            .where(p.c.id.in_([row.id for row in bound]))
            .values(node_id=None, segment_id=None, ip_address=None, bound_at=None)
        )
    return [row.id for row in bound]


def cleanup_owner_ports(tx: Tx, owner_id: str) -> PortCleanup:
    p = t.ports
    unbind(tx, p.c.owner_id == owner_id)
    rows = tx.execute(sa.select(p.c.id, p.c.created_by).where(p.c.owner_id == owner_id)).all()
    deleted = [r.id for r in rows if r.created_by == PortOrigin.BMAAS.value]
    detached = [r.id for r in rows if r.created_by != PortOrigin.BMAAS.value]
    if deleted:
        tx.execute(p.delete().where(p.c.id.in_(deleted)))
    if detached:
        tx.execute(p.update().where(p.c.id.in_(detached)).values(owner_id=None))
    return PortCleanup(deleted, detached)
