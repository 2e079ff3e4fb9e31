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

#: seconds any wait in a worker may last
LIMIT = 60.0


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + LIMIT
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {path}")
        time.sleep(0.005)


def _block_forever(ready: Path, note: dict[str, Any]) -> None:
    ready.write_text(json.dumps(note))
    time.sleep(LIMIT)  # the test kills us long before this
    raise SystemExit("was not killed")


def race(db: str, go: str, out: str, seed: str) -> None:
    store = Store.open(db)
    owner = store.create_owner(OwnerKind.ATTEMPT, name=f"racer-{seed}", ttl=600)
    names = [n.name for n in store.nodes()]
    random.Random(seed).shuffle(names)
    _wait_for(Path(go))
    claimed: list[str] = []
    refused: dict[str, str] = {}
    for name in names:
        try:
            claimed.append(store.claim(name, owner.id).node)
        except NodeUnavailable as exc:
            refused[name] = exc.reason or ""
    Path(out).write_text(json.dumps({"owner": owner.id, "claimed": claimed, "refused": refused}))


def hold(db: str, ready: str, claims: str) -> None:
    store = Store.open(db)
    owner = store.create_owner(OwnerKind.ATTEMPT, name="doomed", ttl=30)
    names = [n.name for n in store.nodes()]
    for name in names[: int(claims)]:
        store.claim(name, owner.id)
    real = Store._event

    def stop_inside(self: Store, conn: Any, node_id: int, kind: str, *a: Any, **kw: Any) -> None:
        real(self, conn, node_id, kind, *a, **kw)
        if kind == "claimed":  # the INSERT is done, the commit is not
            _block_forever(Path(ready), {"owner": owner.id, "mid_claim": names[int(claims)]})

    Store._event = stop_inside  # type: ignore[method-assign]
    store.claim(names[int(claims)], owner.id)


def swap(db: str, ready: str) -> None:
    store = Store.open(db)
    move = next(o for o in store.owners(kind=OwnerKind.MOVE))
    instance = next(o for o in store.owners(kind=OwnerKind.INSTANCE))
    nodes = [a.node for a in store.allocations(owner_id=move.id)]
    real = Store._swap_one
    done: list[str] = []

    def stop_between(self: Store, conn: Any, node: str, old: str, new: str) -> None:
        if done:
            _block_forever(Path(ready), {"swapped_first": done[0]})
        real(self, conn, node, old, new)
        done.append(node)

    Store._swap_one = stop_between  # type: ignore[method-assign]
    store.swap_owners([(n, move.id, instance.id) for n in nodes])


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    {"race": race, "hold": hold, "swap": swap}[mode](*args)
