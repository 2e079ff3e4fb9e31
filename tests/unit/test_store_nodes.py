"""The store's nodes, schema and database set-up."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCTimeout, InputError
from bmaas.health import Change
from bmaas.store import (
    POWER_FAILURE,
    SYSTEM,
    NoDatabase,
    OwnerKind,
    ProvisionState,
    SchemaOutOfDate,
    Store,
    head_revision,
    resolve_url,
)
from bmaas.store.schema import metadata

Enroll = Callable[..., list[str]]


def test_migrations_build_exactly_the_schema_the_code_uses(store: Store) -> None:
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    assert diff == []
    assert store.schema_revision() == head_revision()


def test_opening_a_missing_store_from_python_says_what_to_do(tmp_path: Path) -> None:
    """As the CLI does: a mistyped path never becomes an empty fleet."""
    missing = tmp_path / "state" / "bmaas.db"
    with pytest.raises(NoDatabase) as info:
        Store.open(str(missing))
    assert str(info.value) == (
        f"no database at {missing}; run `bmaas enroll FILE` "
        "(from Python, Store.open(..., create=True) makes a new one)"
    )
    assert not missing.exists()
    assert not missing.parent.exists()
    Store.open(str(missing), create=True).close()  # code that wants a new store says so
    assert missing.exists()
    Store.open(str(missing)).close()  # and from then on it is simply opened


def test_a_database_at_an_older_revision_is_refused_until_upgraded(db_path: Path) -> None:
    Store.open(str(db_path), check_schema=False, create=True).upgrade(Deadline.after(30), "0001")
    with pytest.raises(SchemaOutOfDate, match="run `bmaas db upgrade`") as info:
        Store.open(str(db_path))
    assert (info.value.current, info.value.head) == ("0001", head_revision())
    store = Store.open(str(db_path), check_schema=False)  # what `status check` uses
    assert store.schema_revision() == "0001"
    assert store.upgrade(Deadline.after(30)) == ("0001", head_revision())
    store.close()
    Store.open(str(db_path)).close()


def test_a_database_a_newer_bmaas_migrated_is_refused_and_never_upgraded(db_path: Path) -> None:
    Store.open(str(db_path), create=True).close()
    engine = sa.create_engine(f"sqlite:///{db_path}")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(SchemaOutOfDate, match=r"newer bmaas migrated it\): upgrade bmaas") as info:
        Store.open(str(db_path))
    assert (info.value.current, info.value.head) == ("9999", head_revision())
    store = Store.open(str(db_path), check_schema=False)
    with pytest.raises(SchemaOutOfDate, match="never downgrade"):
        store.upgrade(
            Deadline.after(30)
        )  # `bmaas db upgrade`: one error line, not Alembic's traceback
    assert store.schema_revision() == "9999"
    store.close()


def test_sqlite_is_set_up_for_several_processes(sqlite_store: Store, db_path: Path) -> None:
    with sqlite_store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    assert stat.S_IMODE(os.stat(db_path).st_mode) == 0o600  # may hold inline passwords


def test_where_the_database_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("BMAAS_DB", raising=False)
    monkeypatch.delenv("BMAAS_HOME", raising=False)  # tests/test_home.py covers it
    assert resolve_url(str(tmp_path / "x.db")) == f"sqlite:///{tmp_path / 'x.db'}"
    assert (
        resolve_url("postgresql+psycopg://bmaas@db/bmaas") == "postgresql+psycopg://bmaas@db/bmaas"
    )
    monkeypatch.setenv("BMAAS_DB", str(tmp_path / "env.db"))
    assert resolve_url() == f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.delenv("BMAAS_DB")
    assert resolve_url().endswith("/bmaas/bmaas.db")


def test_filters(store: Store, enroll: Enroll) -> None:
    enroll(4)
    store.nodes.set_maintenance("n01", reason="x", by="bob")
    store.health.set_fault("n02", POWER_FAILURE, reason="dead")
    store.owners.claim(
        "n03", store.owners.create(OwnerKind.ATTEMPT).id, provision_state=ProvisionState.DEPLOYING
    )
    store.health.note_power(states={"n04": PowerState.ON})

    def names(**kw: object) -> list[str]:
        return [n.name for n in store.nodes.find(**kw)]  # type: ignore[arg-type]

    assert names(maintenance=True) == ["n01", "n02"]
    assert names(faulted=True) == ["n02"]
    assert names(fault=POWER_FAILURE) == ["n02"]
    assert names(allocated=True) == ["n03"]
    assert names(allocated=False, maintenance=False) == ["n04"]
    assert names(provision_state="deploying") == ["n03"]
    assert names(power_state="on") == ["n04"]
    assert names(driver="fake") == ["n01", "n02", "n03", "n04"]
    assert [n.name for n in store.nodes.find(["n04", "n01"])] == ["n01", "n04"]
    assert [n.name for n in store.nodes.require(["n04", "n01"])] == ["n04", "n01"]
    with pytest.raises(InputError, match="did you mean 'n01'"):
        store.nodes.require(["n01", "n1"])


def test_maintenance_by_a_person_and_by_the_system_are_kept_apart(
    store: Store, enroll: Enroll
) -> None:
    enroll(1)
    with pytest.raises(InputError, match="reason is required"):
        store.nodes.set_maintenance("n01", reason=" ", by="bob")
    with pytest.raises(InputError, match="reserved"):
        store.nodes.set_maintenance("n01", reason="x", by=SYSTEM)
    store.health.set_fault("n01", POWER_FAILURE, reason="3 reads")
    node = store.nodes.get("n01")
    assert (node.maintenance, node.maintenance_by, node.fault) == (True, SYSTEM, POWER_FAILURE)
    assert node.maintenance_by_system
    # A person takes over the maintenance; the fault stays the system's.
    node = store.nodes.set_maintenance("n01", reason="replacing PSU", by="alice")
    assert (node.maintenance_by, node.fault) == ("alice", POWER_FAILURE)
    # A person's unset vouches for the node: fault and streaks cleared too.
    node = store.nodes.unset_maintenance("n01", by="alice")
    assert (node.maintenance, node.fault, node.fault_count) == (False, None, 0)
    assert [e.kind for e in store.nodes.events("n01")][-3:] == [
        "fault_set",
        "maintenance_set",
        "maintenance_unset",
    ]
    assert store.nodes.events("n01")[-1].actor == "alice"


def test_power_reads_apply_hysteresis_and_unknown_stays_unknown(
    store: Store, enroll: Enroll, wall: FakeClock
) -> None:
    enroll(1)
    fault = BMCTimeout("no answer", node="n01", driver="fake", operation="power.get")
    store.health.record_power_reads([("n01", PowerState.ON)])
    assert store.nodes.get("n01").power_state is PowerState.ON
    changes = [store.health.record_power_reads([("n01", fault)])[0].change for _ in range(3)]
    assert changes == [Change.NONE, Change.NONE, Change.FAULTED]
    node = store.nodes.get("n01")
    assert node.power_state is PowerState.UNKNOWN  # a failed read is not "off"
    assert node.last_error == str(fault)
    assert (node.fault, node.maintenance_by) == (POWER_FAILURE, SYSTEM)
    store.health.record_power_reads([("n01", PowerState.UNKNOWN)])
    store.health.record_power_reads([("n01", PowerState.OFF)])
    assert store.nodes.get("n01").fault == POWER_FAILURE
    [change] = store.health.record_power_reads([("n01", PowerState.OFF)])
    assert change.change is Change.RECOVERED
    node = store.nodes.get("n01")
    assert (node.fault, node.maintenance, node.power_state) == (None, False, PowerState.OFF)
    kinds = [e.kind for e in store.nodes.events("n01")]
    assert kinds.count("fault_set") == 1
    assert kinds.count("fault_cleared") == 1


def test_record_fault_counts_without_touching_power_state(store: Store, enroll: Enroll) -> None:
    enroll(1)
    store.health.note_power(states={"n01": PowerState.ON})
    for _ in range(3):
        store.health.record_fault("n01", BMCTimeout("x", node="n01"))
    node = store.nodes.get("n01")
    assert node.fault == POWER_FAILURE
    assert node.power_state is PowerState.ON


def test_node_counts_group_the_fleet(store: Store, enroll: Enroll) -> None:
    enroll(3)
    store.health.note_power(states={"n01": PowerState.ON, "n02": PowerState.ON})
    store.health.set_fault("n03", POWER_FAILURE, reason="x")
    assert sorted(store.nodes.counts()) == [
        ("on", False, None, 2),
        ("unknown", True, POWER_FAILURE, 1),
    ]


def test_records_mask_inline_passwords(store: Store) -> None:
    from bmaas.inventory import NodeSpec

    store.nodes.enroll([NodeSpec("p1", "fake", {"ipmi_password": "hunter2", "fake_machine": "p1"})])
    assert "hunter2" not in repr(store.nodes.get("p1").to_dict())


def test_identities_change_with_driver_info_and_fault_not_with_power(
    store: Store, enroll: Enroll
) -> None:
    """What a sync compares between passes (issue 37): on both backends, a
    read's power changes nothing of it; a fault or new driver_info does."""
    enroll(2)
    first = store.nodes.identities()
    assert [(name, driver) for name, driver, _info, _fault in first] == [
        ("n01", "fake"),
        ("n02", "fake"),
    ]
    store.health.record_power_reads([("n01", PowerState.ON)])
    assert store.nodes.identities() == first
    store.health.set_fault("n02", "power failure", reason="test")
    faulted = store.nodes.identities()
    assert faulted[1][3] == "power failure"
    assert faulted != first


def test_a_steady_read_writes_nothing_on_both_backends(store: Store, enroll: Enroll) -> None:
    """record_power_reads (issue 37): the same state again is no write; its
    "seen" time is touched in one statement once SEEN_EVERY old (here 0)."""
    enroll(3)
    reads = [(n, PowerState.ON) for n in ("n01", "n02", "n03")]
    store.health.record_power_reads(reads)
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        statements.append(statement.split()[0].upper())

    sa.event.listen(store.db.engine, "before_cursor_execute", seen)
    try:
        store.health.record_power_reads(reads)
        assert "UPDATE" not in statements
        assert "INSERT" not in statements
        statements.clear()
        store.health.record_power_reads(reads, seen_every=0.0)
        assert statements.count("UPDATE") == 1  # the three touched at once
    finally:
        sa.event.remove(store.db.engine, "before_cursor_execute", seen)
