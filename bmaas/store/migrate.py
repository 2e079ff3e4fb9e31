"""Schema migrations (Alembic), run programmatically: no ``alembic.ini``.

The migration scripts ship inside the package (``bmaas/store/migrations``), so
``bmaas db upgrade`` works from an installed wheel. Alembic always runs on a
connection bmaas opened, inside bmaas's own write transaction, so two
processes that find a fresh database at once cannot both create the tables.

Alembic is imported only to migrate: every command checks the schema
revision on start, and importing Alembic (about a third of a second) for a
one-row read would be most of ``bmaas node list``'s time. The revision is
read with one query, and the head from the scripts' own ``revision`` lines
(a unit test holds both against Alembic's answer).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlalchemy as sa
    from alembic.config import Config

__all__ = ["MIGRATIONS", "current_revision", "head_revision", "known_revision", "run_upgrade"]

MIGRATIONS = Path(__file__).with_name("migrations")


_REVISION = re.compile(r"^(down_)?revision\b[^=]*=\s*(None|[\"']([^\"']+)[\"'])", re.MULTILINE)
VERSION_TABLE = "alembic_version"


def _config(connection: sa.Connection | None = None, key_file: Path | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        cfg.attributes["connection"] = connection
    # the store's key file, for a migration that seals passwords (0003)
    cfg.attributes["key_file"] = key_file
    return cfg


@functools.cache
def _revisions() -> dict[str, str | None]:
    """revision -> down_revision, from the scripts' text (no Alembic import)."""
    graph: dict[str, str | None] = {}
    for script in sorted((MIGRATIONS / "versions").glob("[0-9]*.py")):
        found = {m.group(1) or "": m.group(3) for m in _REVISION.finditer(script.read_text())}
        if "" in found and found[""] is not None:
            graph[found[""]] = found.get("down_")
    return graph


def head_revision() -> str:
    """The newest migration this bmaas ships (the one nothing revises)."""
    graph = _revisions()
    heads = set(graph) - {down for down in graph.values() if down is not None}
    assert len(heads) == 1, f"bmaas ships one linear history of migrations, not {heads}"
    return heads.pop()


def known_revision(revision: str) -> bool:
    """Whether this bmaas ships ``revision``; a database at an unknown one was
    migrated by a newer bmaas, and ``bmaas db upgrade`` cannot help."""
    return revision in _revisions()


def current_revision(connection: sa.Connection) -> str | None:
    """The revision the database is at; ``None`` for a database never migrated
    (what Alembic's ``MigrationContext.get_current_revision`` answers)."""
    import sqlalchemy as sa  # here: reading the head revision needs no SQLAlchemy

    if not sa.inspect(connection).has_table(VERSION_TABLE):
        return None
    # a constant table name, no input: S608 does not apply
    query = sa.text(f"SELECT version_num FROM {VERSION_TABLE}")  # noqa: S608
    rows = connection.execute(query).scalars()
    versions = list(rows)
    if len(versions) > 1:
        raise ValueError(f"{VERSION_TABLE} has several heads: {versions}")
    return versions[0] if versions else None


def run_upgrade(
    connection: sa.Connection, revision: str = "head", *, key_file: Path | None = None
) -> None:
    """Upgrade inside the caller's transaction (the caller commits).
    ``key_file``: the store's key (:mod:`bmaas.sealed`; ``None``: the default)."""
    from alembic import command

    command.upgrade(_config(connection, key_file), revision)
