"""The store's plumbing: transactions, time, the node-name lookup, events.

Every public store method is one short transaction, opened here:
:meth:`StoreBase._write` (``BEGIN IMMEDIATE`` on SQLite) for anything that
changes state, :meth:`StoreBase._read` for the rest. No method holds a
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
from bmaas.store.errors import StoreError

__all__ = ["StoreBase"]

LOG = logging.getLogger(__name__)


class StoreBase:
    """Engine, clock and transaction helpers shared by the store's parts."""

    def __init__(self, engine: Engine, *, clock: Callable[[], float] = time.time) -> None:
        self.engine = engine
        #: wall-clock seconds: leases and timestamps cross processes and hosts
        self.clock = clock

    @property
    def url(self) -> str:
        """The database URL, password hidden."""
        return self.engine.url.render_as_string(hide_password=True)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> StoreBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _now(self) -> float:
        return float(self.clock())

    # -- transactions ------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self, write: bool) -> Iterator[sa.Connection]:
        try:
            with self.engine.connect() as conn:
                if write:
                    conn.execution_options(**{WRITE_OPTION: True})
                with conn.begin():
                    yield conn
        except sa.exc.IntegrityError:
            raise
        except sa.exc.DBAPIError as exc:
            detail = str(exc.orig) if exc.orig is not None else type(exc).__name__
            raise StoreError(f"{self.url}: {detail}", cause=exc) from exc

    def _write(self) -> contextlib.AbstractContextManager[sa.Connection]:
        return self._transaction(True)

    def _read(self) -> contextlib.AbstractContextManager[sa.Connection]:
        return self._transaction(False)

    # -- shared lookups ------------------------------------------------------------

    def _unknown_node(self, conn: sa.Connection, name: str) -> InputError:
        names = list(conn.scalars(sa.select(t.nodes.c.name)))
        hint = difflib.get_close_matches(name, names, n=1)
        extra = f"; did you mean {hint[0]!r}?" if hint else ""
        return InputError(f"no such node{extra}", node=name)

    def _node_id(self, conn: sa.Connection, name: str) -> int:
        node_id = conn.scalar(sa.select(t.nodes.c.id).where(t.nodes.c.name == name))
        if node_id is None:
            raise self._unknown_node(conn, name)
        return int(node_id)

    def _node_ids(self, conn: sa.Connection, names: Sequence[str]) -> dict[str, int]:
        rows = conn.execute(
            sa.select(t.nodes.c.name, t.nodes.c.id).where(t.nodes.c.name.in_(list(names)))
        )
        found = {row.name: int(row.id) for row in rows}
        for name in names:
            if name not in found:
                raise self._unknown_node(conn, name)
        return found

    def _event(
        self,
        conn: sa.Connection,
        node_id: int,
        kind: str,
        message: str,
        *,
        actor: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        """Append to a node's history, inside the caller's transaction. A URL
        in the message or data is stored with its secrets masked
        (:func:`~bmaas.secrets.mask_url`): the store never holds them."""
        conn.execute(
            t.node_events.insert().values(
                node_id=node_id,
                at=self._now(),
                kind=kind,
                actor=actor,
                message=mask_urls(message),
                data=mask(data or {}),
            )
        )
