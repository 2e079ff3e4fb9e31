"""The shape of ``--db`` (or ``BMAAS_DB``), checked with the rest of the
command line, before a command's ``--deadline`` is looked at (issue 44).

The store checks a database URL when it opens it
(:func:`bmaas.store.engine.make_engine`), which loads SQLAlchemy first (0.3 s
here, no deadline interrupts an import). A command whose start-up had spent
its budget ended before that ("... spent by start-up; nothing was asked",
exit 1), so a mistyped URL was never named. :func:`problem` refuses here,
without SQLAlchemy, only what the store would refuse anyway: a URL that
SQLAlchemy's own grammar (``sqlalchemy.engine.url._parse_url``) cannot read,
a port that is not one (:func:`bmaas.validate.port`: SQLAlchemy would
take ``99999``, refused only at connect), and a database type no installed SQLAlchemy
dialect provides. Anything else (a path, a host, a driver package) stays the
store's to judge; tests/unit/test_cli_spent_input.py holds the two to the same
verdict on a corpus.
"""

from __future__ import annotations

import os
import re

from bmaas import validate
from bmaas.faults import InputError

__all__ = ["problem"]

#: the head of SQLAlchemy's URL grammar: the type, then the host part's port
_URL = re.compile(
    r"""
    (?P<name>[\w\+]+)://
    (?:[^:/]*(?::[^@]*)?@)?
    (?:(?:\[[^/\?]+\]|[^/:\?]+)?(?::(?P<port>[^/\?]*))?)?
    """,
    re.X,
)
#: the database types SQLAlchemy itself ships (``sqlalchemy.dialects.__all__``,
#: and ``mariadb``, which it maps to mysql); others come from entry points
_BUILT_IN = frozenset({"mssql", "mysql", "mariadb", "oracle", "postgresql", "sqlite"})
_ENTRY_POINTS = "sqlalchemy.dialects"
#: :data:`bmaas.store.location.ENV_VAR`, named here so that checking a command
#: line loads nothing of the store (a unit test holds the two equal)
ENV_VAR = "BMAAS_DB"


def _known(backend: str) -> bool:
    if backend in _BUILT_IN:
        return True
    from importlib.metadata import entry_points  # only for a type SQLAlchemy lacks

    return any(ep.name.split(".")[0] == backend for ep in entry_points(group=_ENTRY_POINTS))


def problem(db: str | None) -> InputError | None:
    """Why ``db`` (``--db``; ``None``: ``BMAAS_DB``) is no database URL the
    store could open, in one line naming ``--db`` (the URL itself is never
    shown: it may hold a password); ``None`` when it is a path, absent, or a
    URL of a readable shape."""
    field = "--db" if db is not None else ENV_VAR
    text = db if db is not None else os.environ.get(ENV_VAR, "")
    if "://" not in text:
        return None  # a file path (or the per-user default): the store's to judge
    head = _URL.match(text)
    if head is None:
        return InputError(
            "not a database URL or path: a URL is TYPE://..., e.g. sqlite:///PATH "
            "or postgresql+psycopg://USER@HOST/DB",
            field=field,
        )
    port = head.group("port")
    if port is not None:  # "HOST:" too: SQLAlchemy reads no port from it either
        try:
            validate.port(port)
        except ValueError as exc:
            return InputError(f"not a database URL or path: port: {exc}", field=field)
    name = head.group("name")
    if not _known(name.split("+", 1)[0]):
        return InputError(
            f"unknown database type {name!r}: give a SQLite path, sqlite:///PATH "
            "or postgresql+psycopg://USER@HOST/DB",
            field=field,
        )
    return None
