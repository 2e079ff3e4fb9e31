"""node_leftovers: what a failed attempt left on a node (issue 49).

``nodes.leftovers`` (JSON, NULL when clean): the virtual media bmaas
inserted, the boot override it set and the power it may have left on, when
the attempt's cleanup could not undo them (a BMC that did not answer). A
node that has them is never claimed; the next command or the sync cleans
it when its BMC answers again.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("leftovers", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_column("leftovers")
