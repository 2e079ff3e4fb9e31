"""A running lab: worker processes serving emulated BMCs, and the state
directory that tells clients how to reach them.

``Lab`` runs in the current process (the pytest fixture uses it this way) or
inside the background process that ``hwlab up`` starts (``bmaas.hwlab.daemon``).
Either way it writes, under its state directory:

* ``inventory.yaml``: the nodes in bmaas's inventory format (Ironic
  ``driver_info`` keys), with BMC addresses and credentials;
* ``events.jsonl``: one line per injected fault effect;
* ``lab.json``: what runs where (pid, control API URL, nodes and ports);
  the daemon adds ``token`` (the control API's secret), ``hwlab.pid`` and
  ``hwlab.log``.

The directory is 0700 and every file 0600, none opened through a link
(:mod:`bmaas.hwlab.statefiles`).

Proxied nodes (a lab file node with ``proxy:``) are not emulated: the lab
process runs a :class:`~bmaas.hwlab.proxy.ProxyHost` for them (and the stock
vbmcd / sushy-emulator upstreams they ask for, see :mod:`bmaas.hwlab.proxy.lab`),
and they share the inventory, the event log and the control API.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bmaas.fakes.faults import FaultRule
from bmaas.fakes.machine import HEALTH_STATES
from bmaas.faults import BmaasError, InputError
from bmaas.hwlab import profiles
from bmaas.hwlab.inventory import dump_inventory, inventory_document, node_entry
from bmaas.hwlab.labspec import LabSpec, NodeSpec, shape_of
from bmaas.hwlab.proxy.effects import supported_rules
from bmaas.hwlab.proxy.lab import ProxiedNodes
from bmaas.hwlab.statefiles import prepare_dir, write_private
from bmaas.hwlab.supervisor import Supervisor
from bmaas.hwlab.worker import (
    DEFAULT_SHARD_SIZE,
    MAX_SHARD_SIZE,
    Shard,
    WorkerHandle,
    shard_count,
    spawn,
)

__all__ = [
    "DEFAULT_SHARD_SIZE",
    "MAX_SHARD_SIZE",
    "Lab",
    "LabError",
    "shard_count",
    "write_json",
    "write_private",
]

LOG = logging.getLogger(__name__)


class LabError(BmaasError):
    """The lab could not start, or a worker went away."""

    code = "lab_error"


class Lab:
    """Start, control and stop a lab described by a :class:`LabSpec`."""

    def __init__(
        self,
        spec: LabSpec,
        state_dir: str | os.PathLike[str],
        *,
        shard_size: int | None = DEFAULT_SHARD_SIZE,
        host: str = "127.0.0.1",
        ipmi_base_port: int = 0,
        redfish_base_port: int = 0,
        restart: bool = True,
        ipmi_hosts: Mapping[str, str] | None = None,
    ) -> None:
        self.spec = _with_profile_rules(spec)
        #: IPMI BMCs on addresses of their own (node name -> address; others
        #: on ``host``): Ironic's stock ``ipmi`` spaces its ipmitool calls per
        #: address string, so a fleet on one address is throttled as one BMC
        self.ipmi_hosts = dict(ipmi_hosts or {})
        #: restart a worker that dies (False: leave it dead, report it)
        self.restart = restart
        #: called after a dead worker was restarted (the daemon rewrites lab.json)
        self.on_restart: Callable[[], None] | None = None
        self._supervisor: Supervisor | None = None
        self.state_dir = Path(state_dir)
        self.shard_size = shard_size
        self.host = host
        self.ipmi_base_port = ipmi_base_port
        self.redfish_base_port = redfish_base_port
        self.endpoints: dict[str, dict[str, int]] = {}
        #: the CA that signed each node's Redfish certificate (one per worker)
        self.tls_certs: dict[str, str] = {}
        self.started_at: float | None = None
        self._workers: list[WorkerHandle] = []
        self._owner: dict[str, WorkerHandle] = {}
        self._proxied = ProxiedNodes(
            [n for n in self.spec.nodes if n.proxy is not None],
            seed=self.spec.seed,
            workdir=self.state_dir / "proxied",
            events_path=self.events_path,
        )

    # -- paths -----------------------------------------------------------------

    @property
    def inventory_path(self) -> Path:
        return self.state_dir / "inventory.yaml"

    @property
    def events_path(self) -> Path:
        return self.state_dir / "events.jsonl"

    # -- lifecycle -------------------------------------------------------------

    def start(self, *, timeout: float = 120.0) -> None:
        """Start every worker and return once every BMC is listening."""
        prepare_dir(self.state_dir)  # 0700, ours, not a link (bmaas.hwlab.statefiles)
        self.events_path.unlink(missing_ok=True)
        nodes = [n for n in self.spec.nodes if n.proxy is None]
        count = shard_count(len(nodes), self.shard_size)
        deadline = time.monotonic() + timeout
        shards = [
            Shard(
                index=index,
                nodes=tuple(nodes[index::count]),
                seed=self.spec.seed,
                events_path=str(self.events_path),
                redfish_tls=self.spec.redfish_tls,
                host=self.host,
                ipmi_hosts={
                    n.name: self.ipmi_hosts[n.name]
                    for n in nodes[index::count]
                    if n.name in self.ipmi_hosts
                },
                ipmi_ports=self._fixed_ports(nodes[index::count], self.ipmi_base_port),
                redfish_ports=self._fixed_ports(nodes[index::count], self.redfish_base_port),
                redfish_service_size=self.spec.redfish_service_size,
                sse_keepalive=self.spec.sse_keepalive,
            )
            for index in range(count)
        ]
        try:
            # In parallel: handing a big shard to a worker waits for its imports.
            with concurrent.futures.ThreadPoolExecutor(max(1, count)) as pool:
                self._workers.extend(pool.map(spawn, shards))
            for worker in self._workers:
                self._await_ready(worker, deadline)
            self._proxied.start(timeout=max(1.0, deadline - time.monotonic()))
            self.endpoints.update(self._proxied.endpoints)
        except BaseException:
            self.stop()
            raise
        self.started_at = time.time()
        self._write_inventory()
        self._supervisor = Supervisor(self, restart=self.restart)
        self._supervisor.start()

    def _fixed_ports(self, chunk: Sequence[NodeSpec], base: int) -> dict[str, int]:
        if not base:
            return {}
        order = {n.name: i for i, n in enumerate(self.spec.nodes)}
        return {n.name: base + order[n.name] for n in chunk}

    def _await_ready(self, worker: WorkerHandle, deadline_s: float) -> None:
        left = max(0.0, deadline_s - time.monotonic())
        if not worker.conn.poll(left):
            raise LabError(f"worker {worker.shard.index} did not start within the timeout")
        try:
            status, value = worker.conn.recv()
        except EOFError:
            raise LabError(f"worker {worker.shard.index} died while starting") from None
        if status != "ok":
            raise LabError(str(value))
        self.endpoints.update(value["endpoints"])
        if value.get("tls_cert"):
            self.tls_certs.update(dict.fromkeys(value["endpoints"], value["tls_cert"]))
        for name in value["endpoints"]:
            self._owner[name] = worker

    def stop(self, *, timeout: float = 10.0) -> None:
        """Stop every worker; nothing is left listening. Safe to call twice."""
        if self._supervisor is not None:
            self._supervisor.stop()
            self._supervisor = None
        self._proxied.stop(timeout=timeout)
        for worker in self._workers:
            try:
                with worker.lock:
                    worker.conn.send(("stop",))
                    if worker.conn.poll(timeout):
                        worker.conn.recv()
            except (OSError, EOFError):
                pass  # already gone
        for worker in self._workers:
            worker.process.join(timeout)
            if worker.process.is_alive():
                LOG.warning("worker %d did not stop; killing it", worker.shard.index)
                worker.process.kill()
                worker.process.join(timeout)
            worker.conn.close()
        self._workers.clear()
        self._owner.clear()

    def __enter__(self) -> Lab:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- control ---------------------------------------------------------------

    def workers(self) -> list[WorkerHandle]:
        return list(self._workers)

    def ask(self, worker: WorkerHandle, *command: Any) -> Any:
        """Send ``command`` to ``worker`` and return its answer."""
        if worker.state != "alive":
            raise LabError(
                f"worker {worker.shard.index} is {worker.state} ({worker.cause}); "
                + ("it is being restarted" if self.restart else "hwlab up --no-restart")
            )
        with worker.lock:
            try:
                worker.conn.send(command)
                if not worker.conn.poll(30):
                    raise LabError(f"worker {worker.shard.index} did not answer")
                status, value = worker.conn.recv()
            except (OSError, EOFError):
                raise LabError(f"worker {worker.shard.index} is gone") from None
        if status != "ok":
            raise InputError(str(value))
        return value

    def _worker_for(self, node: str) -> WorkerHandle:
        try:
            return self._owner[node]
        except KeyError:
            known = ", ".join(sorted([*self._owner, *self._proxied.names])[:5])
            raise InputError(f"no node {node!r} in this lab (nodes: {known}, ...)") from None

    def add_faults(self, node: str, rules: Sequence[dict[str, Any] | FaultRule]) -> int:
        """Put rules in force on ``node`` now; returns how many it has."""
        if node in self._proxied.names:
            return self._proxied.host.add_faults(node, rules)
        raw = [r.to_dict() if isinstance(r, FaultRule) else dict(r) for r in rules]
        for i, rule in enumerate(raw):
            FaultRule.from_dict(rule, where=f"rule[{i}]")  # fail here, with a clear message
        worker = self._worker_for(node)
        count = int(self.ask(worker, "fault_add", node, raw))
        self._changed(worker, [node])
        return count

    def clear_faults(self, node: str | None = None) -> None:
        """Remove the rules of ``node``, or of every node."""
        if node is not None and node in self._proxied.names:
            self._proxied.host.clear_faults(node)
            return
        if node is not None:
            worker = self._worker_for(node)
            self.ask(worker, "fault_clear", node)
            self._changed(worker, [node])
            return
        for worker in self._workers:
            self.ask(worker, "fault_clear", None)
            self._changed(worker)
        if self._proxied.names:
            self._proxied.host.clear_faults(None)

    def power(self, node: str, state: str) -> None:
        """Turn ``node`` on or off behind its BMC's back."""
        if state not in ("on", "off"):
            raise InputError("must be on or off", field="state")
        if node in self._proxied.names:
            self._proxied.host.power(node, state)
            return
        worker = self._worker_for(node)
        self.ask(worker, "power", node, state)
        self._changed(worker, [node])

    def health(self, node: str, health: str) -> None:
        """Change the overall health ``node``'s BMC reports (Redfish
        ``Status.Health``: ``OK``, ``Warning`` or ``Critical``)."""
        if health not in HEALTH_STATES:
            raise InputError(f"must be one of {', '.join(HEALTH_STATES)}", field="health")
        worker = self._worker_for(node)
        self.ask(worker, "health", node, health)
        self._changed(worker, [node])

    def status(self) -> dict[str, Any]:
        """Every node's state; a dead shard's nodes are listed as down (with
        their last known rules), the living shards as usual."""
        nodes: dict[str, Any] = {}
        events = 0
        workers = []
        for worker in self._workers:
            try:
                answer = self.ask(worker, "status")
            except LabError:
                down = self._supervisor.down_nodes(worker) if self._supervisor else {}
                answer = {"nodes": down, "events": 0}
            nodes.update(answer["nodes"])
            events += answer["events"]
            workers.append(
                {
                    "index": worker.shard.index,
                    "pid": worker.process.pid,
                    "state": worker.state,
                    "nodes": len(worker.shard.nodes),
                    "restarts": worker.restarts,
                    "died_at": worker.died_at,
                    "cause": worker.cause,
                    "died_pid": worker.died_pid,
                }
            )
        if self._proxied.names:
            answer = self._proxied.host.status()
            nodes.update(answer["nodes"])
            events += answer["events"]
        for name, info in nodes.items():
            info["ports"] = self.endpoints.get(name, {})
        return {
            "nodes": dict(sorted(nodes.items())),
            "events": events,
            "workers": workers,
            "worker_pids": self.pids(),
            "restart": self.restart,
        }

    # -- supervision (bmaas.hwlab.supervisor) ----------------------------------------

    def _changed(self, worker: WorkerHandle, nodes: Sequence[str] | None = None) -> None:
        if self._supervisor is not None:
            self._supervisor.changed(worker, nodes)

    def replace_worker(self, worker: WorkerHandle, shard: Shard, *, timeout: float) -> None:
        """Start a new process for ``worker``'s shard and wait until it serves."""
        with contextlib.suppress(OSError):
            worker.conn.close()
        worker.process.join(0)
        fresh = spawn(shard)
        try:
            self._await_ready(fresh, time.monotonic() + timeout)
        except BaseException:
            fresh.process.kill()
            fresh.process.join(5)
            fresh.conn.close()
            raise
        fresh.restarts = worker.restarts + 1
        fresh.died_at, fresh.cause, fresh.died_pid = worker.died_at, worker.cause, worker.died_pid
        with worker.lock:  # callers holding the old worker see the new one next time
            self._workers[self._workers.index(worker)] = fresh
            for spec in shard.nodes:
                self._owner[spec.name] = fresh

    def pids(self) -> list[int]:
        return [
            w.process.pid for w in self._workers if w.process.pid is not None and w.state == "alive"
        ]

    # -- inventory -------------------------------------------------------------

    def inventory(self) -> dict[str, Any]:
        """The lab in bmaas's inventory format (Ironic driver_info keys)."""
        entries = [
            self._proxied.inventory_entry(spec)
            if spec.proxy is not None
            else node_entry(
                spec,
                self.endpoints.get(spec.name, {}),
                host=self.host,
                ipmi_host=self.ipmi_hosts.get(spec.name),
                tls=self.spec.redfish_tls,
                tls_cert=self.tls_certs.get(spec.name),
                system_id=(
                    f"/redfish/v1/Systems/{spec.name}"
                    if self.spec.redfish_service_size > 1
                    else None
                ),
            )
            for spec in self.spec.nodes
        ]
        return inventory_document(entries, self.spec.nodes)

    def _write_inventory(self) -> None:
        text = "# written by hwlab: the lab's BMCs in bmaas inventory format\n"
        text += dump_inventory(self.inventory())
        write_private(self.inventory_path, text)

    def describe(self) -> dict[str, Any]:
        """What ``lab.json`` records: enough for a client to find everything."""
        return {
            "seed": self.spec.seed,
            "profile": self.spec.profile,
            "redfish_tls": self.spec.redfish_tls,
            "sse_keepalive": self.spec.sse_keepalive,
            "tls_cas": sorted(set(self.tls_certs.values())),
            "started_at": self.started_at,
            "inventory": str(self.inventory_path),
            "events": str(self.events_path),
            "nodes": {
                n.name: {"protocols": list(n.protocols), "ports": self.endpoints.get(n.name, {})}
                for n in self.spec.nodes
            },
            "worker_pids": self.pids(),
        }


def _with_profile_rules(spec: LabSpec) -> LabSpec:
    """The spec with its profiles' rules added to the nodes each profile picks:
    the lab's among all nodes, a node's own (a vendor's BMC) among the nodes
    naming the same profile."""
    by_profile: dict[str, list[str]] = {}
    for n in spec.nodes:
        if n.profile:
            by_profile.setdefault(n.profile, []).append(n.name)
    if not spec.profile and not by_profile:
        return spec
    chosen: dict[str, list[FaultRule]] = {n.name: [] for n in spec.nodes}
    picks = [(spec.profile, [n.name for n in spec.nodes])] if spec.profile else []
    for name, names in [*picks, *by_profile.items()]:
        for node, rules in profiles.assign(profiles.resolve(name), names, spec.seed).items():
            chosen[node].extend(rules)
    nodes = tuple(
        # a vendor profile's nodes serve its vendor's shape (unless they name one)
        dataclasses.replace(n, rules=(*chosen[n.name], *n.rules), shape=shape_of(n, spec.profile))
        for n in spec.nodes
    )
    return dataclasses.replace(spec, nodes=tuple(_proxy_safe(n) for n in nodes))


def _proxy_safe(node: NodeSpec) -> NodeSpec:
    """A proxied node keeps only the profile rules a proxy can carry out."""
    if node.proxy is None:
        return node
    kept = supported_rules(node.rules, node.proxy, why="profile rule")
    return dataclasses.replace(node, rules=tuple(kept))


def write_json(path: Path, data: Any) -> None:
    write_private(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
