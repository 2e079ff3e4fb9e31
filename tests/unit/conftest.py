"""Fixtures for the core's unit tests: a store on a temp SQLite file with a
manual wall clock, and helpers to enroll fake nodes and networks.

``BMAAS_TEST_PG_URL=postgresql+psycopg://user@host:port/postgres`` runs every
test that uses the ``store`` fixture on PostgreSQL instead (a fresh database
per test, dropped after): the check that PostgreSQL really is a URL away.
Tests of SQLite itself (WAL, processes on one file) always use SQLite.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from bmaas.inventory import NetworkSpec, NodeSpec, SegmentSpec
from bmaas.store import Store
from fakes.clock import FakeClock
from tests.fleet import install_stub_drivers

#: a plausible epoch time, so lease arithmetic looks like the real thing
WALL_START = 1_800_000_000.0


@pytest.fixture
def wall() -> FakeClock:
    """The store's wall clock (leases, timestamps); moves only when told to."""
    return FakeClock(start=WALL_START)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "bmaas.db"


@pytest.fixture
def db_url(db_path: Path) -> Iterator[str]:
    """A fresh database: SQLite in ``tmp_path``, or PostgreSQL when asked."""
    server = os.environ.get("BMAAS_TEST_PG_URL")
    if not server:
        yield str(db_path)
        return
    name = f"bmaas_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield sa.make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture
def store(db_url: str, wall: FakeClock) -> Iterator[Store]:
    s = Store.open(db_url, clock=wall)
    yield s
    s.close()


@pytest.fixture
def sqlite_store(db_path: Path, wall: FakeClock) -> Iterator[Store]:
    """Always SQLite: for tests of SQLite itself."""
    s = Store.open(str(db_path), clock=wall)
    yield s
    s.close()


@pytest.fixture
def stub_drivers(monkeypatch: pytest.MonkeyPatch) -> None:
    install_stub_drivers(monkeypatch)


def node_spec(name: str, *, segment: str | None = None, **kw: Any) -> NodeSpec:
    return NodeSpec(
        name=name,
        driver="fake",
        driver_info={"fake_machine": name},
        network_segment=segment,
        **kw,
    )


def network_spec(
    name: str = "prov", segments: dict[str, tuple[str, str, str]] | None = None
) -> NetworkSpec:
    """``segments``: name -> (cidr, pool start, pool end)."""
    segments = segments or {"rack1": ("10.1.0.0/24", "10.1.0.10", "10.1.0.20")}
    return NetworkSpec(
        name,
        [
            SegmentSpec(seg, cidr, None, [{"start": start, "end": end}])
            for seg, (cidr, start, end) in segments.items()
        ],
    )


@pytest.fixture
def enroll(store: Store) -> Callable[..., list[str]]:
    """``enroll(n, segment=..., networks=[...])``: enroll fake nodes n01..nNN."""

    def run(count: int, *, segment: str | None = None, networks: Any = (), prefix: str = "n"):
        names = [f"{prefix}{i:02d}" for i in range(1, count + 1)]
        store.enroll([node_spec(n, segment=segment) for n in names], list(networks))
        return names

    return run
