"""Sharded sweeps: every node in exactly one shard, stable across passes;
results identical to the in-process path; sessions kept per worker process
across sweeps; a worker that dies loses only its sweep's unanswered nodes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.faults import BMCTimeout, SlotTimeout
from bmaas.gate import bmc_of
from bmaas.heap import MIN_CHANGES
from bmaas.ops import NodeResult, run_on_nodes
from bmaas.pool import DriverPool
from bmaas.runtime import Runtime
from bmaas.store import Store
from bmaas.sweep import ShardedSweeper, auto_processes, shard_of
from tests.unit.sweep_support import die_in_shard_zero, frozen_objects, make_factory, read_power

Enroll = Callable[..., list[str]]


def PASS() -> Deadline:  # noqa: N802 - reads as the constant it stands for
    """One sweep's budget, which every shard's pooled reads wait within."""
    return Deadline.after(60.0)


FAULTY = ("n07", "n31")


def outcome(results: list[NodeResult]) -> list[tuple[str, object, str | None]]:
    return [(r.node, r.value, r.error.code if r.error else None) for r in results]


def test_every_system_behind_one_redfish_service_goes_to_one_shard() -> None:
    info = {"redfish_address": "https://chassis:8000/", "redfish_system_id": "x"}
    shards = {
        shard_of(bmc_of("redfish", f"blade-{n}", {**info, "redfish_system_id": str(n)}), 16)
        for n in range(32)
    }
    assert len(shards) == 1
    assert bmc_of("redfish", "a", info) == "redfish:https://chassis:8000"


@pytest.mark.parametrize("processes", [1, 2, 3, 16])
def test_shards_cover_every_node_exactly_once_and_never_move(
    store: Store, enroll: Enroll, processes: int
) -> None:
    enroll(97)
    records = store.nodes.find()
    sweeper = ShardedSweeper(processes=processes, make_factory=make_factory)
    shards = sweeper.split(records)
    assert len(shards) == processes
    seen = Counter(r.name for part in shards for r in part)
    assert sorted(seen) == sorted(r.name for r in records)
    assert set(seen.values()) == {1}
    for index, part in enumerate(shards):
        assert all(
            shard_of(bmc_of(r.driver, r.name, r.driver_info), processes) == index for r in part
        )
    assert sweeper.split(list(reversed(records)))[0] == list(reversed(shards[0]))
    if processes > 2:
        assert all(shards)  # 97 nodes spread over every shard


def test_auto_processes_is_one_per_core_but_not_for_small_fleets() -> None:
    assert auto_processes(10, cores=16) == 1
    assert auto_processes(450, cores=16) == 2
    assert auto_processes(100_000, cores=16) == 16
    assert auto_processes(100_000, cores=2) == 2


@pytest.mark.procs
def test_a_sharded_sweep_returns_what_the_in_process_sweep_returns(
    store: Store, enroll: Enroll
) -> None:
    enroll(60)
    records = store.nodes.find()
    alone = run_on_nodes(records, read_power, factory=make_factory(faulty=FAULTY), workers=4)
    streamed: list[str] = []
    with ShardedSweeper(
        processes=3, workers=4, make_factory=make_factory, factory_options={"faulty": FAULTY}
    ) as sweeper:
        first = sweeper.run(
            records, read_power, deadline=PASS(), on_result=lambda r: streamed.append(r.node)
        )
        second = sweeper.run(records, read_power, deadline=PASS())
        assert len(set(sweeper.pids())) == 3
        stats = sweeper.stats
    assert outcome(first) == outcome(alone) == outcome(second)
    assert {o[2] for o in outcome(first)} == {None, "bmc_auth_error"}
    assert sorted(streamed) == sorted(r.name for r in records)  # each once, in this process
    # sessions kept per worker: the second sweep logs in again only where a
    # read was refused (auth errors drop the session)
    assert stats.reads == 120
    assert stats.logins == 60 + len(FAULTY)
    assert stats.dropped == 2 * len(FAULTY)


@pytest.mark.procs
def test_a_worker_settles_its_heap_after_the_pass_that_opened_its_sessions(
    store: Store, enroll: Enroll
) -> None:
    """bmaas.heap in a worker: the first pass opens MIN_CHANGES sessions and
    finds nothing frozen; the worker settles before it reports the pass done,
    so the second pass finds the pool's objects frozen."""
    enroll(MIN_CHANGES)
    records = store.nodes.find()
    with ShardedSweeper(processes=1, workers=4, make_factory=make_factory) as sweeper:
        first = sweeper.run(records, frozen_objects, deadline=PASS())
        second = sweeper.run(records, frozen_objects, deadline=PASS())
    assert {r.value for r in first} == {0}
    assert all(r.value for r in second)  # frozen objects, in every read


@pytest.mark.procs
def test_a_dead_worker_loses_its_unanswered_nodes_and_is_replaced(
    store: Store, enroll: Enroll
) -> None:
    enroll(20)
    records = store.nodes.find()
    with ShardedSweeper(processes=2, workers=2, make_factory=make_factory) as sweeper:
        sweeper.run(records, read_power, deadline=PASS())
        victim = sweeper.pids()[0]
        results = sweeper.run(records, die_in_shard_zero, deadline=PASS())  # shard 0 dies mid-sweep
        again = sweeper.run(records, read_power, deadline=PASS())
        assert victim not in sweeper.pids()
        assert len(sweeper.pids()) == 2
    lost = [r for r in results if not r.ok]
    assert lost  # the victim's shard
    by_name = {r.name: r for r in records}
    assert {shard_of(bmc_of(r.driver, r.node, by_name[r.node].driver_info), 2) for r in lost} == {0}
    assert all(isinstance(r.error, BMCTimeout) and not r.started for r in lost)
    assert all(r.ok for r in again)


def test_nodes_the_pass_deadline_cut_off_come_back_as_timeouts(
    store: Store, enroll: Enroll
) -> None:
    """A pass whose deadline ends with nodes still queued in a worker: those
    nodes come back cut off (SlotTimeout: bmaas's own wait, never started,
    never counted against the node), one result a node, as in-process.
    Before, the worker sent only what finished and the caller's lookup
    raised KeyError: ``bmaas sync`` on 10,000 Redfish nodes at load 46 died
    with ``KeyError: 'node-05470'``."""
    enroll(20)
    records = store.nodes.find()
    with ShardedSweeper(processes=2, workers=1, make_factory=make_factory) as sweeper:
        sweeper.run(records, read_power, deadline=PASS())  # the workers are up
        results = sweeper.run(records, read_power, deadline=Deadline.after(0.0))
    assert [r.node for r in results] == [r.name for r in records]
    cut = [r for r in results if not r.ok]
    assert cut  # one worker thread each: the queued nodes never start
    assert all(isinstance(r.error, SlotTimeout) and not r.started for r in cut)


def test_a_worker_holds_the_nodes_the_sweep_names_before_it_reads(
    store: Store, enroll: Enroll, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync with events holds its streamed nodes' sessions until their next
    safety read (bmaas.pool.DriverPool.hold); with sweep workers each
    worker's pool is told with the sweep (no round trip of its own). The
    worker is a host: one runtime, its keeper on, closed at "stop"."""
    from bmaas import runtime as runtime_mod
    from bmaas import sweep as sweep_mod

    enroll(2)
    records = store.nodes.find()
    held: list[tuple[frozenset[str], float]] = []

    class Recording(DriverPool):
        def hold(self, nodes: Any, idle: float) -> None:
            held.append((frozenset(nodes), idle))
            super().hold(nodes, idle)

    monkeypatch.setattr(runtime_mod, "DriverPool", Recording)
    monkeypatch.setattr(sweep_mod.signal, "signal", lambda *_a: None)
    hold = (frozenset({"n01"}), 2520.0)

    class Conn:
        def __init__(self) -> None:
            self.inbox: list[Any] = [(read_power, records, PASS(), hold), None]
            self.sent: list[Any] = []

        def poll(self, timeout: float) -> bool:
            return True

        def recv(self) -> Any:
            return self.inbox.pop(0)

        def send(self, message: Any) -> None:
            self.sent.append(message)

    made: list[Runtime] = []

    class Made(Runtime):
        def __init__(self, **kw: Any) -> None:
            super().__init__(**kw)
            made.append(self)

    monkeypatch.setattr(sweep_mod, "Runtime", Made)
    conn = Conn()
    sweep_mod._worker(conn, make_factory, {}, 2, 60.0, 1.0)  # type: ignore[arg-type]
    assert held == [hold]
    # results come in batches every FLUSH (0.05 s) of the real clock: one
    # batch, or two when a starved worker read its nodes further apart
    kinds = [m[0] for m in conn.sent]
    assert kinds[-2:] == ["done", "closed"], kinds
    assert set(kinds[:-2]) == {"results"}, kinds
    assert sorted(r.node for m in conn.sent[:-2] for r in m[1]) == ["n01", "n02"]
    # one runtime, whose keeper kept the sessions alive between sweeps; closed
    (rt,) = made
    assert (rt.keep, rt.closed, rt.keeper.running) == (True, True, False)
    assert rt.threads.alive() == []
