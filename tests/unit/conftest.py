"""Fixtures for the core's unit tests: a store on a temp SQLite file with a
manual wall clock, and helpers to enroll fake nodes and networks.

The store's own tests (``test_store_*.py``) run twice: on SQLite and, marked
``pg``, on a real PostgreSQL (a fresh database per test, on the server
``tests.pgserver`` starts once per session): the check that PostgreSQL
really is a URL away. ``-m "not pg"`` leaves those out.
``BMAAS_TEST_PG_URL=postgresql+psycopg://user@host:port/postgres`` names a
server to use instead, and then runs *every* test that uses the ``store``
fixture on it. Tests of SQLite itself (WAL, processes on one file) always
use SQLite.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bmaas.fakes.clock import FakeClock
from bmaas.inventory import NetworkSpec, NodeSpec, SegmentSpec
from bmaas.store import Store
from tests import pgserver
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


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The store's own tests run on both backends."""
    module = metafunc.module.__name__.rsplit(".", 1)[-1]
    if "db_backend" in metafunc.fixturenames and module.startswith("test_store_"):
        metafunc.parametrize(
            "db_backend", ["sqlite", pytest.param("pg", marks=pytest.mark.pg)], scope="function"
        )


@pytest.fixture
def db_backend() -> str:
    """Where ``db_url`` lives: "pg" when BMAAS_TEST_PG_URL names a server."""
    return "pg" if os.environ.get(pgserver.ENV_VAR) else "sqlite"


@pytest.fixture
def db_url(db_path: Path, db_backend: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database: SQLite in ``tmp_path``, or PostgreSQL."""
    if db_backend == "sqlite":
        yield str(db_path)
        return
    server = request.getfixturevalue("pg_server")
    with pgserver.fresh_database(server) as url:
        yield url


@pytest.fixture
def store(db_url: str, wall: FakeClock) -> Iterator[Store]:
    s = Store.open(db_url, clock=wall, create=True)
    yield s
    s.close()


@pytest.fixture
def sqlite_store(db_path: Path, wall: FakeClock) -> Iterator[Store]:
    """Always SQLite: for tests of SQLite itself."""
    s = Store.open(str(db_path), clock=wall, create=True)
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
        store.nodes.enroll([node_spec(n, segment=segment) for n in names], list(networks))
        return names

    return run


@pytest.fixture
def keystoneauth_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """keystoneauth's own retry sleeps (``time.sleep`` in its session),
    recorded, not slept: what a test of Ironic's API edge asserts."""
    slept: list[float] = []
    monkeypatch.setattr("keystoneauth1.session.time.sleep", slept.append)
    return slept
