"""Where the database is and how bmaas talks to it.

SQLite by default, one file per user (``platformdirs``); ``--db`` or
``BMAAS_DB`` names another file or any SQLAlchemy URL
(``postgresql+psycopg://bmaas@db/bmaas``).

SQLite is configured for several bmaas processes on one file:

* **WAL**: readers never block the writer, the writer never blocks readers;
* **busy timeout**: a writer waits for the lock instead of failing at once;
* **one writer queue a process** (:mod:`bmaas.store.writers`): the threads
  of one process wait for their turn there before ``BEGIN IMMEDIATE``, one
  that has waited long served first (SQLite's busy handler polls and queues
  no one: under load a thread lost every draw for the whole busy timeout,
  issue 50);
* **BEGIN IMMEDIATE** for write transactions: the write lock is taken up front.
  A deferred transaction that reads and then writes cannot wait for the lock
  (SQLite returns SQLITE_BUSY at once to avoid a deadlock), which is exactly
  the read-modify-write a claim or a sync update is. Read transactions stay
  deferred.

The file is created ``0600`` in a ``0700`` folder (never through a link),
and an existing one that is a symbolic link, another user's, or readable or
writable by others is refused with one line naming the fix
(:func:`private_file_problem`): the store holds the fleet's addresses and
its passwords (sealed, :mod:`bmaas.sealed`).

**Bounded** (like every bmaas edge): a command's :class:`~bmaas.deadline.Deadline`
(``make_engine(deadline=...)``) bounds every connect and every statement,
else :data:`BUSY_TIMEOUT` seconds each. A database that accepts TCP and
never answers blocked ``bmaas --db postgresql+psycopg://...`` for 130 s
before (libpq's default: no connect timeout); now it is a
:class:`~bmaas.store.errors.StoreError` by the deadline:

* **PostgreSQL**: ``connect_timeout`` (libpq counts whole seconds, at least
  2: the time left is rounded down, so a connect gives up before the
  deadline, except when under 2 s were left), ``statement_timeout`` and
  ``lock_timeout`` at connect, ``SET LOCAL statement_timeout`` at each
  transaction's start from what is left then, and TCP keepalives so a peer
  that vanished is noticed;
* **SQLite**: the busy timeout (how long a writer waits for another
  process's lock) is what is left, set again at each transaction's start.

Once the deadline has passed, each connect or statement still gets
:data:`GRACE` (1 s): a command that spent its budget on BMCs records what it
found (a sync pass's thousands of reads take more than a second to write).
The grace is each statement's, not the command's: a silent database fails
the first one within the deadline + 1 s (a PostgreSQL connect started with
under 2 s left: + 2 s, libpq's minimum), and a command that still has many
writes to make after its deadline (a deploy's failed requests released one
by one) may end that many short writes late.
"""

from __future__ import annotations

import logging
import math
import os
import sqlite3
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

from bmaas.deadline import Deadline
from bmaas.faults import InputError
from bmaas.store.errors import NoDatabase
from bmaas.store.location import default_db_path, private_file_problem, resolve_url
from bmaas.store.writers import WriterQueue

__all__ = [
    "BUSY_TIMEOUT",
    "WRITE_OPTION",
    "default_db_path",
    "make_engine",
    "private_file_problem",
    "resolve_url",
]

LOG = logging.getLogger(__name__)

#: seconds a writer waits for another process's write lock, and the most one
#: connect or statement may take, when no command deadline is shorter
BUSY_TIMEOUT = 30.0
#: seconds a connect or statement still gets once the command's deadline has
#: passed: a command that spent its whole budget on BMCs records what it found
GRACE = 1.0
#: TCP keepalives for PostgreSQL: a server host that vanished is noticed in ~15 s
_PG_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 5,
    "keepalives_count": 2,
}
#: execution option that marks a connection's next transaction as a write
WRITE_OPTION = "bmaas_write"
#: a connection's ``info`` key: its transaction holds this process's writer turn
_WRITER = "bmaas_writer_turn"


def _prepare_sqlite_file(url: sa.URL, *, create: bool) -> None:
    database = url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)
    if path.is_dir() and not path.is_symlink():
        raise InputError(f"{path} is a directory, not a database file", field="--db")
    problem = private_file_problem(path)
    if problem:
        raise InputError(problem, field="--db")
    if not create and not path.exists():
        # Read-only commands and --dry-run never leave an empty database behind.
        raise NoDatabase(
            f"no database at {path}; run `bmaas enroll FILE` "
            "(from Python, Store.open(..., create=True) makes a new one)"
        )
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700)
    if not path.exists():
        # Create it private before SQLite does (SQLite's default honours umask;
        # its -wal and -shm files copy the database file's mode). O_EXCL and
        # O_NOFOLLOW: never through a link planted meanwhile.
        flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            problem = private_file_problem(path)  # another process made it first
            if problem:
                raise InputError(problem, field="--db") from None
        else:
            os.close(fd)


#: DBAPI modules SQLAlchemy loads per dialect, and the package that provides each
_DBAPI_PACKAGES = {
    "psycopg": "psycopg[binary]",
    "psycopg2": "psycopg2-binary",
    "pymysql": "pymysql",
    "MySQLdb": "mysqlclient",
    "asyncpg": "asyncpg",
}


def _dialect_problem(parsed: sa.URL, exc: Exception) -> InputError:
    """One line for a URL SQLAlchemy cannot use: an unknown dialect, or one
    whose DBAPI package is missing (named, with the command that installs it)."""
    module = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    if module:
        package = _DBAPI_PACKAGES.get(module.split(".")[0], module.split(".")[0])
        hint = ""
        if parsed.get_backend_name() == "postgresql" and module.split(".")[0] != "psycopg":
            hint = " (or use postgresql+psycopg://, the driver bmaas is tested with)"
        return InputError(
            f"{parsed.drivername}:// needs the Python package {package!r}, which is not "
            f"installed: pip install '{package}'{hint}",
            field="--db",
        )
    return InputError(
        f"unknown database type {parsed.drivername!r}: give a SQLite path, sqlite:///PATH "
        "or postgresql+psycopg://USER@HOST/DB",
        field="--db",
    )


def _left(deadline: Deadline | None, cap: float) -> float:
    """Seconds one connect or statement may take: what ``deadline`` has
    left, at least :data:`GRACE` and at most ``cap``."""
    if deadline is None:
        return cap
    return min(cap, max(GRACE, deadline.left()))


def make_engine(
    url: str,
    *,
    busy_timeout: float = BUSY_TIMEOUT,
    deadline: Deadline | None = None,
    echo: bool = False,
    create: bool = True,
) -> Engine:
    """An engine for ``url``, with SQLite set up for several processes.
    ``create=False``: a missing SQLite file is :class:`NoDatabase`, not created.
    Every connect and statement ends within ``busy_timeout`` seconds and by
    ``deadline`` (the command's, when it has one)."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise InputError(f"not a database URL or path: {exc}", field="--db") from None
    except ValueError as exc:  # e.g. a port that is not a number
        raise InputError(f"not a database URL or path: {exc}", field="--db") from None
    if parsed.get_backend_name() != "sqlite":
        try:
            # pool_pre_ping: a server restart should cost one reconnect, not an error.
            engine = sa.create_engine(parsed, pool_pre_ping=True, echo=echo)
        except (ImportError, sa.exc.NoSuchModuleError, sa.exc.ArgumentError) as exc:
            raise _dialect_problem(parsed, exc) from None
        if parsed.get_backend_name() == "postgresql":
            _bound_postgresql(engine, busy_timeout, deadline)
        return engine
    _prepare_sqlite_file(parsed, create=create)
    engine = sa.create_engine(
        parsed,
        echo=echo,
        connect_args={"timeout": busy_timeout, "check_same_thread": False},
        # A file has no connection limit: every worker thread gets its own
        # connection (SQLite's lock and busy_timeout order the writes). With
        # SQLAlchemy's default cap (5 + 10) a `bmaas deploy --workers 64` on a
        # loaded runner waited 30 s for a connection and failed untyped.
        max_overflow=-1,
    )
    _configure_sqlite(engine, busy_timeout, deadline)
    return engine


def _bound_postgresql(engine: Engine, cap: float, deadline: Deadline | None) -> None:
    """connect_timeout, statement and lock timeouts from the time left."""

    @event.listens_for(engine, "do_connect")
    def _on_do_connect(_dialect: Any, _record: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
        left = _left(deadline, cap)
        # libpq counts whole seconds and treats anything under 2 as 2: rounded
        # down, so a connect ends before the deadline (unless under 2 s are left).
        # psycopg gives *each* attempt (every host, every address a name
        # resolves to: "localhost" is ::1 and 127.0.0.1) the whole timeout,
        # so the time left is shared between them.
        cparams["connect_timeout"] = max(2, math.floor(left / _attempts(cparams)))
        for key, value in _PG_KEEPALIVES.items():
            cparams.setdefault(key, value)
        ms = max(1, int(left * 1000))
        bound = f"-c statement_timeout={ms} -c lock_timeout={ms}"
        cparams["options"] = f"{cparams.get('options', '')} {bound}".strip()

    if deadline is None:
        return

    @event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        left = _left(deadline, cap)
        conn.exec_driver_sql(f"SET LOCAL statement_timeout = {max(1, int(left * 1000))}")


def _attempts(cparams: dict[str, Any]) -> int:
    """How many connection attempts psycopg will make for ``cparams``: one
    per host and per address each host name resolves to (1 if that cannot
    be told: the connect then fails with psycopg's own message)."""
    try:
        from psycopg.conninfo import conninfo_attempts

        return max(1, len(conninfo_attempts(dict(cparams))))
    except Exception:  # unresolvable, or no psycopg: the connect itself says why
        return 1


def _configure_sqlite(engine: Engine, busy_timeout: float, deadline: Deadline | None) -> None:
    @event.listens_for(engine, "do_connect")
    def _on_do_connect(_dialect: Any, _record: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
        cparams["timeout"] = _left(deadline, busy_timeout)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control from the sqlite3 module so BEGIN is ours.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        try:
            wait = _left(deadline, busy_timeout)
            cursor.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")  # durable enough under WAL
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    writers = WriterQueue()  # this process's writers queue here, processes at SQLite's lock

    @event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        if write:  # this process's turn first (each wait at most the busy timeout)
            wait = _left(deadline, busy_timeout)
            if not writers.acquire(wait):
                locked = sqlite3.OperationalError(
                    f"database is locked: this process's other writers held it for {wait:g}s"
                )
                raise sa.exc.OperationalError("BEGIN IMMEDIATE", None, locked)
        try:
            if deadline is not None:  # a lock wait ends by the command's deadline
                wait = _left(deadline, busy_timeout)
                conn.exec_driver_sql(f"PRAGMA busy_timeout = {int(wait * 1000)}")
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
        except BaseException:
            if write:
                writers.release()
            raise
        if write:
            conn.info[_WRITER] = True

    @event.listens_for(engine, "commit")
    @event.listens_for(engine, "rollback")
    def _on_end(conn: sa.Connection) -> None:
        if conn.info.pop(_WRITER, False):
            writers.release()
