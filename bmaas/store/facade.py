"""The :class:`Store` class: its repositories over one engine, opening and
schema checks. Imported lazily through :mod:`bmaas.store` (SQLAlchemy is
loaded only when a store is used)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from bmaas import __version__
from bmaas.deadline import Deadline
from bmaas.store import locks
from bmaas.store.base import Database
from bmaas.store.engine import BUSY_TIMEOUT, make_engine, resolve_url
from bmaas.store.errors import SchemaOutOfDate
from bmaas.store.health import HealthRepo
from bmaas.store.keys import KeysRepo
from bmaas.store.lifecycle import LifecycleSteps
from bmaas.store.migrate import current_revision, head_revision, known_revision, run_upgrade
from bmaas.store.nodes import NodesRepo
from bmaas.store.owners import OwnersRepo
from bmaas.store.ports import PortsRepo
from bmaas.store.shares import SharesRepo

__all__ = ["Store"]


class Store:
    """The bmaas state store: its repositories over one engine. See the
    module docstring for the parts."""

    def __init__(
        self,
        engine: Engine,
        *,
        clock: Callable[[], float] = time.time,
        key_file: Path | None = None,
    ) -> None:
        self.db = Database(engine, clock=clock)
        self.keys = KeysRepo(self.db, key_file=key_file)
        self.nodes = NodesRepo(self.db, keys=self.keys)
        self.health = HealthRepo(self.db)
        self.owners = OwnersRepo(self.db)
        self.ports = PortsRepo(self.db)
        self.lifecycle = LifecycleSteps(self.db)
        self.shares = SharesRepo(self.db)

    @property
    def engine(self) -> Engine:
        return self.db.engine

    @property
    def clock(self) -> Callable[[], float]:
        """Wall-clock seconds: leases and timestamps cross processes and hosts."""
        return self.db.clock

    @property
    def url(self) -> str:
        """The database URL, password hidden."""
        return self.db.url

    def close(self) -> None:
        self.db.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def open(
        cls,
        db: str | None = None,
        *,
        clock: Callable[[], float] = time.time,
        check_schema: bool = True,
        busy_timeout: float = BUSY_TIMEOUT,
        deadline: Deadline | None = None,
        create: bool = False,
        key_file: Path | None = None,
    ) -> Store:
        """Open the store at ``db`` (a path or URL; default ``BMAAS_DB`` or the
        per-user file). A missing SQLite file raises ``NoDatabase`` ("no
        database at X; run `bmaas enroll FILE`"), as every CLI command but
        ``enroll`` and ``db upgrade`` does: a typo in a path never leaves an
        empty fleet behind. ``create=True`` (code that wants a new store: a
        lab, a test) creates it at the newest schema. An existing database at
        another revision raises ``SchemaOutOfDate`` unless
        ``check_schema=False`` (``bmaas db upgrade``, ``bmaas status check``).
        Every connect and statement takes at most ``busy_timeout`` seconds and
        ends by ``deadline`` (a command's budget; a silent or locked database
        is a ``StoreError`` by then). ``key_file``: the key that seals
        inline passwords (default ``BMAAS_KEY_FILE``, else
        ``~/.config/bmaas/store.key``; :mod:`bmaas.sealed`)."""
        engine = make_engine(
            resolve_url(db), busy_timeout=busy_timeout, deadline=deadline, create=create
        )
        store = cls(engine, clock=clock, key_file=key_file)
        if check_schema:
            try:
                store.ensure_schema()
            except BaseException:
                store.close()
                raise
        return store

    def schema_revision(self) -> str | None:
        """The revision the database is at (``None``: never migrated)."""
        with self.db.read() as tx:
            return current_revision(tx.conn)

    def ensure_schema(self) -> None:
        """Create a fresh database at head; refuse one at another revision."""
        head = head_revision()
        with self.db.read() as tx:
            if current_revision(tx.conn) == head:
                return
        with self.db.write() as tx:
            # Re-check under the write lock: another process may have just created it.
            current = current_revision(tx.conn)
            if current == head:
                return
            if current is None and not sa.inspect(tx.conn).has_table("nodes"):
                run_upgrade(tx.conn, "head", key_file=self.keys.key_file)
                return
        raise self._out_of_date(current, head)

    def _out_of_date(self, current: str | None, head: str) -> SchemaOutOfDate:
        if current is not None and not known_revision(current):
            # migrated by a newer bmaas: `bmaas db upgrade` cannot help, and
            # nothing here downgrades (docs/releases.md, upgrading the store)
            message = (
                f"{self.url} is at schema {current}, which bmaas {__version__} does not "
                "know (a newer bmaas migrated it): upgrade bmaas, never downgrade the database"
            )
        else:
            message = (
                f"{self.url} is at schema {current or 'none'}, this bmaas needs {head}: "
                "run `bmaas db upgrade`"
            )
        return SchemaOutOfDate(message, current=current, head=head)

    def upgrade(self, deadline: Deadline, revision: str = "head") -> tuple[str | None, str | None]:
        """Migrate to ``revision``; returns ``(before, after)``. A database at
        a revision this bmaas does not ship raises ``SchemaOutOfDate``. A
        store-wide change: it holds the store's lock and the key file's
        directory (a migration may seal passwords) against a second upgrade
        or a key rotation, waiting for one at most until ``deadline``."""
        also = [self.keys.path.parent]
        with locks.store_wide(self.db, deadline, what="the store's schema", also=also):
            return self._upgrade(revision)

    def _upgrade(self, revision: str) -> tuple[str | None, str | None]:
        with self.db.write() as tx:
            before = current_revision(tx.conn)
            if before is not None and not known_revision(before):
                raise self._out_of_date(before, head_revision())
            run_upgrade(tx.conn, revision, key_file=self.keys.key_file)
            return before, current_revision(tx.conn)
