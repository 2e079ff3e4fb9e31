"""Sweeps that use every core: a fleet sharded over worker processes.

One Python process reads BMCs behind one GIL: past one core's worth of
protocol work (RMCP+ packing and HMACs, HTTP and JSON) more threads only
queue. A :class:`ShardedSweeper` starts ``processes`` workers (one per core
by default), each with its own :class:`~bmaas.runtime.Runtime` (its pool,
its silence book) and its own threads (:func:`bmaas.ops.run_on_nodes`), and
streams every node's result back to the one process that called it, which
alone writes the store::

    with ShardedSweeper(processes=4, make_factory=driver_factory,
                        factory_options={"bmc_timeout": 10.0}) as sweeper:
        results = sweeper.run(store.nodes.find(), read_power, deadline=budget, on_result=write)
        results = sweeper.run(store.nodes.find(), read_power, deadline=budget)  # sessions reused

Why processes pinned by BMC (``crc32(bmc) % processes``,
:func:`bmaas.gate.bmc_of`) and not ``ProcessPoolExecutor``, threads inside
each and not asyncio, and what it measured (``hwlab bench fleet-sweep``):
docs/operator.md, "Sweeps over every core". Pinning by BMC, not by node,
means every system behind one Redfish service is read by one process: one
session and one gate (:mod:`bmaas.gate`) per BMC for a sweeper. Workers
are started by ``spawn``, not ``fork`` (the caller may run threads; forking
a threaded process can copy a held lock), settle their heap after a pass
that opened sessions (:class:`~bmaas.heap.HeapSettler`), and send results
as pickled batches (up to :data:`BATCH` results or :data:`FLUSH` seconds); the
caller's ``on_result`` runs in its own thread as each batch arrives, so
store writes never wait on a BMC.

The operation and ``make_factory`` must be picklable (module-level
functions): each worker builds its own factory from ``factory_options``.
In-process fakes (``FakeFleet``) cannot be sharded: their state would not
cross processes, which is why the CLI uses one process when a test hands it
a fake fleet.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from multiprocessing.connection import Connection
from typing import Any, TypeVar, cast

from bmaas.deadline import Deadline
from bmaas.driver import DEFAULT_BMC_TIMEOUT, BMCDriver
from bmaas.faults import BMCTimeout
from bmaas.gate import bmc_of
from bmaas.heap import HeapSettler
from bmaas.ops import DEFAULT_WORKERS, DriverFactory, NodeResult, run_on_nodes
from bmaas.pool import DEFAULT_IDLE, PoolStats
from bmaas.runtime import Runtime
from bmaas.store.records import NodeRecord

__all__ = [
    "BATCH",
    "FLUSH",
    "MIN_NODES_PER_PROCESS",
    "ShardedSweeper",
    "auto_processes",
    "shard_of",
]

LOG = logging.getLogger(__name__)
T = TypeVar("T")

#: results per message back to the caller
BATCH = 64
#: seconds a worker holds a partial batch before sending it anyway
FLUSH = 0.05
#: below this many nodes per process, a process's start costs more than it saves
MIN_NODES_PER_PROCESS = 200


def shard_of(name: str, processes: int) -> int:
    """The shard (worker) that reads the nodes of BMC ``name``
    (:func:`bmaas.gate.bmc_of`): stable across passes and processes
    (``crc32``, not ``hash()``, which is salted per process)."""
    return zlib.crc32(name.encode("utf-8")) % processes


def auto_processes(nodes: int, cores: int | None = None) -> int:
    """One process per core, but none for fewer than
    :data:`MIN_NODES_PER_PROCESS` nodes each (1: read in this process)."""
    cores = cores or os.cpu_count() or 1
    return max(1, min(cores, nodes // MIN_NODES_PER_PROCESS))


class _Stream:
    """Sends a worker's results back in batches (BATCH results or FLUSH s)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.batch: list[NodeResult[Any]] = []
        self.sent = time.monotonic()

    def __call__(self, result: NodeResult[Any]) -> None:
        self.batch.append(result)
        if len(self.batch) >= BATCH or time.monotonic() - self.sent >= FLUSH:
            self.flush()

    def flush(self) -> None:
        if self.batch:
            self.conn.send(("results", self.batch))
            self.batch = []
        self.sent = time.monotonic()


def _worker(
    conn: Connection,
    make_factory: Callable[..., DriverFactory],
    factory_options: dict[str, Any],
    workers: int,
    idle: float,
    wait: float,
) -> None:
    """A shard's process, a host with one runtime for its life, whose keeper
    keeps the pool's sessions alive between sweeps: run each sweep on its
    pool (a reader bound to it: ``in_runtime``), stream results back in
    batches, then the pool's counters; on "stop", close the runtime."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller decides when to stop
    factory = make_factory(**factory_options)
    # silent BMCs: read on the sync's own back-off (bmaas.fenced), not probed
    with Runtime(idle=idle, wait=wait, keep=True, probe=False) as rt:
        pool = rt.pool
        heap = HeapSettler()  # this process is ours: its pool is its heap
        # EOF: the caller went away: log out and end
        with contextlib.suppress(EOFError, KeyboardInterrupt):
            while True:
                message = conn.recv()
                if message is None:
                    break
                operation, records, deadline, hold = message
                if (
                    hold is not None
                ):  # nodes whose sessions wait longer (bmaas.pool.DriverPool.hold)
                    pool.hold(*hold)
                bind = getattr(operation, "in_runtime", None)
                stream = _Stream(conn)
                run_on_nodes(
                    records,
                    operation if bind is None else bind(rt),
                    factory=factory,
                    workers=workers,
                    on_result=stream,
                    pool=pool,
                    deadline=deadline,
                )
                stream.flush()
                pool.expire_idle()
                # before "done": the pass that opened sessions pays for them,
                # not the next one (bmaas.heap)
                heap.after_pass(pool.stats)
                conn.send(("done", pool.stats))
    with contextlib.suppress(OSError, ValueError):
        conn.send(("closed", pool.stats))


class _Shard:
    def __init__(self, index: int, ctx: Any, args: tuple[Any, ...]) -> None:
        self.index = index
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(
            target=_worker, args=(child, *args), name=f"bmaas-sweep-{index}", daemon=True
        )
        self.process.start()
        child.close()
        self.stats = PoolStats()


class ShardedSweeper:
    """Worker processes that sweep a fleet; see the module docstring."""

    def __init__(
        self,
        *,
        processes: int | None = None,
        workers: int = DEFAULT_WORKERS,
        make_factory: Callable[..., DriverFactory],
        factory_options: dict[str, Any] | None = None,
        idle: float = DEFAULT_IDLE,
        wait: float = DEFAULT_BMC_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.processes = processes or os.cpu_count() or 1
        if self.processes < 1 or workers < 1:
            raise ValueError("processes and workers must be at least 1")
        self.workers = workers
        self._args = (make_factory, dict(factory_options or {}), workers, idle, wait)
        self._ctx = multiprocessing.get_context("spawn")
        self._clock = clock
        self._shards: list[_Shard | None] = [None] * self.processes
        self._ended = PoolStats()  # counters of workers already closed
        self._hold: tuple[frozenset[str], float] | None = None

    def hold(self, nodes: Iterable[str], idle: float) -> None:
        """Every worker's pool holds these nodes' drivers ``idle`` seconds
        (:meth:`~bmaas.pool.DriverPool.hold`), from each worker's next sweep."""
        self._hold = (frozenset(nodes), idle)

    def _shard(self, index: int) -> _Shard:
        shard = self._shards[index]
        if shard is None or not shard.process.is_alive():
            if shard is not None:
                LOG.warning(
                    "sweep worker %d died (exit %s); starting another",
                    index,
                    shard.process.exitcode,
                )
            shard = self._shards[index] = _Shard(index, self._ctx, self._args)
        return shard

    def split(self, records: Sequence[NodeRecord]) -> list[list[NodeRecord]]:
        """``records`` by shard: every node in exactly one, in the given order."""
        shards: list[list[NodeRecord]] = [[] for _ in range(self.processes)]
        for record in records:
            # by BMC, not by node: the systems of one Redfish service share
            # its session and its gate, which live in one process
            bmc = bmc_of(record.driver, record.name, record.driver_info)
            shards[shard_of(bmc, self.processes)].append(record)
        return shards

    def run(
        self,
        records: Sequence[NodeRecord],
        operation: Callable[[BMCDriver], T],
        *,
        deadline: Deadline,
        on_result: Callable[[NodeResult[T]], None] | None = None,
    ) -> list[NodeResult[T]]:
        """``operation(driver)`` on every node, one result per node in the
        order of ``records``; ``on_result`` runs here as results arrive.
        ``deadline`` (the pass's budget) goes to every shard: no node waits
        for its pooled driver past it."""
        results: dict[str, NodeResult[T]] = {}
        waiting: dict[Connection, tuple[_Shard, list[NodeRecord]]] = {}
        start = self._clock()
        for index, part in enumerate(self.split(records)):
            if not part:
                continue
            shard = self._shard(index)
            message = (operation, part, deadline, self._hold)
            try:
                shard.conn.send(message)
            except OSError:  # it died since the last sweep: start another
                self._forget(index)
                shard = self._shard(index)
                shard.conn.send(message)
            waiting[shard.conn] = (shard, part)
        while waiting:
            for ready in multiprocessing.connection.wait(list(waiting)):
                conn = cast(Connection, ready)  # wait() returns what it was given
                shard, part = waiting[conn]
                try:
                    kind, payload = conn.recv()
                except (EOFError, OSError):
                    del waiting[conn]
                    self._lost(shard, part, results, on_result, self._clock() - start)
                    continue
                if kind == "results":
                    for result in payload:
                        results[result.node] = result
                        if on_result is not None:
                            on_result(result)
                elif kind == "done":
                    shard.stats = payload
                    del waiting[conn]
        return [results[record.name] for record in records]

    def _lost(
        self,
        shard: _Shard,
        part: list[NodeRecord],
        results: dict[str, NodeResult[Any]],
        on_result: Callable[[NodeResult[Any]], None] | None,
        elapsed: float,
    ) -> None:
        """A worker died mid-sweep: its unanswered nodes' outcome is unknown."""
        LOG.error("sweep worker %d died during a sweep", shard.index)
        self._forget(shard.index)
        for record in part:
            if record.name in results:
                continue
            fault = BMCTimeout(
                "the sweep process reading this node died; outcome unknown",
                node=record.name,
                driver=record.driver,
                elapsed=elapsed,
            )
            result: NodeResult[Any] = NodeResult(
                record.name, record.driver, error=fault, elapsed=elapsed, started=False
            )
            results[record.name] = result
            if on_result is not None:
                on_result(result)

    def _forget(self, index: int) -> None:
        """Reap a dead worker; the next sweep starts another in its place."""
        shard = self._shards[index]
        if shard is None:
            return
        shard.process.join(1.0)
        if shard.process.is_alive():
            shard.process.kill()
            shard.process.join()
        shard.conn.close()
        self._ended.add(shard.stats)
        self._shards[index] = None

    @property
    def stats(self) -> PoolStats:
        """Every worker's pool counters, summed (as of its last sweep)."""
        total = PoolStats()
        total.add(self._ended)
        for shard in self._shards:
            if shard is not None:
                total.add(shard.stats)
        return total

    def pids(self) -> list[int]:
        return [s.process.pid for s in self._shards if s is not None and s.process.pid]

    def close(self, timeout: float = 30.0) -> None:
        """Ask every worker to log out and end; kill the ones that do not."""
        for shard in self._shards:
            if shard is not None and shard.process.is_alive():
                with contextlib.suppress(OSError, ValueError):
                    shard.conn.send(None)
        for index, shard in enumerate(self._shards):
            if shard is None:
                continue
            try:
                if shard.conn.poll(timeout):
                    while True:
                        kind, payload = shard.conn.recv()
                        if kind == "closed":
                            shard.stats = payload
                            break
            except (EOFError, OSError):
                pass
            shard.process.join(timeout)
            if shard.process.is_alive():
                shard.process.kill()
                shard.process.join(timeout)
            shard.conn.close()
            self._ended.add(shard.stats)
            self._shards[index] = None

    def __enter__(self) -> ShardedSweeper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
