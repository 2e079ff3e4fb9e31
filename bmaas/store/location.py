"""Where the store is: ``--db``, else ``BMAAS_DB``, else the per-user file.

Plain Python (no SQLAlchemy), so read-only commands can find the database
without loading the store's engine (:mod:`bmaas.store.lite`)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from bmaas.home import user_dir

__all__ = ["ENV_VAR", "default_db_path", "private_file_problem", "resolve_url"]

ENV_VAR = "BMAAS_DB"


def default_db_path() -> Path:
    """``~/.local/share/bmaas/bmaas.db`` on Linux (per platformdirs), or
    ``$BMAAS_HOME/bmaas.db`` (:mod:`bmaas.home`)."""
    return user_dir("data") / "bmaas.db"


def resolve_url(db: str | os.PathLike[str] | None = None) -> str:
    """A SQLAlchemy URL from ``--db``, else ``BMAAS_DB``, else the per-user file.

    Anything with ``://`` is taken as a URL; anything else as a file path.
    """
    raw = os.fspath(db) if db is not None else (os.environ.get(ENV_VAR) or "")
    if not raw:
        raw = os.fspath(default_db_path())
    if "://" in raw:
        return raw
    return "sqlite:///" + os.path.abspath(os.path.expanduser(raw))


#: the files SQLite keeps beside a database: each holds its data too
_SIDECARS = ("", "-wal", "-shm", "-journal")


def private_file_problem(path: Path) -> str | None:
    """Why the SQLite database at ``path`` (or its -wal, -shm or -journal
    file) must not be used, in one line; ``None`` when it is fine or absent.

    Refused, never repaired: a symbolic link (the store is written where it
    is named, not wherever a link planted beside it points), a file another
    user owns, and a file others may read or write (mode & 0o077). A mode
    that was set on purpose (a group sharing one file) is the operator's to
    change, with the command the line names: bmaas changing it would lock the
    group out without a word, and the store holds what others must not
    read (sealed passwords, the fleet's addresses and history)."""
    for suffix in _SIDECARS:
        file = path.with_name(path.name + suffix)
        try:
            info = os.lstat(file)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return f"cannot use database {file}: {exc.strerror}"
        if stat.S_ISLNK(info.st_mode):
            return (
                f"database {file} is a symbolic link: name the real file "
                "(bmaas never writes the store through a link)"
            )
        if not stat.S_ISREG(info.st_mode):
            return f"database {file} is not a regular file"
        if info.st_uid != os.geteuid():
            return f"database {file} belongs to another user (uid {info.st_uid})"
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            return (
                f"database {file} can be read or written by others (mode {mode:04o}): "
                f"chmod 600 {file}"
            )
    return None
