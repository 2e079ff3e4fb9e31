"""This sync worker's share of the fleet, among the live workers on one database.

Several ``bmaas sync --interval`` processes (on one machine or several)
pointed at one database split the fleet between them::

    worker A ─┐                       live workers (owners of kind "sync",
    worker B ─┼─▶ store ◀─ leases ──  leases renewed every ttl/3 by a thread)
    worker C ─┘
    each pass:  want  = nodes whose BMC's rendezvous hash is highest for me
                give back what I hold but no longer want
                hold  = claim_sync_share(want)   (atomic; never two holders)
                read  = hold

* **Exactly one live reader per node**: a node is read only by the worker
  holding its share row, and the store never lets two workers hold one.
* **Rendezvous hashing** (highest ``blake2b(worker, node)`` wins): every
  worker computes the same owner for a node from the same member list, and
  when a worker joins or leaves only its own share moves (1/N of the fleet).
* **Takeover within one lease period**: a dead worker stops renewing; once
  its lease (``ttl``) has run out it drops from the live list, its share
  rows (claimed for ``ttl`` at its last pass) have run out too, and the
  others claim its nodes at their next pass.
* **Renewed by the pass, at most every ttl/3**: a pass that wants what
  the worker already holds, claimed less than ``ttl/3`` ago, writes
  nothing (its rows still have two thirds of their ``ttl`` to run); a
  sync every 0.2 s renewed every node's row every pass, half as much
  client CPU again as the rest of the store work of a steady pass.
* **Joining never double-reads**: a newcomer wants its share at once but
  can claim a node only after the old holder gives it back (at that
  holder's next pass) or its row expires; until then the old holder alone
  reads it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bmaas.gate import bmc_of
from bmaas.lease import LeaseKeeper
from bmaas.store import DEFAULT_LEASE_TTL, OwnerKind

if TYPE_CHECKING:  # the caller's store: importing it here would load SQLAlchemy
    from bmaas.store import Store
from bmaas.store.records import NodeRecord

__all__ = ["FleetShare", "owner_of"]

LOG = logging.getLogger(__name__)


def _score(worker: str, node: str) -> bytes:
    return hashlib.blake2b(f"{worker}\0{node}".encode(), digest_size=8).digest()


def owner_of(node: str, workers: Sequence[str]) -> str:
    """The worker that should read ``node`` -- its BMC's label
    (:func:`bmaas.gate.bmc_of`), so a BMC is read by one worker -- by
    rendezvous hashing."""
    return max(workers, key=lambda w: _score(w, node))


class FleetShare:
    """Membership of one sync worker; :meth:`take` before each pass."""

    def __init__(
        self, store: Store, *, ttl: float = DEFAULT_LEASE_TTL, name: str | None = None
    ) -> None:
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self.store = store
        self.ttl = ttl
        self.name = name
        self.keeper = LeaseKeeper(store, ttl=ttl).start()
        self.worker_id = self._join()
        self._held: set[str] = set()
        #: when the held rows were last claimed (the store's clock)
        self._claimed_at: float | None = None

    def _join(self) -> str:
        owner = self.store.owners.create(OwnerKind.SYNC, name=self.name, ttl=self.ttl)
        self.keeper.add(owner.id)
        LOG.info("sync worker %s joined", owner.id)
        return owner.id

    def take(self, records: Sequence[NodeRecord]) -> list[NodeRecord]:
        """The records this worker reads this pass (its share, as held)."""
        if self.keeper.lost:
            # Our lease ran out (the database was unreachable for a lease
            # period): the others may have taken our nodes. Start over.
            LOG.warning("sync worker %s lost its lease; joining again", self.worker_id)
            self.keeper.lost.clear()
            self._held.clear()
            self._claimed_at = None
            self.worker_id = self._join()
        live = [o.id for o in self.store.shares.workers()]
        if self.worker_id not in live:
            live.append(self.worker_id)
        # By BMC: every node behind one BMC (one Redfish service's systems)
        # goes to one worker, whose gate alone paces it.
        want = [
            r.name
            for r in records
            if owner_of(bmc_of(r.driver, r.name, r.driver_info), live) == self.worker_id
        ]
        now = self.store.clock()
        fresh = self._claimed_at is not None and now - self._claimed_at < self.ttl / 3
        if fresh and set(want) == self._held:  # held, rows with >= 2/3 ttl to run
            return [r for r in records if r.name in self._held]
        give_back = sorted(self._held - set(want))
        if give_back:
            self.store.shares.release(self.worker_id, give_back)
        held = set(self.store.shares.claim(self.worker_id, want, ttl=self.ttl))
        self._held, self._claimed_at = held, now
        return [r for r in records if r.name in held]

    def close(self) -> None:
        """Give back every share and leave (the others take over at once)."""
        self.keeper.close()
        try:
            self.store.shares.release(self.worker_id)
            self.store.lifecycle.delete_owner(self.worker_id)
        except Exception:  # leaving is a courtesy: the lease expires anyway
            LOG.warning("sync worker %s could not leave cleanly", self.worker_id, exc_info=True)

    def __enter__(self) -> FleetShare:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
