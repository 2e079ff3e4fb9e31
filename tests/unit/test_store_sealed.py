"""Secrets at rest (issue 36): the store's file modes, inline passwords
sealed with a key kept outside the store, rotation, a missing or wrong key."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from bmaas import credentials, sealed
from bmaas.cli import cli
from bmaas.cli.app import App
from bmaas.deadline import Deadline
from bmaas.faults import InputError
from bmaas.inventory import NodeSpec
from bmaas.ops import driver_factory
from bmaas.sealed import KeyProblem
from bmaas.store import Store, head_revision

PASSWORD = "hunter2-Very-Secret"
OTHER = "s3cond-Secret-pw"


def _spec(name: str, password: str = PASSWORD, **more: str) -> NodeSpec:
    return NodeSpec(
        name,
        "fake",
        {"fake_machine": name, "ipmi_password": password, "ipmi_kg": "kg-" + name, **more},
    )


@pytest.fixture
def key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "keys" / "store.key"
    monkeypatch.setenv(sealed.KEY_FILE_ENV, str(path))
    return path


def _raw(db_path: Path) -> bytes:
    """Every byte SQLite keeps for the store (the file, its WAL)."""
    return b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*") if p.is_file())


def _stored(db_path: Path, node: str) -> dict[str, str]:
    conn = sqlite3.connect(db_path)
    try:
        (text,) = conn.execute("SELECT driver_info FROM nodes WHERE name = ?", (node,)).fetchone()
    finally:
        conn.close()
    return dict(json.loads(text))


# -- file modes -------------------------------------------------------------------


def test_a_new_store_and_its_wal_are_private(db_path: Path, key_file: Path) -> None:
    with Store.open(str(db_path), create=True) as store:
        store.nodes.enroll([_spec("a1")])
        files = sorted(db_path.parent.glob(db_path.name + "*"))
        assert {p.name for p in files} >= {db_path.name, db_path.name + "-wal"}
        for path in files:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o644, 0o666, 0o640, 0o604])
def test_an_existing_store_others_can_read_is_refused_unchanged(
    db_path: Path, key_file: Path, mode: int
) -> None:
    db_path.touch()
    db_path.chmod(mode)
    before = db_path.read_bytes()
    result = CliRunner().invoke(cli, ["--db", str(db_path), "db", "upgrade"], obj=App())
    assert result.exit_code == 2
    assert result.output == (
        f"error: --db: database {db_path} can be read or written by others "
        f"(mode {mode:04o}): chmod 600 {db_path}\n"
    )
    assert stat.S_IMODE(db_path.stat().st_mode) == mode  # refused, never repaired
    assert db_path.read_bytes() == before
    db_path.chmod(0o600)  # the fix the line names works
    result = CliRunner().invoke(cli, ["--db", str(db_path), "db", "upgrade"], obj=App())
    assert result.exit_code == 0, result.output


def test_a_public_wal_beside_a_private_store_is_refused(db_path: Path, key_file: Path) -> None:
    Store.open(str(db_path), create=True).close()
    wal = db_path.with_name(db_path.name + "-wal")
    wal.touch()
    wal.chmod(0o644)
    with pytest.raises(Exception, match=r"-wal can be read or written by others \(mode 0644\)"):
        Store.open(str(db_path))


def test_a_store_that_is_a_symlink_is_refused_and_never_written(
    tmp_path: Path, db_path: Path, key_file: Path
) -> None:
    target = tmp_path / "elsewhere.db"
    target.touch()
    target.chmod(0o644)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    db_path.symlink_to(target)
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(
        "nodes:\n  - name: a1\n    driver: fake\n"
        f"    driver_info: {{fake_machine: a1, ipmi_password: {PASSWORD}}}\n"
    )
    for args in (["enroll", str(inventory)], ["node", "list"], ["db", "upgrade"]):
        result = CliRunner().invoke(cli, ["--db", str(db_path), *args], obj=App())
        assert result.exit_code == 2, (args, result.output)
        assert result.output == (
            f"error: --db: database {db_path} is a symbolic link: name the real file "
            "(bmaas never writes the store through a link)\n"
        )
    assert target.read_bytes() == b""
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    dangling = tmp_path / "dangling.db"
    dangling.symlink_to(tmp_path / "nothing-here.db")
    result = CliRunner().invoke(cli, ["--db", str(dangling), "enroll", str(inventory)], obj=App())
    assert result.exit_code == 2
    assert not (tmp_path / "nothing-here.db").exists()


# -- sealed at rest ------------------------------------------------------------------


def test_inline_passwords_are_sealed_and_the_driver_still_gets_them(
    db_path: Path, key_file: Path
) -> None:
    env_ref = "${BMC_PW_FOR_TEST}"
    with Store.open(str(db_path), create=True) as store:
        report = store.nodes.enroll([_spec("a1"), _spec("a2", env_ref)])
        assert report.created == ["a1", "a2"]
        record = store.nodes.get("a1")
    raw = _raw(db_path)
    assert PASSWORD.encode() not in raw
    assert b"kg-a1" not in raw  # every credential key, not only *_password
    stored = _stored(db_path, "a1")
    assert stored["ipmi_password"].startswith("sealed:v1:")
    assert _stored(db_path, "a2")["ipmi_password"] == env_ref  # a reference stays readable
    info = credentials.resolve_driver_info(record.driver_info, node="a1")
    assert info["ipmi_password"].reveal() == PASSWORD
    assert info["ipmi_kg"].reveal() == "kg-a1"
    ring = sealed.keyring()
    assert credentials.sources(record.driver_info) == {
        "ipmi": f"inline, sealed with key {ring.primary}"
    }
    assert PASSWORD not in repr(record)
    assert PASSWORD not in repr(record.to_dict())


def test_an_unchanged_re_enrollment_changes_nothing(db_path: Path, key_file: Path) -> None:
    with Store.open(str(db_path), create=True) as store:
        store.nodes.enroll([_spec("a1")])
        before = _stored(db_path, "a1")
        report = store.nodes.enroll([_spec("a1")])
        assert report.unchanged == ["a1"]
        assert _stored(db_path, "a1") == before
        report = store.nodes.enroll([_spec("a1", OTHER)])
        assert report.updated == ["a1"]
        events = [e.message for e in store.nodes.events("a1")]
        info = credentials.resolve_driver_info(store.nodes.get("a1").driver_info)
    assert info["ipmi_password"].reveal() == OTHER
    assert "re-enrolled: driver_info" in events
    assert not any(OTHER in m or PASSWORD in m for m in events)


def test_rotation_reseals_everything_and_the_old_key_opens_nothing(
    db_path: Path, key_file: Path
) -> None:
    with Store.open(str(db_path), create=True) as store:
        store.nodes.enroll([_spec("a1"), _spec("a2", OTHER), _spec("a3", "${SOME_VAR}")])
    old_ring = sealed.read_keyring(key_file)
    old_values = {n: _stored(db_path, n) for n in ("a1", "a2")}
    result = CliRunner().invoke(
        cli, ["--db", str(db_path), "db", "rotate-key", "--json"], obj=App()
    )
    assert result.exit_code == 0, result.output
    new_ring = sealed.read_keyring(key_file)
    assert new_ring.ids != old_ring.ids
    assert len(new_ring.ids) == 1
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    out = json.loads(result.output)
    assert (out["resealed"], out["nodes"]) == (5, 3)  # a3's ipmi_kg is inline too
    assert (out["old_key_ids"], out["new_key_id"]) == (old_ring.ids, new_ring.primary)
    for node, password in (("a1", PASSWORD), ("a2", OTHER)):
        value = _stored(db_path, node)["ipmi_password"]
        assert value != old_values[node]["ipmi_password"]
        assert new_ring.unseal(value).reveal() == password
        with pytest.raises(KeyProblem, match=f"sealed with key {new_ring.primary}"):
            old_ring.unseal(value)
    assert _stored(db_path, "a3")["ipmi_password"] == "${SOME_VAR}"
    assert PASSWORD.encode() not in _raw(db_path)
    assert PASSWORD not in result.output
    assert OTHER not in result.output


def test_rotation_keep_old_then_finish_and_an_interrupted_one_completes(
    db_path: Path, key_file: Path
) -> None:
    with Store.open(str(db_path), create=True) as store:
        store.nodes.enroll([_spec("a1")])
        first = sealed.read_keyring(key_file).primary
        done = store.keys.rotate(Deadline.after(30), keep_old=True)
        assert sealed.read_keyring(key_file).ids == [done.new, first]
        # an interrupted rotation: a new key written first, nothing re-sealed yet
        sealed.write_keyfile(key_file, [sealed.new_key(), *sealed.read_keyring(key_file).keys])
        store.keys.check()  # everything still opens
        again = store.keys.rotate(Deadline.after(30))
        assert sealed.read_keyring(key_file).ids == [again.new]
        assert again.resealed == 2
        assert again.nodes == 1
        info = credentials.resolve_driver_info(store.nodes.get("a1").driver_info)
    assert info["ipmi_password"].reveal() == PASSWORD


def test_a_missing_key_is_one_line_exit_2_and_never_a_new_key(
    tmp_path: Path, db_path: Path, key_file: Path
) -> None:
    with Store.open(str(db_path), create=True) as store:
        store.nodes.enroll([_spec("a1")])
        kid = sealed.read_keyring(key_file).primary
    key_file.unlink()
    made: list[object] = []

    def factory(**_kw: object) -> object:
        made.append(_kw)
        return driver_factory(**_kw)  # never reached

    result = CliRunner().invoke(
        cli, ["--db", str(db_path), "power", "status", "--all"], obj=App(make_factory=factory)
    )
    assert result.exit_code == 2
    assert result.output == (
        f"error: {sealed.KEY_FILE_ENV}: no key file at {key_file}: the store's sealed "
        f"passwords need it (set {sealed.KEY_FILE_ENV} to where it is)\n"
    )
    assert made == []  # before any driver
    assert not key_file.exists()  # a store whose key went missing never gets a new one
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(
        "nodes:\n  - name: a2\n    driver: fake\n"
        f"    driver_info: {{fake_machine: a2, ipmi_password: {OTHER}}}\n"
    )
    result = CliRunner().invoke(cli, ["--db", str(db_path), "enroll", str(inventory)], obj=App())
    assert result.exit_code == 2, result.output
    assert "no key file at" in result.output
    assert "Traceback" not in result.output
    assert not key_file.exists()
    # a wrong key: says which key the store needs and which the file has
    sealed.write_keyfile(key_file, [sealed.new_key()])
    wrong = sealed.read_keyring(key_file).primary
    result = CliRunner().invoke(
        cli, ["--db", str(db_path), "power", "status", "--all"], obj=App(make_factory=factory)
    )
    assert result.exit_code == 2
    assert result.output == (
        f"error: {sealed.KEY_FILE_ENV}: the store's passwords are sealed with key {kid}, and key "
        f"file {key_file} holds {wrong}: set {sealed.KEY_FILE_ENV} to the store's key file\n"
    )
    assert made == []
    assert PASSWORD not in result.output
    assert OTHER not in result.output


def test_a_key_file_others_can_read_is_refused(db_path: Path, key_file: Path) -> None:
    with Store.open(str(db_path), create=True) as store:
        store.nodes.enroll([_spec("a1")])
        key_file.chmod(0o644)
        with pytest.raises(KeyProblem) as info:
            store.keys.check()
    assert str(info.value) == (
        f"{sealed.KEY_FILE_ENV}: key file {key_file} can be read by others (mode 0644): "
        f"chmod 600 {key_file}"
    )


def test_a_tampered_value_is_one_line_without_the_secret(db_path: Path, key_file: Path) -> None:
    with Store.open(str(db_path), create=True) as store:
        store.nodes.enroll([_spec("a1")])
        value = store.nodes.get("a1").driver_info["ipmi_password"]
        broken = value[:-6] + ("AAAAAA" if not value.endswith("AAAAAA") else "BBBBBB")
        with pytest.raises(KeyProblem, match="does not open with it") as info:
            sealed.keyring().unseal(broken, field="driver_info.ipmi_password", node="a1")
    assert PASSWORD not in str(info.value)


# -- the 0003 migration -----------------------------------------------------------------


def test_the_migration_seals_the_passwords_an_older_store_kept_in_clear(
    db_path: Path, key_file: Path
) -> None:
    store = Store.open(str(db_path), check_schema=False, create=True)
    store.upgrade(Deadline.after(30), "0002")
    now = 1.0
    with store.engine.begin() as conn:
        for name, password in (("old1", PASSWORD), ("old2", "file:/etc/bmc.pw")):
            conn.execute(
                sa.text(
                    "INSERT INTO nodes (name, driver, driver_info, properties, extra, "
                    "power_state, provision_state, maintenance, fault_count, good_count, "
                    "created_at, updated_at) VALUES (:n, 'fake', :info, '{}', '{}', 'unknown', "
                    "'available', 0, 0, 0, :t, :t)"
                ),
                {"n": name, "info": f'{{"ipmi_password": "{password}"}}', "t": now},
            )
    store.close()
    assert not key_file.exists()
    result = CliRunner().invoke(cli, ["--db", str(db_path), "db", "upgrade"], obj=App())
    assert result.exit_code == 0, result.output
    assert f"upgraded 0002 -> {head_revision()}" in result.output  # through 0003, which seals
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert PASSWORD.encode() not in _raw(db_path)
    assert _stored(db_path, "old2")["ipmi_password"] == "file:/etc/bmc.pw"
    with Store.open(str(db_path)) as store:
        info = credentials.resolve_driver_info(store.nodes.get("old1").driver_info)
        assert info["ipmi_password"].reveal() == PASSWORD
    # and back (alembic's downgrade): opened again with the same key
    from alembic import command

    from bmaas.store.migrate import _config

    engine = sa.create_engine(f"sqlite:///{db_path}")
    with engine.begin() as conn:
        command.downgrade(_config(conn), "0002")
    engine.dispose()
    assert _stored(db_path, "old1")["ipmi_password"] == PASSWORD


def test_a_new_store_with_references_only_needs_no_key(db_path: Path, key_file: Path) -> None:
    with Store.open(str(db_path), create=True) as store:
        store.nodes.enroll(
            [NodeSpec("r1", "fake", {"fake_machine": "r1", "ipmi_password": "${X}"})]
        )
        assert store.keys.check() is None
    assert not key_file.exists()
    assert os.environ[sealed.KEY_FILE_ENV] == str(key_file)


def test_status_check_says_whether_the_key_opens_the_store(db_path: Path, key_file: Path) -> None:
    with Store.open(str(db_path), create=True) as store:
        store.nodes.enroll([_spec("a1")])

    def database() -> dict[str, object]:
        result = CliRunner().invoke(
            cli,
            ["--db", str(db_path), "status", "check", "--only", "database", "--json"],
            obj=App(),
        )
        assert PASSWORD not in result.output
        (check,) = json.loads(result.output)["checks"]
        return check

    check = database()
    assert check["result"] == "Success"
    assert f"inline passwords sealed; key file {key_file} opens them" in check["details"]
    key_file.unlink()
    check = database()
    assert check["result"] == "Failure"
    assert any("no key file at" in line for line in check["details"])


def test_sealed_on_every_backend(store: Store, key_file: Path) -> None:
    """SQLite and PostgreSQL alike (the ``store`` fixture runs on both): what
    the database returns for driver_info holds no password."""
    store.nodes.enroll([_spec("b1")])
    with store.engine.connect() as conn:
        (raw,) = conn.execute(
            sa.text("SELECT CAST(driver_info AS TEXT) FROM nodes WHERE name = 'b1'")
        ).one()
    assert PASSWORD not in raw
    assert "sealed:v1:" in raw
    info = credentials.resolve_driver_info(store.nodes.get("b1").driver_info)
    assert info["ipmi_password"].reveal() == PASSWORD


def test_a_record_handed_straight_to_a_driver_opens_its_password(
    db_path: Path, key_file: Path
) -> None:
    """``build_driver(record.name, record.driver, record.driver_info)`` (no
    credentials.resolve first) worked with an inline password before it was
    sealed; it still does: DriverInfo opens a sealed value, never sends it."""
    from bmaas.driver_info import DriverInfo

    with Store.open(str(db_path), create=True) as store:
        store.nodes.enroll([_spec("a1")])
        record = store.nodes.get("a1")
    stored = {"ipmi_address": "bmc", "ipmi_password": record.driver_info["ipmi_password"]}
    info = DriverInfo.parse(stored)
    assert info.ipmi_password.reveal() == PASSWORD
    key_file.unlink()
    with pytest.raises(InputError, match=r"driver_info\.ipmi_password: no key file at") as caught:
        DriverInfo.parse(stored)
    assert PASSWORD not in str(caught.value)


@pytest.mark.parametrize("damaged", ["sealed:v1:nokeyid", "sealed:v1:ü:x", "plain"])
def test_resealing_a_damaged_value_is_a_key_problem_not_a_value_error(damaged: str) -> None:
    ring = sealed.Keyring([sealed.new_key()])
    with pytest.raises(KeyProblem):
        ring.reseal(damaged, field="driver_info.ipmi_password", node="n1")
    good = ring.seal("secret-pw")
    assert ring.reseal(good) == good  # already under the first key: unchanged
