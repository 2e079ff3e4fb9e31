"""The :class:`Store` class: the parts (mixins) put together, opening and
schema checks. Imported lazily through :mod:`bmaas.store` (SQLAlchemy is
loaded only when a store is used)."""

from __future__ import annotations

import time
from collections.abc import Callable

import sqlalchemy as sa

from bmaas.deadline import Deadline
from bmaas.store.engine import BUSY_TIMEOUT, make_engine, resolve_url
from bmaas.store.errors import SchemaOutOfDate
from bmaas.store.lifecycle import LifecycleMixin
from bmaas.store.migrate import current_revision, head_revision, run_upgrade
from bmaas.store.shares import SharesMixin

__all__ = ["Store"]


class Store(LifecycleMixin, SharesMixin):
    """The bmaas state store. See the module docstring for its parts."""

    @classmethod
    def open(
        cls,
        db: str | None = None,
        *,
        clock: Callable[[], float] = time.time,
        check_schema: bool = True,
        busy_timeout: float = BUSY_TIMEOUT,
        deadline: Deadline | None = None,
        create: bool = True,
    ) -> Store:
        """Open the store at ``db`` (a path or URL; default ``BMAAS_DB`` or the
        per-user file). A new, empty database is created at the newest schema;
        an existing one at another revision raises ``SchemaOutOfDate`` unless
        ``check_schema=False`` (``bmaas db upgrade``, ``bmaas status check``).
        ``create=False``: a missing SQLite file raises ``NoDatabase``.
        Every connect and statement takes at most ``busy_timeout`` seconds and
        ends by ``deadline`` (a command's budget; a silent or locked database
        is a ``StoreError`` by then)."""
        engine = make_engine(
            resolve_url(db), busy_timeout=busy_timeout, deadline=deadline, create=create
        )
        store = cls(engine, clock=clock)
        if check_schema:
            try:
                store.ensure_schema()
            except BaseException:
                store.close()
                raise
        return store

    def schema_revision(self) -> str | None:
        """The revision the database is at (``None``: never migrated)."""
        with self._read() as conn:
            return current_revision(conn)

    def ensure_schema(self) -> None:
        """Create a fresh database at head; refuse one at another revision."""
        head = head_revision()
        with self._read() as conn:
            if current_revision(conn) == head:
                return
        with self._write() as conn:
            # Re-check under the write lock: another process may have just created it.
            current = current_revision(conn)
            if current == head:
                return
            if current is None and not sa.inspect(conn).has_table("nodes"):
                run_upgrade(conn, "head")
                return
        raise SchemaOutOfDate(
            f"{self.url} is at schema {current or 'none'}, this bmaas needs {head}: "
            "run `bmaas db upgrade`",
            current=current,
            head=head,
        )

    def upgrade(self, revision: str = "head") -> tuple[str | None, str | None]:
        """Migrate to ``revision``; returns ``(before, after)``."""
        with self._write() as conn:
            before = current_revision(conn)
            run_upgrade(conn, revision)
            return before, current_revision(conn)
