"""The tables behind :class:`bmaas.store.Store`, in SQLAlchemy Core.

This module is the *model*; the migrations under ``migrations/versions`` are
the *history*. A test compares the two (Alembic's ``compare_metadata``), so a
column added here without a migration fails CI.

Portability notes (SQLite today, PostgreSQL a URL away):

* times are ``Float`` seconds since the epoch (wall clock): leases cross
  processes and hosts, and a float compares the same way on every backend;
* free-form data (driver_info, properties, IP pools) is ``JSON``;
* "one owner per node" is a UNIQUE index on ``allocations.node_id``, so even a
  backend without serialised writers can never hold two allocations for one
  node; "one IP once per segment" is a UNIQUE index on ``(segment_id, ip)``.
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = [
    "allocations",
    "metadata",
    "networks",
    "node_events",
    "nodes",
    "owners",
    "ports",
    "segments",
    "sync_shares",
]

# Named constraints make later migrations (and PostgreSQL) predictable.
metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

networks = sa.Table(
    "networks",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("created_at", sa.Float, nullable=False),
)

segments = sa.Table(
    "segments",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("network_id", sa.ForeignKey("networks.id"), nullable=False),
    # Segment names are global: a node names its segment without its network.
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("cidr", sa.String(64), nullable=False),
    sa.Column("gateway_ip", sa.String(64)),
    # [{"start": ip, "end": ip}, ...] as Neutron's allocation_pools
    sa.Column("allocation_pools", sa.JSON, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

nodes = sa.Table(
    "nodes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("driver", sa.String(64), nullable=False),
    # As enrolled: passwords given as ${ENV} or file: references stay references.
    sa.Column("driver_info", sa.JSON, nullable=False),
    sa.Column("resource_class", sa.String(255)),
    sa.Column("properties", sa.JSON, nullable=False),
    sa.Column("extra", sa.JSON, nullable=False),
    sa.Column("segment_id", sa.ForeignKey("segments.id")),
    # last seen; "unknown" when the last read failed or the BMC could not tell
    sa.Column("power_state", sa.String(32), nullable=False),
    sa.Column("power_state_at", sa.Float),
    sa.Column("provision_state", sa.String(32), nullable=False),
    sa.Column("maintenance", sa.Boolean, nullable=False),
    sa.Column("maintenance_reason", sa.Text),
    # a person's name, or "system" when bmaas put the node there itself
    sa.Column("maintenance_by", sa.String(255)),
    sa.Column("maintenance_at", sa.Float),
    # set only by the system ("power failure"); a person never sets it
    sa.Column("fault", sa.String(64)),
    sa.Column("fault_at", sa.Float),
    sa.Column("last_error", sa.Text),
    # hysteresis counters: consecutive faulted reads, consecutive good reads
    sa.Column("fault_count", sa.Integer, nullable=False),
    sa.Column("good_count", sa.Integer, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    # what a failed attempt left on the node and could not undo (media,
    # boot override, power): never claimed until cleaned (NULL: clean)
    sa.Column("leftovers", sa.JSON(none_as_null=True)),
)

owners = sa.Table(
    "owners",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    # request | attempt | move | instance
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("name", sa.String(255)),
    # an attempt's request, a move's instance
    sa.Column("parent_id", sa.ForeignKey("owners.id")),
    # "host:pid" of the process keeping the lease alive, for people reading it
    sa.Column("holder", sa.String(255)),
    # NULL: durable (an instance outlives the process that deployed it)
    sa.Column("lease_expires_at", sa.Float, index=True),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

allocations = sa.Table(
    "allocations",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("node_id", sa.ForeignKey("nodes.id"), nullable=False, unique=True),
    sa.Column("owner_id", sa.ForeignKey("owners.id"), nullable=False, index=True),
    sa.Column("created_at", sa.Float, nullable=False),
)

ports = sa.Table(
    "ports",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("network_id", sa.ForeignKey("networks.id"), nullable=False),
    # NULL: nobody holds it (a user's port between requests)
    sa.Column("owner_id", sa.ForeignKey("owners.id"), index=True),
    # "bmaas" (deleted by cleanup) or "user" (only unbound and detached)
    sa.Column("created_by", sa.String(16), nullable=False),
    sa.Column("name", sa.String(255)),
    sa.Column("mac_address", sa.String(32)),
    sa.Column("node_id", sa.ForeignKey("nodes.id"), index=True),
    sa.Column("segment_id", sa.ForeignKey("segments.id")),
    sa.Column("ip_address", sa.String(64)),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("bound_at", sa.Float),
    sa.UniqueConstraint("segment_id", "ip_address"),
)

node_events = sa.Table(
    "node_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("node_id", sa.ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False),
    sa.Column("at", sa.Float, nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    # who did it: a person, "system", or an owner ("attempt:<id>")
    sa.Column("actor", sa.String(255)),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Index("ix_node_events_node_id_at", "node_id", "at"),
)

# Which sync worker reads which node (several `bmaas sync` processes on one
# database). One row per node at most (the primary key), so two workers can
# never hold one node at once; a row whose lease ran out is anyone's to take.
sync_shares = sa.Table(
    "sync_shares",
    metadata,
    sa.Column("node_id", sa.ForeignKey("nodes.id", ondelete="CASCADE"), primary_key=True),
    # the worker's owner id (an owner of kind "sync"); not a foreign key: a
    # reclaimed worker's rows simply expire
    sa.Column("worker_id", sa.String(36), nullable=False, index=True),
    sa.Column("expires_at", sa.Float, nullable=False),
)
