"""Three ``bmaas sync --interval`` processes on one PostgreSQL split the
fleet: in steady state each node is read by exactly one of them per pass;
SIGKILL one, and the other two take its nodes over within one lease period
(plus the pass that reads them); the survivors leave cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bmaas import inventory as inventory_mod
from bmaas.gate import bmc_of
from bmaas.hwlab.pyexec import python_argv
from bmaas.share import owner_of
from bmaas.store import Store
from tests.fleet import write_inventory

pytestmark = pytest.mark.pg

REPO = Path(__file__).resolve().parents[2]
BMAAS = tuple(python_argv("-c", "from bmaas.cli import main; main()"))
NODES = 45
#: the workers' lease (--lease-ttl) and pass interval, seconds
TTL = 3.0
INTERVAL = 0.3
SYNC_ARGS = ("--interval", str(INTERVAL), "--lease-ttl", str(TTL), "--processes", "1")
SYNC_ARGS += ("--deadline", "2", "--json")
#: seconds any wait in this test may last
LIMIT = 60.0


def _passes(path: Path) -> list[dict]:
    """Every complete JSON document a worker printed so far."""
    text = path.read_text()
    decoder, out, at = json.JSONDecoder(), [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return out
        try:
            doc, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return out  # a document still being written
        out.append(doc)


def _read(doc: dict) -> set[str]:
    return {r["node"] for r in doc["results"]}


def _until(what: str, check: Callable[[], bool]) -> float:
    deadline = time.monotonic() + LIMIT
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.05)
    return time.time()


def _settled(store: Store, everything: set[str], workers: int) -> bool:
    """``workers`` live workers, and every node held by the one that wants it.

    Three distinct holders are not enough: a newcomer claims a node only
    after its old holder gives it back at *that* holder's next pass, so for
    a pass or two a node can sit with a worker that no longer wants it (and
    on a loaded runner the newcomer may finish two passes before the old
    holder's next one). Once every share is where the rendezvous hash puts
    it, nothing moves while the membership holds.
    """
    live = [o.id for o in store.shares.workers()]
    held = store.shares.held()
    if len(live) != workers or set(held) != everything:
        return False
    return all(held[node] == owner_of(bmc_of("fake", node, {}), live) for node in everything)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[[str, str], subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(url: str, name: str) -> subprocess.Popen[bytes]:
        out = open(tmp_path / f"{name}.json", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [*BMAAS, "--db", url, "sync", *SYNC_ARGS],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=out,
            stderr=subprocess.PIPE,
        )
        out.close()
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=LIMIT)


def test_three_workers_split_the_fleet_and_take_over_a_dead_ones_nodes(
    pg_url: str, tmp_path: Path, workers: Callable[[str, str], subprocess.Popen[bytes]]
) -> None:
    store = Store.open(pg_url)
    try:
        inventory = [{"name": f"w{i:02d}", "driver": "fake"} for i in range(NODES)]
        inventory_mod.enroll(
            store, inventory_mod.load(write_inventory(tmp_path / "i.yaml", inventory))
        )
        everything = {f"w{i:02d}" for i in range(NODES)}
        names = ["a", "b", "c"]
        procs = {name: workers(pg_url, name) for name in names}
        outputs = {name: tmp_path / f"{name}.json" for name in names}

        # Steady state: three live workers, every node held by the one that wants it.
        _until("three workers sharing every node", lambda: _settled(store, everything, 3))
        assert len(set(store.shares.held().values())) == 3
        # Two more passes each, so every worker's last pass saw the final split.
        counts = {n: len(_passes(outputs[n])) for n in names}
        _until(
            "two more passes each",
            lambda: all(len(_passes(outputs[n])) >= counts[n] + 2 for n in names),
        )
        last = {n: _read(_passes(outputs[n])[-1]) for n in names}
        assert set().union(*last.values()) == everything
        assert sum(len(s) for s in last.values()) == NODES  # exactly one reader per node
        assert all(last.values())

        # Kill one: its nodes are taken over once its lease has run out.
        shares = store.shares.held()
        victim = "c"
        held = set(last[victim])
        victim_id = shares[next(iter(held))]
        killed_at = time.time()
        procs[victim].send_signal(signal.SIGKILL)
        procs[victim].wait(timeout=LIMIT)

        def taken_over() -> bool:
            now = store.shares.held()
            if any(now.get(node) in (None, victim_id) for node in held):
                return False
            # read by a survivor's pass begun after the kill (a steady read
            # writes nothing to the store: its passes say what they read)
            read = set().union(
                *(
                    _read(p)
                    for n in names
                    if n != victim
                    for p in _passes(outputs[n])
                    if p["started_at"] > killed_at
                )
            )
            return held <= read

        over_at = _until("the survivors taking the dead worker's nodes", taken_over)
        print(f"taken over {over_at - killed_at:.2f}s after the kill (lease {TTL}s)")
        # Within one lease period, counted in passes rather than wall time (a
        # loaded runner stretches every pass): the victim's lease and shares
        # were last renewed before the kill, so both are gone by kill + TTL,
        # and each survivor's first pass that starts after that must claim its
        # part of the victim's nodes. Together those passes read all of them.
        expired = killed_at + TTL
        survivors = [n for n in names if n != victim]

        def first_after(name: str) -> dict | None:
            return next((p for p in _passes(outputs[name]) if p["started_at"] > expired), None)

        _until("a pass each after the lease", lambda: all(first_after(n) for n in survivors))
        after = set().union(*(_read(first_after(n) or {"results": []}) for n in survivors))
        assert held <= after, sorted(held - after)
        assert victim_id not in [o.id for o in store.shares.workers()]

        _until("the survivors settled", lambda: _settled(store, everything, 2))
        counts = {n: len(_passes(outputs[n])) for n in survivors}
        _until(
            "two more passes each",
            lambda: all(len(_passes(outputs[n])) >= counts[n] + 2 for n in survivors),
        )
        last = {n: _read(_passes(outputs[n])[-1]) for n in survivors}
        assert set().union(*last.values()) == everything
        assert sum(len(s) for s in last.values()) == NODES

        for name in survivors:
            procs[name].send_signal(signal.SIGTERM)
        for name in survivors:
            assert procs[name].wait(timeout=LIMIT) == 0, procs[name].stderr
        assert store.shares.workers() == []  # they left: nothing waits for a lease to run out
        assert store.shares.held() == {}
    finally:
        store.close()
