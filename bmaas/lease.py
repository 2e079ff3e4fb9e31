"""Keep leases alive while their holder works.

A request, its attempts and moves hold leases on the wall clock (see
:mod:`bmaas.store.owners`); if the holder stops renewing, any later run
reclaims what they hold. :class:`LeaseKeeper` renews every owner it is given,
every third of the lease, from a background thread, so the code doing the
work (a deploy waiting minutes for a node to boot) never has to::

    with LeaseKeeper(store, ttl=60) as keeper:
        request = store.owners.create(OwnerKind.REQUEST, ttl=60)
        keeper.add(request.id)
        ...
        if keeper.lost:            # reclaimed behind our back: stop touching it
            raise keeper.lost[0]

A lost lease is final (the store refuses to renew an expired one), so the
keeper drops it, records it in ``lost`` and calls ``on_lost``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from bmaas import threads
from bmaas.store import DEFAULT_LEASE_TTL, LeaseLost, StoreError

if TYPE_CHECKING:  # the caller's store: importing it here would load SQLAlchemy
    from bmaas.store import Store

__all__ = ["LeaseKeeper"]

LOG = logging.getLogger(__name__)


class LeaseKeeper:
    def __init__(
        self,
        store: Store,
        *,
        ttl: float = DEFAULT_LEASE_TTL,
        interval: float | None = None,
        on_lost: Callable[[LeaseLost], None] | None = None,
    ) -> None:
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self.store = store
        self.ttl = ttl
        #: seconds between renewals: a third of the lease leaves two misses of slack
        self.interval = ttl / 3 if interval is None else interval
        self.on_lost = on_lost
        self.lost: list[LeaseLost] = []
        self._ids: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, owner_id: str) -> None:
        with self._lock:
            self._ids.add(owner_id)

    def discard(self, owner_id: str) -> None:
        """Stop renewing (the owner ended on purpose)."""
        with self._lock:
            self._ids.discard(owner_id)

    def renew_now(self) -> list[LeaseLost]:
        """Renew every lease once; returns the ones lost this time."""
        with self._lock:
            ids = sorted(self._ids)
        if not ids:
            return []
        try:
            lost = self.store.owners.renew_leases(ids, ttl=self.ttl)
        except StoreError as exc:
            # The lease still has two thirds left; the next round may get through.
            LOG.warning("could not renew %d lease(s): %s", len(ids), exc)
            return []
        for gone in lost:
            LOG.error("%s", gone)
            self.discard(gone.owner or "")
            self.lost.append(gone)
            if self.on_lost is not None:
                self.on_lost(gone)
        return lost

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.renew_now()

    def start(self) -> LeaseKeeper:
        if self._thread is None:
            self._thread = threads.spawn(self._run, "bmaas-leases")
        return self

    def close(self) -> None:
        """Stop renewing and wait for the thread; safe to call twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> LeaseKeeper:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
