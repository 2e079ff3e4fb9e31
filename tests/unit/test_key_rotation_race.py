"""Two rotations at once, and rotations killed at random instants, on SQLite
(issue 44: two ``bmaas db rotate-key`` together used to seal the store with a
key no file held, and a kill inside the key file's write left a temporary
file with the keys behind). The PostgreSQL twin: tests/pg."""

from __future__ import annotations

from pathlib import Path

import pytest

from bmaas import sealed
from bmaas.deadline import Deadline
from bmaas.fakes.clock import FakeClock
from bmaas.store import Store
from bmaas.store.locks import LockBusy, locked_dirs, store_wide
from tests import rotation


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "db" / "bmaas.db")


@pytest.fixture
def key_file(tmp_path: Path, db: str) -> Path:
    path = tmp_path / "keys" / "store.key"
    rotation.enroll(db, path)
    return path


def test_two_rotations_at_once_leave_every_password_readable(db: str, key_file: Path) -> None:
    assert rotation.race(db, key_file, rotation.rounds(60)) > 0


def test_a_rotation_killed_at_any_instant_loses_nothing_and_leaves_nothing(
    db: str, key_file: Path
) -> None:
    assert rotation.kill(db, key_file, rotation.rounds(40), seed=44, within=0.25) > 0


def test_a_killed_write_leaves_no_temporary_file_with_keys(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "store.key"
    sealed.write_keyfile(path, [sealed.new_key()])
    # what a write killed between its link and its rename leaves (or a system without O_TMPFILE)
    (path.parent / f".{path.name}.999999.tmp").write_bytes(b"leftover")
    sealed.write_keyfile(path, [sealed.new_key()])
    assert [p.name for p in path.parent.iterdir()] == ["store.key"]


def test_a_second_store_wide_change_waits_until_its_deadline_then_says_so(
    db: str, key_file: Path
) -> None:
    clock = FakeClock(start=0.0)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(seconds)

    with Store.open(db, key_file=key_file) as store:
        held = locked_dirs([key_file.parent], Deadline.after(1), what="x")  # another rotation
        busy = pytest.raises(LockBusy, match=r"another process is changing the store's key")
        with (
            held,
            busy,
            store_wide(
                store.db,
                Deadline.after(0.2, clock=clock),
                what="the store's key",
                also=[key_file.parent],
                sleep=sleep,
            ),
        ):
            pytest.fail("entered a lock another holds")
        assert sleeps == pytest.approx([0.05, 0.05, 0.05, 0.05])
        # released: the rotation goes through
        done = store.keys.rotate(Deadline.after(30))
    assert sealed.read_keyring(key_file).ids == [done.new]


def test_the_same_directory_twice_is_locked_once(tmp_path: Path) -> None:
    with locked_dirs([tmp_path, tmp_path / "."], Deadline.after(0.1), what="x"):
        pass  # a second flock on the same directory by this process would wait for ever


def test_an_enrollment_beside_a_rotation_seals_with_a_key_that_stays(
    db: str, key_file: Path
) -> None:
    assert rotation.race_enroll(db, key_file, rotation.rounds(30)) > 0
