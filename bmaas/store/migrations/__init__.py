"""Alembic migration scripts for the bmaas state store (run by ``bmaas db upgrade``)."""
