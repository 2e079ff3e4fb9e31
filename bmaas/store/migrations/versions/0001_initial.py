"""Initial schema: nodes, owners, allocations, networks/segments/ports, events.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "networks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_networks")),
        sa.UniqueConstraint("name", name=op.f("uq_networks_name")),
    )
    op.create_table(
        "owners",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=True),
        sa.Column("parent_id", sa.String(length=36), nullable=True),
        sa.Column("holder", sa.String(length=255), nullable=True),
        sa.Column("lease_expires_at", sa.Float(), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["parent_id"], ["owners.id"], name=op.f("fk_owners_parent_id_owners")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_owners")),
    )
    with op.batch_alter_table("owners", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_owners_lease_expires_at"), ["lease_expires_at"], unique=False
        )

    op.create_table(
        "segments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("network_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("cidr", sa.String(length=64), nullable=False),
        sa.Column("gateway_ip", sa.String(length=64), nullable=True),
        sa.Column("allocation_pools", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["network_id"], ["networks.id"], name=op.f("fk_segments_network_id_networks")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_segments")),
        sa.UniqueConstraint("name", name=op.f("uq_segments_name")),
    )
    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("driver", sa.String(length=64), nullable=False),
        sa.Column("driver_info", sa.JSON(), nullable=False),
        sa.Column("resource_class", sa.String(length=255), nullable=True),
        sa.Column("properties", sa.JSON(), nullable=False),
        sa.Column("extra", sa.JSON(), nullable=False),
        sa.Column("segment_id", sa.Integer(), nullable=True),
        sa.Column("power_state", sa.String(length=32), nullable=False),
        sa.Column("power_state_at", sa.Float(), nullable=True),
        sa.Column("provision_state", sa.String(length=32), nullable=False),
        sa.Column("maintenance", sa.Boolean(), nullable=False),
        sa.Column("maintenance_reason", sa.Text(), nullable=True),
        sa.Column("maintenance_by", sa.String(length=255), nullable=True),
        sa.Column("maintenance_at", sa.Float(), nullable=True),
        sa.Column("fault", sa.String(length=64), nullable=True),
        sa.Column("fault_at", sa.Float(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("fault_count", sa.Integer(), nullable=False),
        sa.Column("good_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["segment_id"], ["segments.id"], name=op.f("fk_nodes_segment_id_segments")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nodes")),
        sa.UniqueConstraint("name", name=op.f("uq_nodes_name")),
    )
    op.create_table(
        "allocations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["node_id"], ["nodes.id"], name=op.f("fk_allocations_node_id_nodes")
        ),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["owners.id"], name=op.f("fk_allocations_owner_id_owners")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_allocations")),
        sa.UniqueConstraint("node_id", name=op.f("uq_allocations_node_id")),
    )
    with op.batch_alter_table("allocations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_allocations_owner_id"), ["owner_id"], unique=False)

    op.create_table(
        "node_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("actor", sa.String(length=255), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["node_id"], ["nodes.id"], name=op.f("fk_node_events_node_id_nodes"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_node_events")),
    )
    with op.batch_alter_table("node_events", schema=None) as batch_op:
        batch_op.create_index("ix_node_events_node_id_at", ["node_id", "at"], unique=False)

    op.create_table(
        "ports",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("network_id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=True),
        sa.Column("created_by", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=True),
        sa.Column("mac_address", sa.String(length=32), nullable=True),
        sa.Column("node_id", sa.Integer(), nullable=True),
        sa.Column("segment_id", sa.Integer(), nullable=True),
        sa.Column("ip_address", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("bound_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["network_id"], ["networks.id"], name=op.f("fk_ports_network_id_networks")
        ),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"], name=op.f("fk_ports_node_id_nodes")),
        sa.ForeignKeyConstraint(["owner_id"], ["owners.id"], name=op.f("fk_ports_owner_id_owners")),
        sa.ForeignKeyConstraint(
            ["segment_id"], ["segments.id"], name=op.f("fk_ports_segment_id_segments")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ports")),
        sa.UniqueConstraint(
            "segment_id", "ip_address", name=op.f("uq_ports_segment_id_ip_address")
        ),
    )
    with op.batch_alter_table("ports", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_ports_node_id"), ["node_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_ports_owner_id"), ["owner_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("ports", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_ports_owner_id"))
        batch_op.drop_index(batch_op.f("ix_ports_node_id"))

    op.drop_table("ports")
    with op.batch_alter_table("node_events", schema=None) as batch_op:
        batch_op.drop_index("ix_node_events_node_id_at")

    op.drop_table("node_events")
    with op.batch_alter_table("allocations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_allocations_owner_id"))

    op.drop_table("allocations")
    op.drop_table("nodes")
    op.drop_table("segments")
    with op.batch_alter_table("owners", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_owners_lease_expires_at"))

    op.drop_table("owners")
    op.drop_table("networks")
