"""sync_shares: which sync worker reads which node.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sync_shares",
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.String(length=36), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["node_id"], ["nodes.id"], name=op.f("fk_sync_shares_node_id_nodes"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("node_id", name=op.f("pk_sync_shares")),
    )
    with op.batch_alter_table("sync_shares", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sync_shares_worker_id"), ["worker_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("sync_shares", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sync_shares_worker_id"))
    op.drop_table("sync_shares")
