"""bmaas.store.lite reads exactly what Store.nodes reads, for every filter,
without importing SQLAlchemy; anything it does not handle is None (the store
then opens as usual)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bmaas.driver import PowerState
from bmaas.faults import BMCTimeout
from bmaas.health import HealthRule
from bmaas.store import OwnerKind, ProvisionState, Store
from bmaas.store.lite import read_nodes
from tests.unit.conftest import node_spec

FILTERS: list[dict[str, Any]] = [
    {},
    {"maintenance": True},
    {"maintenance": False},
    {"faulted": True},
    {"faulted": False},
    {"fault": "power failure"},
    {"allocated": True},
    {"allocated": False},
    {"provision_state": ProvisionState.DEPLOYING},
    {"power_state": PowerState.ON},
    {"power_state": "off", "allocated": False},
    {"driver": "fake"},
    {"resource_class": "big"},
    {"resource_class": "none-such"},
]


@pytest.fixture
def fleet(sqlite_store: Store, db_path: Path) -> Path:
    store = sqlite_store
    store.nodes.enroll(
        [node_spec(f"n{i}", resource_class="big" if i % 2 else None) for i in range(1, 7)],
        [],
    )
    store.health.note_power(states={"n1": PowerState.ON, "n2": PowerState.OFF})
    store.nodes.set_maintenance("n3", reason="PSU", by="alice")
    rule = HealthRule(fault_after=1)
    store.health.record_power_reads([("n4", BMCTimeout("x", node="n4"))], health_rule=rule)
    owner = store.owners.create(OwnerKind.ATTEMPT, name="req-1/1")
    store.owners.claim("n5", owner.id, provision_state=ProvisionState.DEPLOYING)
    # what a failed attempt left (issue 49): a JSON column the lite reader decodes too
    store.health.set_leftovers("n6", {"media": "http://i/x.iso", "power": "on"}, reason="hang")
    return db_path


@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: ",".join(map(str, f)) or "all")
def test_the_lite_reader_answers_as_the_store_does(
    sqlite_store: Store, fleet: Path, filters: dict[str, Any]
) -> None:
    lite = read_nodes(str(fleet), **filters)
    assert lite is not None
    assert lite == sqlite_store.nodes.find(**filters)


def test_what_the_lite_reader_does_not_handle_is_none(tmp_path: Path, fleet: Path) -> None:
    assert read_nodes(str(tmp_path / "missing.db")) is None  # the store says "no database"
    assert read_nodes("postgresql://h/db") is None
    assert read_nodes(str(fleet), names=["n1"]) is None  # a filter it does not know
    (tmp_path / "junk.db").write_bytes(b"not a database")
    assert read_nodes(str(tmp_path / "junk.db")) is None


def test_node_list_does_not_import_sqlalchemy(fleet: Path) -> None:
    code = (
        "import sys; from bmaas.cli import main\n"
        "try:\n    main(['node', 'list'])\nexcept SystemExit:\n    pass\n"
        "print('SQLALCHEMY' if 'sqlalchemy' in sys.modules else 'LIGHT')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"BMAAS_DB": str(fleet), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "n6" in out
    assert out.strip().endswith("LIGHT")
