"""Pooled sessions kept out of the cyclic garbage collector's way.

A pool of 5,000 Redfish sessions is some 850,000 Python objects that live
for hours. CPython's full collection walks every one of them, and one falls
due whenever the objects that survived into the oldest generation since the
last full collection outnumber a quarter of those there before -- exactly
what a pass that opened sessions leaves behind. So the *next* pass, the first
steady one, paid for it: 0.78 s of collection in a 5,000-node Redfish pass
(0.80 ms of client CPU a read instead of 0.23, measured on a 10,000-node
hwlab lab), and every later full collection walked the whole pool again.

:class:`HeapSettler` does that collection *between* passes, after a pass
that opened or retired enough sessions to matter, and then freezes what
survived (:func:`gc.freeze`: the permanent generation, which no collection
walks). Steady passes neither open nor retire sessions, so they never pay a
full walk of the pool. A frozen session that is logged out later can only be
collected once it is unfrozen, so a settle that follows retirements unfreezes
first: the one collection reaches them too.

``gc.freeze`` changes the whole process's collector, so only bmaas's own
processes settle: the sweep workers (:mod:`bmaas.sweep`) and the ``bmaas
sync`` command's loop. Library code running in someone else's process (the
drivers inside an Ironic conductor) never calls it.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Protocol

from bmaas.pool import PoolStats

__all__ = ["MIN_CHANGES", "Collector", "HeapSettler"]

LOG = logging.getLogger(__name__)

#: sessions opened plus retired since the last settle before another is worth
#: a full collection (a few hundred sessions are a few tens of thousands of
#: objects: below that, the collector's own schedule costs less)
MIN_CHANGES = 256


class Collector(Protocol):
    """What a settle needs of :mod:`gc` (tests pass a recorder)."""

    def collect(self) -> int: ...
    def freeze(self) -> None: ...
    def unfreeze(self) -> None: ...


class HeapSettler:
    """Collect and freeze after a pass that changed the pool; see the module
    docstring. One per process that owns its pool, called by the loop that
    runs the passes, after each one, with the pool's counters."""

    def __init__(
        self,
        *,
        min_changes: int = MIN_CHANGES,
        collector: Collector | None = None,
    ) -> None:
        self.min_changes = min_changes
        self._gc: Collector = collector or gc
        self._opened = 0
        self._retired = 0
        #: settles done
        self.settles = 0

    def after_pass(self, stats: PoolStats) -> bool:
        """Settle if the pool opened plus retired at least ``min_changes``
        sessions since the last settle; True if it did."""
        opened, retired = stats.opened, stats.dropped + stats.idled
        new, gone = opened - self._opened, retired - self._retired
        if new + gone < self.min_changes:
            return False
        start = time.perf_counter()
        if gone:
            self._gc.unfreeze()  # retired sessions may be frozen: let them go
        self._gc.collect()
        self._gc.freeze()
        self._opened, self._retired = opened, retired
        self.settles += 1
        LOG.debug(
            "heap settled after %d new and %d retired sessions in %.2fs",
            new,
            gone,
            time.perf_counter() - start,
        )
        return True
