"""Keeps a lab's worker processes alive: a lab that survives its own faults.

A worker that dies (killed, crashed, OOM) takes its shard's BMCs with it. The
supervisor notices within :data:`CHECK_INTERVAL`, logs it, has
:meth:`bmaas.hwlab.lab.Lab.status` report the shard's nodes as down (the living
shards are listed as usual), and starts a new worker for the shard on the
same ports, with the same Redfish CA, and with each machine's power, boot
device, media and fault rules as last seen (snapshots are taken every
:data:`SNAPSHOT_INTERVAL` and right after every change through the control
API). ``restart=False`` (``hwlab up --no-restart``) leaves it dead.

A restarted machine's fault plan starts its random streams afresh: the
lab's seeded replay is exact up to the crash, not across it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from bmaas.fakes.faults import FaultRule

if TYPE_CHECKING:
    from bmaas.hwlab.worker import Shard, WorkerHandle

__all__ = ["CHECK_INTERVAL", "SNAPSHOT_INTERVAL", "Supervisor"]

LOG = logging.getLogger(__name__)


class Lab(Protocol):
    """What the supervisor reads and calls on its lab (:class:`bmaas.hwlab.lab.Lab`
    is one); stated here so the two modules do not import each other."""

    endpoints: dict[str, dict[str, int]]
    tls_certs: dict[str, str]
    on_restart: Callable[[], None] | None

    def workers(self) -> list[WorkerHandle]: ...

    def ask(self, worker: WorkerHandle, *command: Any) -> Any: ...

    def replace_worker(self, worker: WorkerHandle, shard: Shard, *, timeout: float) -> None: ...


#: seconds between liveness checks
CHECK_INTERVAL = 0.5
#: seconds between routine snapshots of every worker's machines
SNAPSHOT_INTERVAL = 5.0
#: seconds a restarted worker may take to listen again
RESTART_TIMEOUT = 60.0
#: longest wait between two restart attempts of a shard that keeps failing
MAX_BACKOFF = 30.0


class Supervisor:
    """One thread that watches, snapshots and restarts a lab's workers."""

    def __init__(self, lab: Lab, *, restart: bool = True) -> None:
        self.lab = lab
        self.restart = restart
        #: last known state of every machine, by worker index (see ShardServers.snapshot)
        self.snapshots: dict[int, dict[str, dict[str, Any]]] = {}
        self._dirty: set[int] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_snapshot = 0.0
        self._next_try: dict[int, float] = {}
        #: guards ``snapshots``: control calls and the loop both write it
        self._lock = threading.Lock()

    def start(self) -> None:
        # The first pass snapshots every worker (in the thread: not on the
        # path to "ready").
        self._dirty.update(w.shard.index for w in self.lab.workers())
        self._next_snapshot = time.monotonic() + SNAPSHOT_INTERVAL
        self._thread = threading.Thread(target=self._run, name="hwlab-supervisor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(RESTART_TIMEOUT)
            self._thread = None

    def changed(self, worker: WorkerHandle, nodes: Sequence[str] | None = None) -> None:
        """A control call changed this worker's machines.

        Named nodes are snapshotted now (a worker killed right after a control
        call must not lose it); a change to the whole shard is snapshotted on
        the next pass."""
        if nodes is None:
            self._dirty.add(worker.shard.index)
            return
        try:
            fresh = self.lab.ask(worker, "snapshot", list(nodes))
        except Exception as exc:
            LOG.debug("snapshot of %s failed: %s", ", ".join(nodes), exc)
            self._dirty.add(worker.shard.index)
            return
        with self._lock:
            self.snapshots.setdefault(worker.shard.index, {}).update(fresh)

    def down_nodes(self, worker: WorkerHandle) -> dict[str, Any]:
        """A dead shard's nodes, for status: down, with their last known rules."""
        saved = self.snapshots.get(worker.shard.index, {})
        out = {}
        for spec in worker.shard.nodes:
            rules = saved.get(spec.name, {}).get("rules", [r.to_dict() for r in spec.rules])
            out[spec.name] = {
                "power": "unknown",
                "bmc_down": True,
                "worker_down": worker.state,
                "rules": [FaultRule.from_dict(r).describe() for r in rules],
                "fired": {},
            }
        return out

    def _ports_of(self, shard: Shard, protocol: str) -> dict[str, int]:
        """The ports ``shard``'s nodes listen on for ``protocol``."""
        out = {}
        for spec in shard.nodes:
            port = self.lab.endpoints.get(spec.name, {}).get(protocol)
            if port:
                out[spec.name] = port
        return out

    def _tls_dir_of(self, shard: Shard) -> str | None:
        found = [self.lab.tls_certs[n.name] for n in shard.nodes if n.name in self.lab.tls_certs]
        return os.path.dirname(found[0]) if found else None

    # -- the loop ----------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.wait(CHECK_INTERVAL):
            try:
                self.check()
            except Exception:
                LOG.exception("supervisor: check failed")

    def check(self) -> None:
        """One pass: detect deaths, restart what is due, refresh snapshots."""
        now = time.monotonic()
        routine = now >= self._next_snapshot
        if routine:
            self._next_snapshot = now + SNAPSHOT_INTERVAL
        for worker in self.lab.workers():
            index = worker.shard.index
            if worker.state == "alive" and not worker.process.is_alive():
                self._died(worker)
            if worker.state == "dead" and self.restart and now >= self._next_try.get(index, 0):
                self._restart(worker)
            elif worker.state == "alive" and (routine or index in self._dirty):
                self._dirty.discard(index)
                self._snapshot(worker)

    def _died(self, worker: WorkerHandle) -> None:
        worker.state = "dead"
        worker.died_at = time.time()
        worker.died_pid = worker.process.pid
        code = worker.process.exitcode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit {code}"
        LOG.error(
            "worker %d (pid %s) died (%s); its %d nodes are down%s",
            worker.shard.index,
            worker.process.pid,
            how,
            len(worker.shard.nodes),
            "; restarting it" if self.restart else " (--no-restart: left dead)",
        )
        worker.cause = how

    def _snapshot(self, worker: WorkerHandle) -> None:
        try:
            fresh = self.lab.ask(worker, "snapshot")
        except Exception as exc:
            LOG.debug("snapshot of worker %d failed: %s", worker.shard.index, exc)
            return
        with self._lock:
            self.snapshots[worker.shard.index] = fresh

    def _restart(self, worker: WorkerHandle) -> None:
        index = worker.shard.index
        shard = dataclasses.replace(
            worker.shard,
            ipmi_ports=self._ports_of(worker.shard, "ipmi"),
            redfish_ports=self._ports_of(worker.shard, "redfish"),
            state=self.snapshots.get(index, {}),
            tls_dir=self._tls_dir_of(worker.shard),
        )
        worker.state = "restarting"
        try:
            self.lab.replace_worker(worker, shard, timeout=RESTART_TIMEOUT)
        except Exception as exc:
            worker.state = "dead"
            worker.restart_failures += 1
            wait = min(MAX_BACKOFF, 2.0**worker.restart_failures)
            self._next_try[index] = time.monotonic() + wait
            LOG.error("worker %d: restart failed (%s); next try in %.0fs", index, exc, wait)
            return
        LOG.warning("worker %d restarted: its %d nodes are back", index, len(shard.nodes))
        if self.lab.on_restart is not None:
            self.lab.on_restart()
