"""Sync shares: several ``bmaas sync`` workers on one database split the fleet.

A sync worker is an owner of kind ``sync`` with a lease its process keeps
renewing (:class:`bmaas.lease.LeaseKeeper`). Before each pass a worker
*claims* the nodes it means to read: one row per node in ``sync_shares``
(the node is the primary key, so one holder at most), taken only if the row
is free, expired, or already the worker's own; every claim is one atomic
``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` (SQLite and PostgreSQL alike),
so two workers racing for a node cannot both win it. A worker that already
holds exactly the nodes it claims (every pass of a steady fleet) renews
them instead: one ``UPDATE`` of its unexpired rows, whatever the fleet's
size, its rows read first in the same write transaction (a 200-node claim
built and ran a 200-row ``INSERT`` a pass: 16 ms of CPU, more than an idle
events sync spends on everything else). A worker reads only
the nodes it holds. Which nodes a worker *wants* is decided above the store
(:mod:`bmaas.share`); the store guarantees only that no two live workers
hold one node at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from bmaas.store import schema as t
from bmaas.store.base import Database, Tx, owner_row
from bmaas.store.records import Owner, OwnerKind

__all__ = ["CHUNK", "SharesRepo"]

#: rows per statement (SQLite allows 32766 bound parameters; three per row)
CHUNK = 2000


#: the names of the nodes whose rows name a worker, built once: run out
#: or not (a sync at ``--interval`` >= ``--lease-ttl``, 60 s both by
#: default, finds its rows run out at every pass; nobody took them)
_MINE = (
    sa.select(t.nodes.c.name)
    .select_from(t.sync_shares.join(t.nodes, t.nodes.c.id == t.sync_shares.c.node_id))
    .where(t.sync_shares.c.worker_id == sa.bindparam("worker"))
)
#: a worker's rows renewed, built once
_RENEW = (
    t.sync_shares.update()
    .where(t.sync_shares.c.worker_id == sa.bindparam("worker"))
    .values(expires_at=sa.bindparam("until"))
)


class SharesRepo:
    """``store.shares``: which sync worker reads which node."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def workers(self) -> list[Owner]:
        """Live sync workers (lease not expired), oldest first."""
        o = t.owners
        with self._db.read() as tx:
            rows = tx.execute(
                sa.select(o)
                .where(o.c.kind == OwnerKind.SYNC.value, o.c.lease_expires_at > self._db.now())
                .order_by(o.c.created_at, o.c.id)
            ).all()
        return [owner_row(row) for row in rows]

    def claim(self, worker_id: str, names: Sequence[str], *, ttl: float) -> list[str]:
        """Hold ``names`` for ``ttl`` seconds where nobody else does; returns
        the ones this worker now holds (a subset of ``names``, in order)."""
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        s = t.sync_shares
        held: set[str] = set()
        with self._db.write() as tx:
            now = self._db.now()
            if names and _renewed(tx, worker_id, names, now, ttl):
                return list(names)
            ids = tx.node_ids(names) if names else {}
            insert = _upsert_insert(tx.dialect.name)
            by_id = {node_id: name for name, node_id in ids.items()}
            node_ids = list(by_id)
            for at in range(0, len(node_ids), CHUNK):
                part = node_ids[at : at + CHUNK]
                stmt = insert(s).values(
                    [{"node_id": i, "worker_id": worker_id, "expires_at": now + ttl} for i in part]
                )
                stmt = stmt.on_conflict_do_update(
                    index_elements=[s.c.node_id],
                    set_={
                        "worker_id": stmt.excluded.worker_id,
                        "expires_at": stmt.excluded.expires_at,
                    },
                    where=sa.or_(s.c.worker_id == worker_id, s.c.expires_at <= now),
                )
                tx.execute(stmt)
                mine = tx.scalars(
                    sa.select(s.c.node_id).where(
                        s.c.node_id.in_(part), s.c.worker_id == worker_id, s.c.expires_at > now
                    )
                )
                held.update(by_id[i] for i in mine)
        return [name for name in names if name in held]

    def release(self, worker_id: str, names: Sequence[str] | None = None) -> int:
        """Give back ``names`` (default: everything the worker holds)."""
        s = t.sync_shares
        with self._db.write() as tx:
            where = [s.c.worker_id == worker_id]
            if names is None:
                return int(tx.execute(s.delete().where(*where)).rowcount or 0)
            ids = list(tx.node_ids(names).values()) if names else []
            count = 0
            for at in range(0, len(ids), CHUNK):
                part = ids[at : at + CHUNK]
                count += int(
                    tx.execute(s.delete().where(*where, s.c.node_id.in_(part))).rowcount or 0
                )
            return count

    def held(self) -> dict[str, str]:
        """node -> worker id, for every unexpired share."""
        s, n = t.sync_shares, t.nodes
        with self._db.read() as tx:
            rows = tx.execute(
                sa.select(n.c.name, s.c.worker_id)
                .join(n, n.c.id == s.c.node_id)
                .where(s.c.expires_at > self._db.now())
            ).all()
        return {row.name: row.worker_id for row in rows}


def _upsert_insert(dialect: str) -> Any:
    """The dialect's INSERT with ``on_conflict_do_update``; imported here, so
    commands that never take a share do not pay for the PostgreSQL dialect."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert
    from sqlalchemy.dialects import sqlite

    return sqlite.insert


def _renewed(tx: Tx, worker_id: str, names: Sequence[str], now: float, ttl: float) -> bool:
    """Renew ``worker_id``'s rows if they are exactly ``names``; False,
    nothing written, otherwise: the claim's ``INSERT`` decides. A row run
    out that still names the worker is renewed as the ``INSERT`` would
    take it: nobody else has (a worker that takes one writes its own id).
    At ``--interval 60`` with the default 60 s ``--lease-ttl`` every pass
    found its rows run out, and its claim took the ``INSERT`` (issue 46:
    most of a quiet events sync's CPU at 200 nodes)."""
    given = {"worker": worker_id}
    mine = set(tx.execute(_MINE, given).scalars())
    if mine != set(names):
        return False
    # the rows just read, in this write transaction: on PostgreSQL another
    # worker's claim may still take one that ran out (its WHERE is
    # re-checked), and then the count tells; the INSERT then decides
    return int(tx.execute(_RENEW, {**given, "until": now + ttl}).rowcount or 0) == len(mine)
