"""sealed_passwords: inline BMC passwords encrypted at rest.

Every inline password in ``nodes.driver_info`` is sealed with the store's
key (:mod:`bmaas.sealed`: ``BMAAS_KEY_FILE``, else
``~/.config/bmaas/store.key``, made ``0600`` if there is none); ``${ENV}``
and ``file:`` references are no secret and stay as they are. No table
changes. Downgrading opens them again (it needs the same key).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import op

from bmaas import sealed

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_NODES = sa.table(
    "nodes",
    sa.column("id", sa.Integer()),
    sa.column("driver_info", sa.JSON()),
)


def _key_file() -> Path | None:
    """The store's key file, as the Store that runs this migration names it."""
    config = op.get_context().config
    key_file = config.attributes.get("key_file") if config is not None else None
    return Path(key_file) if key_file else None


def _rows() -> list[tuple[int, dict[str, Any]]]:
    conn = op.get_bind()
    return [(r.id, dict(r.driver_info or {})) for r in conn.execute(sa.select(_NODES))]


def upgrade() -> None:
    rows = _rows()
    todo = [(node_id, info) for node_id, info in rows if sealed.needs_sealing(info)]
    if not todo:
        return  # a new store, or one with references only: no key needed
    ring = sealed.keyring(
        path=_key_file(), create=not sealed.sealed_key_ids(info for _, info in rows)
    )
    conn = op.get_bind()
    for node_id, info in todo:
        conn.execute(
            _NODES.update()
            .where(_NODES.c.id == node_id)
            .values(driver_info=sealed.seal_driver_info(info, ring))
        )


def downgrade() -> None:
    rows = [(i, info) for i, info in _rows() if sealed.sealed_key_ids([info])]
    if not rows:
        return
    ring = sealed.keyring(path=_key_file())
    conn = op.get_bind()
    for node_id, info in rows:
        opened = {
            key: ring.unseal(value, field=f"driver_info.{key}").reveal()
            if sealed.is_sealed(value)
            else value
            for key, value in info.items()
        }
        conn.execute(_NODES.update().where(_NODES.c.id == node_id).values(driver_info=opened))
