"""Where the store is: ``--db``, else ``BMAAS_DB``, else the per-user file.

Plain Python (no SQLAlchemy), so read-only commands can find the database
without loading the store's engine (:mod:`bmaas.store.lite`)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

__all__ = ["ENV_VAR", "default_db_path", "resolve_url"]

ENV_VAR = "BMAAS_DB"


def default_db_path() -> Path:
    """``~/.local/share/bmaas/bmaas.db`` on Linux (per platformdirs)."""
    return platformdirs.user_data_path("bmaas") / "bmaas.db"


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
