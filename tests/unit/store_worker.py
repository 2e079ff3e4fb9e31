"""A separate process for the store's multi-process tests.

    python -m tests.unit.store_worker race DB GO OUT SEED
    python -m tests.unit.store_worker hold DB READY CLAIMS
    python -m tests.unit.store_worker swap DB READY

``race``: wait for the GO file, then try to claim every node in a shuffled
order; write what it got to OUT as JSON. ``hold``: claim CLAIMS nodes, then
start one more claim and stop *inside* its transaction (after the write,
before the commit), announce READY, and wait to be killed. ``swap``: start
an owner swap of two nodes and stop inside it after the first change.
Every wait is bounded, so a test that forgets to kill us does not hang.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from bmaas.faults import NodeUnavailable
from bmaas.store import OwnerKind, Store
from bmaas.store import owners as store_owners
from bmaas.store.base import Tx

#: seconds any wait in a worker may last
LIMIT = 60.0


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + LIMIT
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {path}")
        time.sleep(0.005)


def _publish(path: Path, note: dict[str, Any]) -> None:
    """``note`` at ``path``, whole or not at all: written aside, then renamed
    (a test that saw the name and read at once found it empty at load 25)."""
    aside = path.with_name(path.name + ".part")
    aside.write_text(json.dumps(note))
    aside.replace(path)


def _block_forever(ready: Path, note: dict[str, Any]) -> None:
    _publish(ready, note)
    time.sleep(LIMIT)  # the test kills us long before this
    raise SystemExit("was not killed")


def race(db: str, go: str, out: str, seed: str) -> None:
    store = Store.open(db)
    owner = store.owners.create(OwnerKind.ATTEMPT, name=f"racer-{seed}", ttl=600)
    names = [n.name for n in store.nodes.find()]
    random.Random(seed).shuffle(names)
    _wait_for(Path(go))
    claimed: list[str] = []
    refused: dict[str, str] = {}
    for name in names:
        try:
            claimed.append(store.owners.claim(name, owner.id).node)
        except NodeUnavailable as exc:
            refused[name] = exc.reason or ""
    _publish(Path(out), {"owner": owner.id, "claimed": claimed, "refused": refused})


def hold(db: str, ready: str, claims: str) -> None:
    store = Store.open(db)
    owner = store.owners.create(OwnerKind.ATTEMPT, name="doomed", ttl=30)
    names = [n.name for n in store.nodes.find()]
    for name in names[: int(claims)]:
        store.owners.claim(name, owner.id)
    real = Tx.event

    def stop_inside(self: Tx, node_id: int, kind: str, *a: Any, **kw: Any) -> None:
        real(self, node_id, kind, *a, **kw)
        if kind == "claimed":  # the INSERT is done, the commit is not
            _block_forever(Path(ready), {"owner": owner.id, "mid_claim": names[int(claims)]})

    Tx.event = stop_inside  # type: ignore[method-assign]
    store.owners.claim(names[int(claims)], owner.id)


def swap(db: str, ready: str) -> None:
    store = Store.open(db)
    move = next(o for o in store.owners.find(kind=OwnerKind.MOVE))
    instance = next(o for o in store.owners.find(kind=OwnerKind.INSTANCE))
    nodes = [a.node for a in store.owners.allocations(owner_id=move.id)]
    real = store_owners.swap_one
    done: list[str] = []

    def stop_between(tx: Tx, node: str, old: str, new: str) -> None:
        if done:
            _block_forever(Path(ready), {"swapped_first": done[0]})
        real(tx, node, old, new)
        done.append(node)

    store_owners.swap_one = stop_between
    store.owners.swap([(n, move.id, instance.id) for n in nodes])


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    {"race": race, "hold": hold, "swap": swap}[mode](*args)
