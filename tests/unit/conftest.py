"""Fixtures for the core's unit tests: a store on a temp SQLite file with a
manual wall clock, and helpers to enroll fake nodes and networks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

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
def store(db_path: Path, wall: FakeClock) -> Iterator[Store]:
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
