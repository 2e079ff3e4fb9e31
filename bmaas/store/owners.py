"""Owners, leases and allocations: every held node has exactly one owner.

An owner is a request, an attempt, a move or an instance. Each transient owner
holds a *lease* on the wall clock; its holder renews it while it works. When a
process dies, its leases run out and any later run's ``store.lifecycle.reclaim_expired``
gives back what it held. Instances are durable (no lease): a deployed server
outlives the process that deployed it.

The guarantees, and how they are kept:

* **claiming is one conditional write** (``INSERT ... SELECT ... WHERE`` the
  node is free, not in maintenance, not faulted, and the owner's lease is
  alive); a UNIQUE index on ``allocations.node_id`` backs it on any backend;
* **owner swaps are one transaction**, each change conditional on the old
  owner still holding the node: all changes land, or none;
* **no allocation outlives its owner**: deleting an owner drops its
  allocations (and its children's) in the same transaction, and the foreign
  key refuses anything else;
* **a node without an allocation is available**: dropping an allocation resets
  the node's provision state and unbinds every port bound to it.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import uuid
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from bmaas.faults import BmaasError, InputError, NodeUnavailable
from bmaas.store import schema as t
from bmaas.store.base import Database, Tx, owner_in, owner_row, require_alive
from bmaas.store.errors import LeaseLost
from bmaas.store.ports import unbind
from bmaas.store.records import DEFAULT_LEASE_TTL as _DEFAULT_LEASE_TTL
from bmaas.store.records import Allocation, Owner, OwnerKind, ProvisionState, leftover_text

__all__ = [
    "DEFAULT_LEASE_TTL",
    "OwnersRepo",
    "Reclaimed",
    "allocations_in",
    "claim_in",
    "drop_allocations",
    "insert_owner",
    "set_state",
    "swap_one",
    "this_holder",
]

#: seconds a lease lasts unless renewed; holders renew every third of it
DEFAULT_LEASE_TTL = _DEFAULT_LEASE_TTL


def this_holder() -> str:
    """``host:pid``: who keeps a lease alive, for the people reading it."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclasses.dataclass(frozen=True)
class Reclaimed:
    """What ``store.lifecycle.reclaim_expired`` gave back for one dead owner."""

    owner: Owner
    nodes: list[str]
    ports_deleted: list[str]
    ports_detached: list[str]
    #: a move rolled back: its source went back to the instance
    move_rolled_back: bool = False


class OwnersRepo:
    """``store.owners``: owners, leases, claims, releases and owner swaps."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # -- owners and leases ---------------------------------------------------------

    def create(
        self,
        kind: OwnerKind | str,
        *,
        name: str | None = None,
        parent_id: str | None = None,
        ttl: float = DEFAULT_LEASE_TTL,
        data: dict[str, Any] | None = None,
        holder: str | None = None,
    ) -> Owner:
        """A new owner. Transient kinds get a lease of ``ttl`` seconds; an
        instance is durable. A child (an attempt of a request) needs a live parent."""
        kind = OwnerKind(kind)
        if kind is not OwnerKind.INSTANCE and ttl <= 0:
            raise InputError("must be positive", field="ttl")
        with self._db.write() as tx:
            return insert_owner(tx, kind, name, parent_id, ttl, data, holder)

    def get(self, owner_id: str) -> Owner:
        """The owner; ``LeaseLost`` if it is gone."""
        with self._db.read() as tx:
            return owner_in(tx, owner_id)

    def find(
        self,
        *,
        kind: OwnerKind | str | None = None,
        parent_id: str | None = None,
        expired: bool | None = None,
    ) -> list[Owner]:
        o = t.owners
        query = sa.select(o).order_by(o.c.created_at, o.c.id)
        if kind is not None:
            query = query.where(o.c.kind == OwnerKind(kind).value)
        if parent_id is not None:
            query = query.where(o.c.parent_id == parent_id)
        if expired is not None:
            dead = sa.and_(
                o.c.lease_expires_at.is_not(None), o.c.lease_expires_at <= self._db.now()
            )
            query = query.where(dead if expired else ~dead)
        with self._db.read() as tx:
            return [owner_row(row) for row in tx.execute(query)]

    def renew_lease(self, owner_id: str, *, ttl: float = DEFAULT_LEASE_TTL) -> Owner:
        """Extend a live lease to ``now + ttl``. An expired lease is lost even
        if nobody has reclaimed it yet: its holder must stop (``LeaseLost``)."""
        lost = self.renew_leases([owner_id], ttl=ttl)
        if lost:
            raise lost[0]
        return self.get(owner_id)

    def renew_leases(
        self, owner_ids: Sequence[str], *, ttl: float = DEFAULT_LEASE_TTL
    ) -> list[LeaseLost]:
        """Renew several leases in one transaction; returns the ones lost."""
        o = t.owners
        lost: list[LeaseLost] = []
        with self._db.write() as tx:
            now = self._db.now()
            for owner_id in owner_ids:
                result = tx.execute(
                    o.update()
                    .where(o.c.id == owner_id, o.c.lease_expires_at > now)
                    .values(lease_expires_at=now + ttl)
                )
                if result.rowcount == 1:
                    continue
                try:
                    require_alive(tx, owner_id)  # durable owners pass
                except LeaseLost as exc:
                    lost.append(exc)
        return lost

    # -- allocations -------------------------------------------------------------

    def claim(
        self,
        node: str,
        owner_id: str,
        *,
        provision_state: ProvisionState | None = None,
    ) -> Allocation:
        """Give ``node`` to ``owner_id`` in ONE conditional write.

        Fails with ``NodeUnavailable`` (and the reason) when the node is
        allocated, in maintenance or faulted; ``LeaseLost`` when the owner is
        gone or expired. Never read-then-write.
        """
        try:
            with self._db.write() as tx:
                return claim_in(tx, node, owner_id, provision_state)
        except sa.exc.IntegrityError as exc:
            # Only reachable where writers are not serialised (PostgreSQL).
            raise NodeUnavailable(
                "another owner claimed it at the same moment",
                node=node,
                reason="claimed",
                taken=True,
            ) from exc

    def claim_first(self, nodes: Sequence[str], owner_id: str, **kw: Any) -> Allocation:
        """Claim the first node of ``nodes`` that can be claimed (a candidate
        list, best first). ``NodeUnavailable`` for the last one if none can."""
        if not nodes:
            raise InputError("no nodes to claim from", field="nodes")
        last: NodeUnavailable | None = None
        for node in nodes:
            try:
                return self.claim(node, owner_id, **kw)
            except NodeUnavailable as exc:
                last = exc
        assert last is not None
        raise last

    def release(self, node: str, owner_id: str) -> bool:
        """Give a node back. ``False`` if it was not allocated at all (releasing
        twice is harmless); ``NodeUnavailable`` if someone else holds it."""
        a = t.allocations
        with self._db.write() as tx:
            node_id = tx.node_id(node)
            holder = tx.scalar(sa.select(a.c.owner_id).where(a.c.node_id == node_id))
            if holder is None:
                return False
            if holder != owner_id:
                raise NodeUnavailable(
                    f"not released: held by {owner_in(tx, holder).describe()}",
                    node=node,
                    reason="held by another owner",
                )
            drop_allocations(tx, a.c.node_id == node_id, f"released by {owner_id[:8]}")
            return True

    def allocation(self, node: str) -> Allocation | None:
        with self._db.read() as tx:
            tx.node_id(node)
            found = allocations_in(tx, t.nodes.c.name == node)
        return found[0] if found else None

    def allocations(
        self, *, owner_id: str | None = None, expired: bool | None = None
    ) -> list[Allocation]:
        """Allocations, filtered by owner or by whether the owner's lease expired
        (``expired=True``: what a crashed run left; reclaimed by the next one)."""
        a, o = t.allocations, t.owners
        where: list[sa.ColumnElement[bool]] = []
        if owner_id is not None:
            where.append(a.c.owner_id == owner_id)
        if expired is not None:
            dead = sa.and_(
                o.c.lease_expires_at.is_not(None), o.c.lease_expires_at <= self._db.now()
            )
            where.append(dead if expired else ~dead)
        with self._db.read() as tx:
            return allocations_in(tx, *where)

    def set_provision_state(self, node: str, state: ProvisionState, *, owner_id: str) -> None:
        """Move a node the owner holds to ``state`` (conditional on holding it)."""
        a = t.allocations
        with self._db.write() as tx:
            require_alive(tx, owner_id)
            node_id = tx.node_id(node)
            holder = tx.scalar(sa.select(a.c.owner_id).where(a.c.node_id == node_id))
            if holder != owner_id:
                raise NodeUnavailable(
                    "is not held by this owner", node=node, reason="held by another owner"
                )
            set_state(tx, [node_id], state)

    # -- owner swaps -------------------------------------------------------------

    def swap(self, changes: Sequence[tuple[str, str, str]]) -> None:
        """Apply ``(node, old_owner, new_owner)`` changes in ONE transaction.

        Each change is conditional on ``old_owner`` still holding the node and
        ``new_owner`` being alive; if any fails, none is applied.
        """
        with self._db.write() as tx:
            for node, old, new in changes:
                swap_one(tx, node, old, new)

    # -- helpers, inside a transaction ---------------------------------------------


def insert_owner(
    tx: Tx,
    kind: OwnerKind,
    name: str | None,
    parent_id: str | None,
    ttl: float | None,
    data: dict[str, Any] | None,
    holder: str | None,
) -> Owner:
    if parent_id is not None:
        require_alive(tx, parent_id)
    now = tx.now()
    durable = kind is OwnerKind.INSTANCE or ttl is None
    owner_id = str(uuid.uuid4())
    tx.execute(
        t.owners.insert().values(
            id=owner_id,
            kind=kind.value,
            name=name,
            parent_id=parent_id,
            holder=None if durable else (holder or this_holder()),
            lease_expires_at=None if durable else now + float(ttl or 0),
            data=data or {},
            created_at=now,
        )
    )
    return owner_in(tx, owner_id)


def claim_in(
    tx: Tx,
    node: str,
    owner_id: str,
    provision_state: ProvisionState | None = None,
) -> Allocation:
    n, a, o = t.nodes, t.allocations, t.owners
    now = tx.now()
    free = (
        sa.select(n.c.id, sa.literal(owner_id), sa.literal(now))
        .where(n.c.name == node, n.c.maintenance.is_(False), n.c.fault.is_(None))
        .where(n.c.leftovers.is_(None))
        .where(~sa.exists().where(a.c.node_id == n.c.id))
        .where(
            sa.exists().where(
                o.c.id == owner_id,
                sa.or_(o.c.lease_expires_at.is_(None), o.c.lease_expires_at > now),
            )
        )
    )
    # preserve_rowcount: DBAPIs report INSERT row counts only if asked (psycopg).
    insert = a.insert().from_select(["node_id", "owner_id", "created_at"], free)
    result = tx.execute(insert.execution_options(preserve_rowcount=True))
    if result.rowcount != 1:
        raise why_not(tx, node, owner_id)
    node_id = tx.node_id(node)
    if provision_state is not None:
        set_state(tx, [node_id], provision_state)
    owner = owner_in(tx, owner_id)
    tx.event(node_id, "claimed", f"claimed by {owner.describe()}", actor=owner.id)
    return Allocation(node, owner, now)


def swap_one(tx: Tx, node: str, old: str, new: str) -> None:
    a = t.allocations
    new_owner = owner_row(require_alive(tx, new))
    node_id = tx.node_id(node)
    result = tx.execute(
        a.update().where(a.c.node_id == node_id, a.c.owner_id == old).values(owner_id=new)
    )
    if result.rowcount != 1:
        raise NodeUnavailable(
            f"owner swap refused: not held by {old[:8]}", node=node, reason="owner changed"
        )
    tx.event(node_id, "owner_changed", f"{old[:8]} -> {new_owner.describe()}", actor=new)


def allocations_in(tx: Tx, *where: sa.ColumnElement[bool]) -> list[Allocation]:
    a, n, o = t.allocations, t.nodes, t.owners
    query = (
        sa.select(n.c.name.label("node_name"), a.c.created_at.label("allocated_at"), o)
        .select_from(a.join(n, n.c.id == a.c.node_id).join(o, o.c.id == a.c.owner_id))
        .where(*where)
        .order_by(n.c.name)
    )
    return [
        Allocation(row.node_name, owner_row(row), row.allocated_at) for row in tx.execute(query)
    ]


def why_not(tx: Tx, node: str, owner_id: str) -> BmaasError:
    """Why a claim's conditional write matched nothing (read in the same
    transaction, so the answer is what the write saw)."""
    n, a = t.nodes, t.allocations
    row = tx.execute(sa.select(n).where(n.c.name == node)).first()
    if row is None:
        return tx.unknown_node(node)
    try:
        require_alive(tx, owner_id)
    except LeaseLost as exc:
        return exc
    holder = tx.scalar(sa.select(a.c.owner_id).where(a.c.node_id == row.id))
    if holder is not None:
        held_by = owner_in(tx, holder).describe()
        return NodeUnavailable(node=node, reason=f"allocated to {held_by}", taken=True)
    if row.fault is not None:
        return NodeUnavailable(node=node, reason=f"faulted: {row.fault}")
    if row.leftovers is not None:
        left = leftover_text(row.leftovers)
        return NodeUnavailable(
            node=node, reason=f"needs cleaning (left by a failed attempt: {left})"
        )
    return NodeUnavailable(
        node=node, reason=f"in maintenance ({row.maintenance_by}: {row.maintenance_reason})"
    )


def set_state(tx: Tx, node_ids: list[int], state: ProvisionState) -> None:
    tx.execute(
        t.nodes.update()
        .where(t.nodes.c.id.in_(node_ids))
        .values(provision_state=state.value, updated_at=tx.now())
    )


def drop_allocations(tx: Tx, where: sa.ColumnElement[bool], why: str) -> list[str]:
    """Delete matching allocations; their nodes become available and lose
    every port binding."""
    a, n = t.allocations, t.nodes
    rows = tx.execute(
        sa.select(a.c.id, a.c.node_id, n.c.name).join(n, n.c.id == a.c.node_id).where(where)
    ).all()
    if not rows:
        return []
    node_ids = [row.node_id for row in rows]
    unbind(tx, t.ports.c.node_id.in_(node_ids))
    tx.execute(a.delete().where(a.c.id.in_([row.id for row in rows])))
    set_state(tx, node_ids, ProvisionState.AVAILABLE)
    for row in rows:
        tx.event(row.node_id, "released", why)
    return sorted(row.name for row in rows)
