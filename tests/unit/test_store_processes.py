"""Real processes on one SQLite file: no node is ever claimed twice, and what
a SIGKILLed process held comes back once its lease expires.

Each test starts its processes with ``subprocess`` (``tests.unit.store_worker``),
bounds every wait, and kills whatever is left in ``finally``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bmaas.store import OwnerKind, Store

pytestmark = pytest.mark.procs  # real processes: seconds each, outside the quick loop

REPO = Path(__file__).resolve().parents[2]
#: seconds any one process may take
LIMIT = 90.0

Enroll = Callable[..., list[str]]


@pytest.fixture
def store(sqlite_store: Store) -> Store:
    """Several processes on one SQLite file: this module is about SQLite."""
    return sqlite_store


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.unit.store_worker", *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=LIMIT)


def _wait_for_file(path: Path, proc: subprocess.Popen[str]) -> dict[str, object]:
    deadline = time.monotonic() + LIMIT
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)
    return json.loads(path.read_text())  # published whole (store_worker._publish)


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=LIMIT)
    assert proc.returncode == -signal.SIGKILL


def test_eight_processes_racing_for_twenty_nodes_never_share_one(
    store: Store,
    enroll: Enroll,
    db_path: Path,
    tmp_path: Path,
    spawn: Callable[..., subprocess.Popen[str]],
) -> None:
    enroll(20)
    go = tmp_path / "go"
    outs = [tmp_path / f"out-{i}.json" for i in range(8)]
    procs = [spawn("race", str(db_path), str(go), str(out), str(i)) for i, out in enumerate(outs)]
    go.touch()  # every worker is past its imports by now or soon; they start together
    for proc in procs:
        _, err = proc.communicate(timeout=LIMIT)
        assert proc.returncode == 0, err
    results = [json.loads(out.read_text()) for out in outs]
    claims = Counter(node for r in results for node in r["claimed"])
    assert sorted(claims) == sorted(
        n.name for n in store.nodes.find()
    )  # every node went to someone
    assert set(claims.values()) == {1}  # and to exactly one
    for r in results:  # what each process believes it holds is what the store says
        assert sorted(a.node for a in store.owners.allocations(owner_id=r["owner"])) == sorted(
            r["claimed"]
        )
        assert all(
            reason.startswith("allocated to attempt racer-") for reason in r["refused"].values()
        )
    assert len(store.owners.allocations()) == 20


def test_sigkill_mid_claim_then_lease_expiry_gives_everything_back(
    store: Store,
    enroll: Enroll,
    db_path: Path,
    tmp_path: Path,
    spawn: Callable[..., subprocess.Popen[str]],
) -> None:
    enroll(5)
    ready = tmp_path / "ready"
    proc = spawn("hold", str(db_path), str(ready), "3")
    note = _wait_for_file(ready, proc)
    _kill(proc)

    # The three committed claims survive the crash; the one in flight does not.
    # (``store`` reads on a fake clock; only reclaiming depends on the time.)
    held = store.owners.allocations()
    assert [a.node for a in held] == ["n01", "n02", "n03"]
    assert note["mid_claim"] == "n04"
    assert store.nodes.get("n04").owner_id is None
    assert all(a.owner.id == note["owner"] for a in held)

    # Before the lease runs out nothing is reclaimed (the holder may be slow, not dead).
    now = Store.open(str(db_path), clock=time.time)
    try:
        assert now.lifecycle.reclaim_expired() == []
    finally:
        now.close()
    # A later run, once the lease expired, takes everything back.
    later = Store.open(str(db_path), clock=lambda: time.time() + 31)
    try:
        assert [a.node for a in later.owners.allocations(expired=True)] == ["n01", "n02", "n03"]
        [done] = later.lifecycle.reclaim_expired(
            needs_cleaning=False
        )  # the store alone: no drivers
        assert done.nodes == ["n01", "n02", "n03"]
        assert later.owners.allocations() == []
        fresh = later.owners.create(OwnerKind.ATTEMPT)
        assert [later.owners.claim(n.name, fresh.id).node for n in later.nodes.find()] == [
            "n01",
            "n02",
            "n03",
            "n04",
            "n05",
        ]
    finally:
        later.close()


def test_sigkill_mid_swap_leaves_the_old_owner_everywhere(
    store: Store,
    enroll: Enroll,
    db_path: Path,
    tmp_path: Path,
    spawn: Callable[..., subprocess.Popen[str]],
) -> None:
    enroll(2)
    move = store.owners.create(OwnerKind.MOVE, ttl=600)
    store.owners.create(OwnerKind.INSTANCE)
    store.owners.claim("n01", move.id)
    store.owners.claim("n02", move.id)
    ready = tmp_path / "ready"
    proc = spawn("swap", str(db_path), str(ready))
    note = _wait_for_file(ready, proc)
    assert note["swapped_first"] == "n01"  # the first change was written, uncommitted
    _kill(proc)
    assert {a.node: a.owner.id for a in store.owners.allocations()} == {
        "n01": move.id,
        "n02": move.id,
    }
