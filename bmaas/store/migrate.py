"""Schema migrations (Alembic), run programmatically: no ``alembic.ini``.

The migration scripts ship inside the package (``bmaas/store/migrations``), so
``bmaas db upgrade`` works from an installed wheel. Alembic always runs on a
connection bmaas opened, inside bmaas's own write transaction, so two
processes that find a fresh database at once cannot both create the tables.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError

__all__ = ["MIGRATIONS", "current_revision", "head_revision", "known_revision", "run_upgrade"]

MIGRATIONS = Path(__file__).with_name("migrations")


def _config(connection: sa.Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    """The newest migration this bmaas ships."""
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None, "bmaas ships at least one migration"
    return head


def known_revision(revision: str) -> bool:
    """Whether this bmaas ships ``revision``; a database at an unknown one was
    migrated by a newer bmaas, and ``bmaas db upgrade`` cannot help."""
    try:
        return ScriptDirectory.from_config(_config()).get_revision(revision) is not None
    except CommandError:
        return False


def current_revision(connection: sa.Connection) -> str | None:
    """The revision the database is at; ``None`` for a database never migrated."""
    return MigrationContext.configure(connection).get_current_revision()


def run_upgrade(connection: sa.Connection, revision: str = "head") -> None:
    """Upgrade inside the caller's transaction (the caller commits)."""
    command.upgrade(_config(connection), revision)
