"""The IPMI cipher suite 3 downgrade learned by sync workers sharing one
PostgreSQL database (``--split``), each reading its share through worker
processes (``--processes``), is recorded on the node by whichever worker
read it (issue 36): ``extra.bmc_quirks`` and one ``bmc_quirk`` event, however
many passes and workers saw it. Fake drivers (tests/unit/quirk_support.py)
on a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bmaas.deadline import Deadline
from bmaas.inventory import NodeSpec
from bmaas.share import FleetShare
from bmaas.store import Store
from bmaas.store.records import QUIRKS_KEY
from bmaas.sweep import ShardedSweeper
from bmaas.sync import SyncParts, SyncSettings, sync_pass
from tests.unit.quirk_support import DOWNGRADED, make_factory

pytestmark = pytest.mark.pg

NODES = [f"n{i:02d}" for i in range(1, 9)]


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[Store]:
    store = Store.open(pg_url, create=True)
    store.nodes.enroll(
        [NodeSpec(name=n, driver="fake", driver_info={"fake_machine": n}) for n in NODES], []
    )
    yield store
    store.close()


def test_workers_on_one_postgresql_record_what_their_shards_learned(
    pg_store: Store, pg_url: str
) -> None:
    second = Store.open(pg_url)  # the other worker's own connection
    try:
        with (
            FleetShare(pg_store, ttl=60.0, name="w1") as one,
            FleetShare(second, ttl=60.0, name="w2") as two,
            ShardedSweeper(processes=2, workers=2, make_factory=make_factory) as sweeper,
        ):
            read: dict[str, set[str]] = {}
            for _ in range(2):  # a second pass: nothing new, nothing written again
                for store, share in ((pg_store, one), (second, two)):
                    report = sync_pass(
                        store,
                        SyncSettings(),
                        SyncParts(make_factory(), sweeper=sweeper, share=share),
                        deadline=Deadline.after(60.0),
                    )
                    read.setdefault(share.worker_id, set()).update(r.node for r in report.results)
    finally:
        second.close()
    assert read[one.worker_id] | read[two.worker_id] == set(NODES)
    assert read[one.worker_id].isdisjoint(read[two.worker_id])
    kept = {n.name: list(n.extra.get(QUIRKS_KEY) or ()) for n in pg_store.nodes.find()}
    assert {n for n, q in kept.items() if q} == set(DOWNGRADED)
    for name in DOWNGRADED:
        events = [e for e in pg_store.nodes.events(name, limit=100) if e.kind == "bmc_quirk"]
        assert len(events) == 1
