"""Read-only node listing on SQLite without SQLAlchemy.

Why: importing SQLAlchemy costs 0.3-0.5 s on a small machine, more than
``bmaas node list``'s whole goal (< 0.3 s on 1000 nodes). This module reads
the same rows as :meth:`bmaas.store.Store.nodes` with the standard library's
``sqlite3``, read-only (``mode=ro``: it never creates, migrates or locks for
writing). When: only for a SQLite database that exists and is at the schema
this bmaas ships; otherwise :func:`read_nodes` answers ``None`` and the
caller opens the :class:`~bmaas.store.Store` as usual (which says what is
wrong: no database, schema out of date, a locked file). A unit test holds its
answers against ``Store.nodes`` for every filter.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from bmaas.store.location import private_file_problem, resolve_url
from bmaas.store.migrate import VERSION_TABLE, head_revision
from bmaas.store.records import NodeRecord, node_record

__all__ = ["read_nodes"]

#: seconds to wait for a writer's lock (a read in WAL mode rarely waits)
BUSY_TIMEOUT = 5.0

_SELECT = """
SELECT n.*, s.name AS segment_name, o.id AS owner_id, o.kind AS owner_kind,
       o.name AS owner_name
FROM nodes AS n
LEFT OUTER JOIN segments AS s ON s.id = n.segment_id
LEFT OUTER JOIN allocations AS a ON a.node_id = n.id
LEFT OUTER JOIN owners AS o ON o.id = a.owner_id
"""

#: filter -> (SQL condition on a value, or a pair for True/False)
_EQUALS = {
    "fault": "n.fault = ?",
    "provision_state": "n.provision_state = ?",
    "power_state": "n.power_state = ?",
    "driver": "n.driver = ?",
    "resource_class": "n.resource_class = ?",
}
_FLAGS = {
    "maintenance": ("n.maintenance = 1", "n.maintenance = 0"),
    "faulted": ("n.fault IS NOT NULL", "n.fault IS NULL"),
    "allocated": ("a.id IS NOT NULL", "a.id IS NULL"),
}


def read_nodes(db: str | None, **filters: Any) -> list[NodeRecord] | None:
    """Nodes by name, filtered as :meth:`Store.nodes` filters them (every
    filter left ``None`` is ignored); ``None`` when this path does not apply."""
    url = resolve_url(db)
    if not url.startswith("sqlite:///") or "?" in url:
        return None
    path = url[len("sqlite:///") :]
    if not os.path.isfile(path) or private_file_problem(Path(path)):
        return None  # the store opens it, or says why it will not
    where: list[str] = []
    args: list[Any] = []
    for key, value in filters.items():
        if value is None:
            continue
        if key in _EQUALS:
            where.append(_EQUALS[key])
            args.append(str(value))
        elif key in _FLAGS:
            where.append(_FLAGS[key][0 if value else 1])
        else:
            return None  # a filter this reader does not know: the store's job
    query = _SELECT + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY n.name"
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT)
    except sqlite3.Error:
        return None
    with contextlib.closing(conn):
        conn.row_factory = sqlite3.Row
        try:
            (version,) = conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()  # noqa: S608 - a constant
            if version != head_revision():
                return None
            return [_record(row) for row in conn.execute(query, args)]
        except (sqlite3.Error, TypeError, ValueError, KeyError):
            return None  # anything unexpected: the store reads it (and says why)


def _record(m: sqlite3.Row) -> NodeRecord:
    return node_record(m, json_column=json.loads)
