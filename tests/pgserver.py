"""A real PostgreSQL for the ``pg`` tests, started once per test session.

``BMAAS_TEST_PG_URL`` (an admin URL such as
``postgresql+psycopg://user@127.0.0.1:5432/postgres``) names a server to
use; without it, ``scripts/postgres.sh`` starts Debian's PostgreSQL on a
free loopback port under a temporary folder (installing the package if it
is missing and we are root) and stops it at the end. Each test gets a fresh
database (:func:`fresh_database`), dropped afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "postgres.sh"
ENV_VAR = "BMAAS_TEST_PG_URL"


@contextlib.contextmanager
def server() -> Iterator[str]:
    """The admin URL of a running server: the given one, or one started here."""
    given = os.environ.get(ENV_VAR)
    if given:
        yield given
        return
    folder = tempfile.mkdtemp(prefix="bmaas-pg-")
    try:
        started = subprocess.run(
            ["bash", str(SCRIPT), "start", folder],
            capture_output=True,
            text=True,
            timeout=600,  # a first run may apt-get install postgresql
            check=False,
        )
        if started.returncode != 0:
            raise RuntimeError(f"could not start PostgreSQL: {started.stderr.strip()}")
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", folder], timeout=60, check=False)
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """A new, empty database on the server; its URL (dropped afterwards)."""
    name = f"bmaas_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        try:
            yield sa.make_url(admin_url).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        admin.dispose()
