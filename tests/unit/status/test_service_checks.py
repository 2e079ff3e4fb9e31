"""The database, inventory and drivers checks."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import sqlalchemy as sa

from bmaas import registry
from bmaas.fakes.clock import FakeClock
from bmaas.status import Result
from bmaas.store import Store, head_revision
from tests.fleet import write_inventory
from tests.unit.status.conftest import MakeContext, run

Enroll = Callable[..., list[str]]


# -- database ------------------------------------------------------------------------


def test_at_head_is_success(make_ctx: MakeContext, enroll: Enroll) -> None:
    enroll(2)
    [line] = run(make_ctx(), "database")["database"].details
    assert f"schema {head_revision()} (newest), 2 node(s) enrolled" in line


def test_a_missing_database_is_a_failure_and_is_not_created(
    make_ctx: MakeContext, tmp_path: Path
) -> None:
    path = tmp_path / "nowhere" / "bmaas.db"
    results = run(make_ctx(db=str(path)))
    database = results["database"]
    assert database.result is Result.FAILURE
    assert f"no database at {path}" in database.details[0]
    assert "`bmaas db upgrade`" in database.details[0]
    assert not path.exists()
    assert not path.parent.exists()
    # Everything that needs the database says so, once, without repeating why.
    for name in ("drivers", "bmc", "maintenance", "allocations", "tls"):
        assert results[name].details == ("not checked: the database is not usable (see database)",)
        assert results[name].result is Result.FAILURE
    assert results["inventory"].result is Result.SUCCESS  # nothing to compare: a note


def test_without_the_database_check_the_reason_is_given_in_full(
    make_ctx: MakeContext, tmp_path: Path
) -> None:
    tls = run(make_ctx(db=str(tmp_path / "none.db")), "tls")["tls"]
    assert "no database at" in tls.details[0]


def test_an_empty_database_needs_an_upgrade(make_ctx: MakeContext, tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    path.chmod(0o600)  # a store others can read is refused before anything else
    database = run(make_ctx(db=str(path)), "database")["database"]
    assert database.result is Result.FAILURE
    assert "has no bmaas schema: run `bmaas db upgrade`" in database.details[0]


def test_a_database_behind_the_newest_migration_names_the_fix(
    make_ctx: MakeContext, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pretend this bmaas ships a newer migration than the database has.
    shipped = head_revision()
    monkeypatch.setattr("bmaas.status.context.head_revision", lambda: "9998")
    monkeypatch.setattr("bmaas.status.context.known_revision", lambda rev: rev in (shipped, "9998"))
    results = run(make_ctx(), "database", "allocations")
    [line] = results["database"].details
    assert line.endswith(f"is at schema {shipped}, this bmaas needs 9998: run `bmaas db upgrade`")
    assert results["allocations"].result is Result.FAILURE


def test_a_database_from_a_newer_bmaas_is_not_upgraded_but_named(
    make_ctx: MakeContext, store: Store
) -> None:
    with store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '0099_future'"))
    [line] = run(make_ctx(), "database")["database"].details
    assert "is at schema 0099_future, which bmaas" in line
    assert "upgrade bmaas" in line


def test_a_url_for_a_database_driver_that_is_not_installed(make_ctx: MakeContext) -> None:
    url = "nosuchdb://user:Pw-in-url@db.example/bmaas"
    results = run(make_ctx(db=url), "database")
    assert results["database"].result is Result.FAILURE
    assert "unknown database type 'nosuchdb'" in results["database"].details[0]
    assert "Pw-in-url" not in repr(results)


# -- inventory -----------------------------------------------------------------------


def test_no_inventory_is_skipped_with_a_note(make_ctx: MakeContext, enroll: Enroll) -> None:
    enroll(1)
    inventory = run(make_ctx(), "inventory")["inventory"]
    assert inventory.result is Result.SUCCESS
    assert "skipped" in inventory.details[0]
    assert "BMAAS_INVENTORY" in inventory.details[0]


def test_inventory_and_state_agree(make_ctx: MakeContext, enroll: Enroll, tmp_path: Path) -> None:
    names = enroll(3)
    path = write_inventory(tmp_path / "inv.yaml", [{"name": n, "driver": "fake"} for n in names])
    inventory = run(make_ctx(inventory=str(path)), "inventory")["inventory"]
    assert inventory.result is Result.SUCCESS
    assert inventory.details == (f"the 3 node(s) in {path} are the enrolled ones",)


def test_inventory_differences_are_warnings(
    make_ctx: MakeContext, enroll: Enroll, tmp_path: Path
) -> None:
    enroll(3)  # n01..n03, driver fake
    nodes = [
        {"name": "n01", "driver": "fake"},
        {"name": "n02", "driver": "ipmi"},  # re-cabled to another driver
        {"name": "n09", "driver": "fake"},  # new in the file
    ]
    path = write_inventory(tmp_path / "inv.yaml", nodes)
    inventory = run(make_ctx(inventory=str(path)), "inventory")["inventory"]
    assert inventory.result is Result.WARNING
    assert inventory.nodes == {
        "not_enrolled": ["n09"],
        "not_in_inventory": ["n03"],
        "driver_changed": ["n02"],
    }
    assert f"`bmaas enroll {path}`" in inventory.details[0]
    assert "n02 (fake -> ipmi, line" in inventory.details[2]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nodes: [\n", "not valid YAML/JSON"),
        ("networks: []\n", "has no 'nodes' list"),
        ("nodes:\n  - driver: fake\n", "nodes[0]: has no name"),
    ],
)
def test_a_broken_inventory_is_a_failure_naming_the_file(
    make_ctx: MakeContext, enroll: Enroll, tmp_path: Path, text: str, expected: str
) -> None:
    enroll(1)
    path = tmp_path / "inv.yaml"
    path.write_text(text)
    inventory = run(make_ctx(inventory=str(path)), "inventory")["inventory"]
    assert inventory.result is Result.FAILURE
    assert inventory.details[0].startswith(str(path))
    assert expected in inventory.details[0]


def test_an_unreadable_inventory_is_a_failure(make_ctx: MakeContext, tmp_path: Path) -> None:
    inventory = run(make_ctx(inventory=str(tmp_path / "gone.yaml")), "inventory")["inventory"]
    assert inventory.result is Result.FAILURE
    assert "cannot read" in inventory.details[0]


# -- drivers ---------------------------------------------------------------------------


def test_drivers_in_use_load(make_ctx: MakeContext, enroll: Enroll) -> None:
    enroll(2)
    drivers = run(make_ctx(), "drivers")["drivers"]
    assert drivers.result is Result.SUCCESS
    assert drivers.details == ("fake (2 node(s)): bmaas.fakes.driver.FakeDriver",)


def _only_entry_point(monkeypatch: pytest.MonkeyPatch, *eps: EntryPoint) -> None:
    """Make the ``bmaas.drivers`` group hold exactly ``eps``."""
    monkeypatch.setattr(registry, "entry_points", lambda group: list(eps))
    registry.load_driver.cache_clear()


def test_a_driver_whose_entry_point_is_gone_fails(
    make_ctx: MakeContext, enroll: Enroll, monkeypatch: pytest.MonkeyPatch
) -> None:
    enroll(2)
    try:
        _only_entry_point(monkeypatch)
        drivers = run(make_ctx(), "drivers")["drivers"]
    finally:
        registry.load_driver.cache_clear()
    assert drivers.result is Result.FAILURE
    assert drivers.nodes == {"no_driver": ["n01", "n02"]}
    assert drivers.details == ("fake (2 node(s)): unknown driver 'fake' (installed: none)",)


def test_a_driver_whose_library_does_not_import_fails(
    make_ctx: MakeContext, enroll: Enroll, monkeypatch: pytest.MonkeyPatch
) -> None:
    enroll(1)
    broken = EntryPoint("fake", "bmaas_no_such_protocol_lib:Driver", "bmaas.drivers")
    try:
        _only_entry_point(monkeypatch, broken)
        drivers = run(make_ctx(), "drivers")["drivers"]
    finally:
        registry.load_driver.cache_clear()
    assert drivers.result is Result.FAILURE
    [line] = drivers.details
    assert "installed but does not import: ModuleNotFoundError" in line
    assert "bmaas_no_such_protocol_lib" in line


def test_no_nodes_lists_what_is_installed(make_ctx: MakeContext) -> None:
    drivers = run(make_ctx(), "drivers")["drivers"]
    assert drivers.result is Result.SUCCESS
    assert drivers.details[0].startswith("no nodes enrolled; installed: ")
    assert "fake" in drivers.details[0]


def test_a_deadline_spent_loading_the_database_layer_asks_no_database(
    make_ctx: MakeContext, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At load 25 the import took seconds, and a PostgreSQL connect started
    after the deadline still waited libpq's least timeout (2 s) past it."""
    ctx = make_ctx(db="postgresql+psycopg://u:s3cret@127.0.0.1:1/x", deadline=5)
    clock.advance(6)  # the deadline is spent (before the import, here)
    monkeypatch.setattr(Store, "open", _never_called)
    database = run(ctx, "database")["database"]
    assert database.result is Result.FAILURE
    (line,) = database.details
    assert "not asked: the deadline passed while the database layer loaded" in line
    assert "s3cret" not in line


def _never_called(*_args: object, **_kwargs: object) -> Store:
    raise AssertionError("the database was asked")
