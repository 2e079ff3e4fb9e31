"""The store's plumbing: one engine, one transaction type.

:class:`Database` holds the engine and the clock; every repository method
(``store.nodes``, ``store.owners``, ...) is one short transaction it opens:
:meth:`Database.write` (``BEGIN IMMEDIATE`` on SQLite) for anything that
changes state, :meth:`Database.read` for the rest. Each hands out a
:class:`Tx`: the connection plus what every table needs inside it (the time,
the node-name lookup, the history). Cross-table steps (claiming, swapping
owners, ending an owner) are plain functions taking a ``Tx``, so one
transaction can compose several. No method holds a
transaction while it talks to a BMC. Database errors are mapped to
:class:`~bmaas.store.errors.StoreError` here, once; ``IntegrityError`` is left
to the few callers that expect one (a claim racing another on PostgreSQL).
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from bmaas.faults import InputError
from bmaas.secrets import mask, mask_urls
from bmaas.store import schema as t
from bmaas.store.engine import WRITE_OPTION
from bmaas.store.errors import LeaseLost, StoreError
from bmaas.store.records import Owner, OwnerKind

__all__ = ["Database", "Tx", "owner_in", "owner_row", "require_alive"]

LOG = logging.getLogger(__name__)


class Tx:
    """One open transaction: its connection, the clock, the node lookups
    and the history every table writes to."""

    def __init__(self, conn: sa.Connection, clock: Callable[[], float]) -> None:
        self.conn = conn
        self._clock = clock

    def now(self) -> float:
        return float(self._clock())

    @property
    def dialect(self) -> sa.Dialect:
        return self.conn.dialect

    def execute(self, statement: Any, parameters: Any = None) -> sa.CursorResult[Any]:
        return self.conn.execute(statement, parameters)

    def scalar(self, statement: Any) -> Any:
        return self.conn.scalar(statement)

    def scalars(self, statement: Any) -> sa.ScalarResult[Any]:
        return self.conn.scalars(statement)

    def unknown_node(self, name: str) -> InputError:
        names = list(self.scalars(sa.select(t.nodes.c.name)))
        hint = difflib.get_close_matches(name, names, n=1)
        extra = f"; did you mean {hint[0]!r}?" if hint else ""
        return InputError(f"no such node{extra}", node=name)

    def node_id(self, name: str) -> int:
        node_id = self.scalar(sa.select(t.nodes.c.id).where(t.nodes.c.name == name))
        if node_id is None:
            raise self.unknown_node(name)
        return int(node_id)

    def node_ids(self, names: Sequence[str]) -> dict[str, int]:
        rows = self.execute(
            sa.select(t.nodes.c.name, t.nodes.c.id).where(t.nodes.c.name.in_(list(names)))
        )
        found = {row.name: int(row.id) for row in rows}
        for name in names:
            if name not in found:
                raise self.unknown_node(name)
        return found

    def event(
        self,
        node_id: int,
        kind: str,
        message: str,
        *,
        actor: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        """Append to a node's history, inside this transaction. A URL in the
        message or data is stored with its secrets masked
        (:func:`~bmaas.secrets.mask_url`): the store never holds them."""
        self.events([(node_id, kind, message)], actor=actor, data=data)

    def events(
        self,
        lines: Sequence[tuple[int, str, str]],
        *,
        actor: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        """Append ``(node_id, kind, message)`` lines to the history in one
        INSERT (a prepared statement: building and hashing one per line was
        most of an event's write, issue 46)."""
        same = {"at": self.now(), "actor": actor, "data": mask(data or {})}
        rows = [
            {"node_id": i, "kind": kind, "message": mask_urls(text), **same}
            for i, kind, text in lines
        ]
        if rows:
            self.execute(_INSERT_EVENT, rows)


#: the history's INSERT, built once: SQLAlchemy keeps a statement's cache
#: key, so running it again costs its parameters only
_INSERT_EVENT = t.node_events.insert()


class Database:
    """The engine and the clock the repositories share."""

    def __init__(self, engine: Engine, *, clock: Callable[[], float] = time.time) -> None:
        self.engine = engine
        #: wall-clock seconds: leases and timestamps cross processes and hosts
        self.clock = clock

    @property
    def url(self) -> str:
        """The database URL, password hidden."""
        return self.engine.url.render_as_string(hide_password=True)

    def now(self) -> float:
        return float(self.clock())

    @contextlib.contextmanager
    def _transaction(self, write: bool) -> Iterator[Tx]:
        try:
            with self.engine.connect() as conn:
                if write:
                    conn.execution_options(**{WRITE_OPTION: True})
                with conn.begin():
                    yield Tx(conn, self.clock)
        except sa.exc.IntegrityError:
            raise
        except sa.exc.DBAPIError as exc:
            detail = str(exc.orig) if exc.orig is not None else type(exc).__name__
            raise StoreError(f"{self.url}: {detail}", cause=exc) from exc
        except sa.exc.TimeoutError as exc:  # every pooled connection busy (a server's pool)
            raise StoreError(f"{self.url}: no free database connection ({exc})", cause=exc) from exc

    def write(self) -> contextlib.AbstractContextManager[Tx]:
        return self._transaction(True)

    def read(self) -> contextlib.AbstractContextManager[Tx]:
        return self._transaction(False)


# -- owner lookups every table needs (ports and claims check a lease is alive) --


def owner_row(row: sa.Row[Any]) -> Owner:
    m = row._mapping
    return Owner(
        id=m["id"],
        kind=OwnerKind(m["kind"]),
        name=m["name"],
        parent_id=m["parent_id"],
        holder=m["holder"],
        lease_expires_at=m["lease_expires_at"],
        data=dict(m["data"]),
        created_at=m["created_at"],
    )


def owner_in(tx: Tx, owner_id: str) -> Owner:
    row = tx.execute(sa.select(t.owners).where(t.owners.c.id == owner_id)).first()
    if row is None:
        raise LeaseLost("is gone (reclaimed or deleted)", owner=owner_id)
    return owner_row(row)


def require_alive(tx: Tx, owner_id: str) -> sa.Row[Any]:
    o = t.owners
    row = tx.execute(sa.select(o).where(o.c.id == owner_id)).first()
    if row is None:
        raise LeaseLost("is gone (reclaimed or deleted)", owner=owner_id)
    if row.lease_expires_at is not None and row.lease_expires_at <= tx.now():
        raise LeaseLost("lease expired", owner=owner_id)
    return row
