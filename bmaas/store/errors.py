"""Errors the store raises, all :class:`~bmaas.faults.BmaasError` so the CLI
prints them as one line.

A database error is mapped once, where a transaction is opened
(:mod:`bmaas.store.base`), the way a driver maps its library's exceptions at
its edge.
"""

from __future__ import annotations

from bmaas.faults import BmaasError, LeaseLost, NodeUnavailable

__all__ = ["LeaseLost", "NoDatabase", "SchemaOutOfDate", "SegmentExhausted", "StoreError"]


class StoreError(BmaasError):
    """The database could not be used (unreachable, locked for too long, corrupt)."""

    code = "store_error"
    summary = "state store error"


class NoDatabase(StoreError):
    """No database where one was asked for: a command that only reads (or
    ``--dry-run``), or :meth:`Store.open` from Python without ``create=True``.
    Neither creates one; ``bmaas enroll FILE`` does (and ``create=True``)."""

    code = "no_database"
    summary = "no database"


class SchemaOutOfDate(StoreError):
    """The database schema is older (or newer) than this bmaas. Fixed by
    ``bmaas db upgrade``; never upgraded behind the operator's back."""

    code = "schema_out_of_date"
    summary = "database schema out of date"

    def __init__(self, message: str = "", *, current: str | None = None, head: str = "") -> None:
        super().__init__(message)
        self.current = current
        self.head = head


class SegmentExhausted(NodeUnavailable):
    """The node's network segment has no free IP in its pools. Another node
    (in another segment) may still do, so the scope is "elsewhere"."""

    code = "segment_exhausted"
    summary = "segment out of IP addresses"
