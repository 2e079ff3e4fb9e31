"""``store.locks``: an exclusive lock on a directory, held for a block, bounded by a Deadline.

Why a directory and not a ``*.lock`` file: the thing protected (the store's
key file, an SQLite database) is replaced by rename, and a lock file beside
it would be one more file left in a directory the user keeps private. A
``flock`` on the directory itself leaves nothing behind and, like every
``flock``, is dropped by the kernel when the process dies, however it dies,
so a killed ``bmaas db rotate-key`` never leaves a stale lock.

Why it is enough: bmaas is the only writer of these files, and every bmaas
writer takes the lock first. It is a same-host lock (``flock`` over NFS is not
to be trusted); what crosses hosts is the store's own lock
(:meth:`bmaas.store.base.Database.exclusive`), taken beside it.

Two paths in the same directory are locked once: ``flock`` locks belong to an
open file description, so a second ``open`` of the same directory in this
process would wait for the first for ever. Directories are locked in
``(st_dev, st_ino)`` order, so two processes locking the same pair never
deadlock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from bmaas.deadline import Deadline
from bmaas.store.errors import StoreError

if TYPE_CHECKING:
    from bmaas.store.base import Database, Tx

__all__ = ["LockBusy", "hold_shared", "locked_dirs", "store_wide"]

#: seconds between two looks at a lock another process holds
POLL = 0.05


class LockBusy(StoreError):
    """Another process held a store-wide lock past the command's deadline."""

    code = "lock_busy"
    summary = "held by another process"


@contextlib.contextmanager
def locked_dirs(
    dirs: Iterable[Path],
    deadline: Deadline,
    *,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[None]:
    """Hold an exclusive ``flock`` on each of ``dirs`` (each made ``0700``
    first if missing) for the block; waits for another holder at most until
    ``deadline``, then :class:`LockBusy` naming ``what`` and the directory."""
    fds: list[int] = []
    try:
        for path in _unique(dirs):
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
            fds.append(fd)
            _wait(fd, path, deadline, what, sleep)
        yield
    finally:
        for fd in reversed(fds):
            os.close(fd)  # closing the only descriptor drops its flock


def _unique(dirs: Iterable[Path]) -> list[Path]:
    seen: dict[tuple[int, int], Path] = {}
    for path in dirs:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = os.stat(path)
        seen.setdefault((info.st_dev, info.st_ino), path)
    return [seen[k] for k in sorted(seen)]


def _wait(
    fd: int, path: Path, deadline: Deadline, what: str, sleep: Callable[[float], None]
) -> None:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if not deadline.sleep(POLL, sleep):
                raise LockBusy(
                    f"another process is changing {what} (it holds the lock on {path}); "
                    "try again when it is done"
                ) from None


# -- the store's own lock ----------------------------------------------------------------

#: PostgreSQL advisory lock key for store-wide changes (``b"bmaas"`` as a number):
#: any constant works, as long as every bmaas agrees on it
STORE_LOCK_KEY = 0x626D616173


@contextlib.contextmanager
def store_wide(
    db: Database,
    deadline: Deadline,
    *,
    what: str,
    also: Iterable[Path] = (),
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[None]:
    """Hold the store's exclusive lock for a store-wide change (a key
    rotation, a schema upgrade), and the same-host locks on ``also`` (the
    key file's directory).

    * PostgreSQL: a session-level advisory lock on a connection of its own,
      held across the change's transactions and the file writes after its
      commit, so a second host sharing the store waits too. Writers that
      seal a password take it shared in their transaction
      (:func:`hold_shared`).
    * SQLite: an ``flock`` on the database's directory (an SQLite store is
      one host's; the file itself is never opened beside SQLite, whose POSIX
      locks another descriptor's ``close`` would drop). A sealing writer's
      ``BEGIN IMMEDIATE`` orders it against the change's transaction.
    """
    dirs = list(also)
    url = db.engine.url
    if url.get_backend_name() == "postgresql":
        with _pg_exclusive(db, deadline, what), locked_dirs(dirs, deadline, what=what, sleep=sleep):
            yield
        return
    database = url.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        dirs.append(Path(database).absolute().parent)
    with locked_dirs(dirs, deadline, what=what, sleep=sleep):
        yield


def hold_shared(tx: Tx) -> None:
    """Inside a write transaction that seals passwords: wait until no
    store-wide change holds the store's lock, and keep it from starting
    until this transaction ends (PostgreSQL; on SQLite ``BEGIN IMMEDIATE``
    already orders the two)."""
    if tx.conn.dialect.name == "postgresql":
        tx.conn.execute(sa.text("SELECT pg_advisory_xact_lock_shared(:k)"), {"k": STORE_LOCK_KEY})


@contextlib.contextmanager
def _pg_exclusive(db: Database, deadline: Deadline, what: str) -> Iterator[None]:
    try:
        conn = db.engine.connect()
    except sa.exc.DBAPIError as exc:
        raise StoreError(f"{db.url}: {exc.orig}", cause=exc) from exc
    with conn:
        try:
            ms = max(1, int(deadline.left() * 1000))
            conn.exec_driver_sql(f"SET LOCAL lock_timeout = {ms}")
            conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": STORE_LOCK_KEY})
            conn.commit()  # a session lock outlives the transaction that took it
        except sa.exc.DBAPIError as exc:
            conn.rollback()
            if getattr(exc.orig, "sqlstate", None) in _LOCK_WAIT_ENDED:
                raise LockBusy(
                    f"another process is changing {what} (it holds the store's lock on "
                    f"{db.url}); try again when it is done"
                ) from None
            raise StoreError(f"{db.url}: {exc.orig}", cause=exc) from exc
        try:
            yield
        finally:
            try:
                conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": STORE_LOCK_KEY})
                conn.commit()
            except sa.exc.DBAPIError:
                conn.invalidate()  # the session ends, and its lock with it


#: lock_not_available, query_canceled (a statement timeout)
_LOCK_WAIT_ENDED = {"55P03", "57014"}
