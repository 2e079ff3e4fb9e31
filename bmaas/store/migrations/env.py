"""Alembic environment: bmaas always hands over a connection it opened.

There is no ``alembic.ini``; :mod:`bmaas.store.migrate` builds the config and
passes the connection (already inside bmaas's write transaction) in
``config.attributes["connection"]``.
"""

from __future__ import annotations

from alembic import context

from bmaas.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `bmaas db upgrade`, not the alembic command")

# render_as_batch: SQLite cannot ALTER most things; batch mode copies the table.
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
