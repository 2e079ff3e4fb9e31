"""The IPMI cipher suite 3 downgrade is recorded and reported by every sync
path (issue 36), not only by a one-shot command's end: each pass's results
carry what their drivers learned (``NodeResult.quirks``), and the process
that writes the store records it on the node (``extra.bmc_quirks``, one
``bmc_quirk`` event, a warning), whether the driver ran in this process, in
a sharded worker process (whose drivers never come back), or in one of
several workers sharing the database. No sleeps: fake drivers, fake clock."""

from __future__ import annotations

import dataclasses
import logging
import pickle
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import PowerState, Quirk
from bmaas.ops import NodeResult, run_on_nodes
from bmaas.pool import DriverPool
from bmaas.quirks import record_results
from bmaas.runtime import Runtime
from bmaas.share import FleetShare
from bmaas.store import Store
from bmaas.store.records import QUIRKS_KEY, NodeRecord
from bmaas.sweep import ShardedSweeper
from bmaas.sync import SyncParts, SyncSettings, sync_pass
from tests.budgets import per_call
from tests.unit.quirk_support import DOWNGRADED, make_factory

Enroll = Callable[..., list[str]]
SUITE_3 = str(Quirk.IPMI_SUITE_3)


def deadline() -> Deadline:
    return Deadline.after(60.0)


def quirks_of(store: Store) -> dict[str, list[str]]:
    return {n.name: list(n.extra.get(QUIRKS_KEY) or ()) for n in store.nodes.find()}


def quirk_events(store: Store, name: str) -> list[str]:
    return [e.message for e in store.nodes.events(name, limit=100) if e.kind == "bmc_quirk"]


def read(driver: Any) -> PowerState:
    return driver.get_power_state(deadline=per_call(driver))


def test_a_result_carries_its_driver_s_quirks_and_pickles_with_them(
    store: Store, enroll: Enroll
) -> None:
    enroll(3)
    records = store.nodes.find()
    factory = make_factory(fail=("n02",))
    plain = run_on_nodes(records, read, factory=factory, deadline=deadline())
    with DriverPool() as pool:
        pooled = run_on_nodes(records, read, factory=factory, deadline=deadline(), pool=pool)
    for results in (plain, pooled):
        assert [(r.node, sorted(r.quirks)) for r in results] == [
            ("n01", []),
            ("n02", [SUITE_3]),  # learned at login although the read then failed
            ("n03", []),
        ]
        assert results[1].error is not None
        assert pickle.loads(pickle.dumps(results[1])).quirks == results[1].quirks


def test_an_in_process_pass_records_the_downgrade_once_and_warns(
    store: Store, enroll: Enroll, caplog: pytest.LogCaptureFixture
) -> None:
    enroll(6)
    factory = make_factory()
    with Runtime(probe=False) as rt, caplog.at_level(logging.WARNING, logger="bmaas.quirks"):
        for _ in range(3):  # a loop's passes: recorded by the first, left alone after
            sync_pass(store, SyncSettings(), SyncParts(factory, rt=rt), deadline=deadline())
    found = quirks_of(store)
    assert {n for n, q in found.items() if q} == set(DOWNGRADED)
    assert found["n02"] == [SUITE_3]
    for name in DOWNGRADED:
        assert quirk_events(store, name) == [f"the BMC shows {SUITE_3}"]
    warned = [r.getMessage() for r in caplog.records if r.name == "bmaas.quirks"]
    assert len(warned) == 2
    assert all("refused IPMI cipher suite 17" in w and SUITE_3 in w for w in warned)


class ResultsFromWorkers:
    """A stand-in :class:`ShardedSweeper`: results as a worker process sends
    them back (pickled), its drivers staying behind in that process."""

    def __init__(self) -> None:
        self.factory = make_factory()
        self.pool = DriverPool()
        self.stats = self.pool.stats

    def run(
        self,
        records: Sequence[NodeRecord],
        operation: Any,
        *,
        deadline: Deadline,
        on_result: Callable[[NodeResult[Any]], None] | None = None,
    ) -> list[NodeResult[Any]]:
        results = run_on_nodes(
            records, operation, factory=self.factory, pool=self.pool, deadline=deadline
        )
        return [pickle.loads(pickle.dumps(r)) for r in results]


def test_a_sharded_pass_records_what_its_workers_learned(store: Store, enroll: Enroll) -> None:
    enroll(6)

    def no_driver_here(record: NodeRecord) -> Any:
        raise AssertionError("a sharded pass builds no driver in the writing process")

    sweeper = ResultsFromWorkers()
    try:
        parts = SyncParts(no_driver_here, sweeper=sweeper)  # type: ignore[arg-type]
        report = sync_pass(store, SyncSettings(), parts, deadline=deadline())
    finally:
        sweeper.pool.close()
    assert not report.failed
    assert {n for n, q in quirks_of(store).items() if q} == set(DOWNGRADED)


@pytest.mark.procs
def test_a_pass_sharded_over_real_worker_processes_records_the_downgrade(
    store: Store, enroll: Enroll
) -> None:
    enroll(6)
    with ShardedSweeper(processes=2, workers=2, make_factory=make_factory) as sweeper:
        sync_pass(
            store, SyncSettings(), SyncParts(make_factory(), sweeper=sweeper), deadline=deadline()
        )
    assert {n for n, q in quirks_of(store).items() if q} == set(DOWNGRADED)
    assert quirk_events(store, "n05") == [f"the BMC shows {SUITE_3}"]


def test_workers_sharing_the_store_each_record_their_own_nodes(
    store: Store, enroll: Enroll
) -> None:
    enroll(6)
    factory = make_factory()
    with (
        FleetShare(store, ttl=60.0, name="w1") as one,
        FleetShare(store, ttl=60.0, name="w2") as two,
    ):
        seen: dict[str, set[str]] = {}
        for share in (one, two):  # two workers on one database: each reads its share
            report = sync_pass(
                store, SyncSettings(), SyncParts(factory, share=share), deadline=deadline()
            )
            seen[share.worker_id] = {r.node for r in report.results}
    assert seen[one.worker_id].isdisjoint(seen[two.worker_id])
    assert seen[one.worker_id] | seen[two.worker_id] == {f"n{i:02d}" for i in range(1, 7)}
    assert {n for n, q in quirks_of(store).items() if q} == set(DOWNGRADED)


def test_recording_skips_what_the_node_has_and_survives_a_store_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from bmaas.store.errors import StoreError

    calls: list[str] = []

    class Nodes:
        def record_quirks(self, name: str, quirks: Any) -> list[str]:
            calls.append(name)
            if name == "bad":
                raise StoreError("database is locked")
            return sorted(quirks)

    @dataclasses.dataclass(frozen=True)
    class R:
        node: str
        quirks: frozenset[str]

    results = [
        R("known", frozenset({SUITE_3})),
        R("new", frozenset({SUITE_3})),
        R("bad", frozenset({SUITE_3})),
        R("none", frozenset()),
    ]
    with caplog.at_level(logging.WARNING, logger="bmaas.quirks"):
        recorded = record_results(Nodes(), results, {"known": [SUITE_3]})
    assert calls == ["new", "bad"]
    assert recorded == {"new": [SUITE_3]}
    assert any("could not record" in r.getMessage() for r in caplog.records)
