"""A lab worker process: one shard of machines, served over IPMI and Redfish.

pyghmi's BMC server uses ``select()``, which cannot watch file descriptors
above 1024, and one Python process serves a few hundred BMCs before its one
core is the limit; so a lab is split into shards, one worker process each.
A machine's IPMI and Redfish BMCs live in the same worker and share the
:class:`~bmaas.fakes.machine.FakeMachine`, like a real BMC that speaks both.

The parent talks to a worker over a ``multiprocessing`` pipe with small
command tuples (see :func:`_handle`); every reply is ``("ok", value)`` or
``("error", message)``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import multiprocessing
import os
import resource
import signal
import threading
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from bmaas.driver import BootDevice, PowerState
from bmaas.fakes.faults import FaultPlan, FaultRule
from bmaas.fakes.machine import FakeMachine
from bmaas.faults import BmaasError, InputError
from bmaas.hwlab.events import EventLog
from bmaas.hwlab.labspec import NodeSpec, shape_of
from bmaas.hwlab.limits import MAX_SHARD_SIZE, SSE_KEEPALIVE
from bmaas.secrets import mask_logs, mask_url

__all__ = [
    "DEFAULT_SHARD_SIZE",
    "MAX_SHARD_SIZE",
    "Shard",
    "ShardServers",
    "WorkerHandle",
    "run_worker",
    "shard_count",
    "spawn",
]

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Shard:
    """What one worker serves. Picklable: it crosses the process boundary."""

    index: int
    nodes: tuple[NodeSpec, ...]
    seed: int | str
    events_path: str
    redfish_tls: bool = False
    host: str = "127.0.0.1"
    #: IPMI BMCs that listen on an address of their own (node name -> address),
    #: see :func:`bmaas.hwlab.labspec.loopback_hosts`
    ipmi_hosts: dict[str, str] = dataclasses.field(default_factory=dict)
    #: fixed ports per node name (from --ipmi-port/--redfish-port bases); 0 = any free
    ipmi_ports: dict[str, int] = dataclasses.field(default_factory=dict)
    redfish_ports: dict[str, int] = dataclasses.field(default_factory=dict)
    #: a restarted shard: each machine's state and rules when its worker died
    #: (see :meth:`ShardServers.snapshot`), and the Redfish CA directory to keep
    state: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    tls_dir: str | None = None
    #: Redfish systems per service (consecutive Redfish nodes of this shard)
    redfish_service_size: int = 1
    #: seconds between keepalive comments on an idle SSE stream (None: none)
    sse_keepalive: float | None = SSE_KEEPALIVE


#: below this many machines per worker, more workers than cores buy nothing
MIN_SHARD_SIZE = 250
DEFAULT_SHARD_SIZE = None  # automatic: see shard_count()


def shard_count(nodes: int, shard_size: int | None = None, cpus: int | None = None) -> int:
    """Worker processes for ``nodes`` machines: ``shard_size`` each when given;
    else one per core (but at least MIN_SHARD_SIZE machines each), and as
    many more as keep each at MAX_SHARD_SIZE or fewer."""
    if nodes <= 0:
        return 0
    if shard_size:
        return math.ceil(nodes / shard_size)
    cores = cpus or os.cpu_count() or 1
    return max(math.ceil(nodes / MAX_SHARD_SIZE), min(cores, math.ceil(nodes / MIN_SHARD_SIZE)))


@dataclasses.dataclass
class WorkerHandle:
    """The parent's side of one worker process."""

    shard: Shard
    process: BaseProcess
    conn: Connection
    lock: threading.Lock
    #: alive, dead or restarting (see :mod:`bmaas.hwlab.supervisor`)
    state: str = "alive"
    restarts: int = 0
    restart_failures: int = 0
    #: the shard's last death (kept by its restarted worker: ``hwlab status``
    #: still says why a shard restarted after it serves again)
    died_at: float | None = None
    cause: str = ""
    died_pid: int | None = None


def spawn(shard: Shard) -> WorkerHandle:
    """A worker process for ``shard`` (ready once it reports its endpoints)."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(
        target=run_worker, args=(shard, child), name=f"hwlab-worker-{shard.index}"
    )
    process.start()
    child.close()
    return WorkerHandle(shard, process, parent, threading.Lock())


class ShardServers:
    """The machines of one shard and the BMC servers in front of them.

    Usable in-process too (tests, small labs): ``with ShardServers(shard) as s``.
    """

    def __init__(self, shard: Shard) -> None:
        self.shard = shard
        self.events = EventLog(shard.events_path)
        self.machines: dict[str, FakeMachine] = {}
        self.endpoints: dict[str, dict[str, int]] = {}
        self.tls_cert: str | None = None
        self._ipmi: Any = None
        self._redfish: Any = None

    def start(self) -> None:
        shard = self.shard
        for spec in shard.nodes:
            saved = shard.state.get(spec.name)
            rules: Sequence[FaultRule] = spec.rules
            power = spec.power
            if saved is not None:
                rules = [FaultRule.from_dict(r) for r in saved["rules"]]
                power = PowerState(saved["power"])
            plan = FaultPlan(rules, seed=shard.seed, node=spec.name)
            plan.listeners.append(self.events)
            machine = FakeMachine(spec.name, spec.hardware, plan=plan, power=power)
            if saved is not None:
                _restore(machine, saved)
            self.machines[spec.name] = machine
            self.endpoints[spec.name] = {}
        try:
            self._start_servers()
        except BaseException:
            self.stop()
            raise

    def _start_servers(self) -> None:
        shard = self.shard
        wants_ipmi = [n for n in shard.nodes if "ipmi" in n.protocols]
        wants_redfish = [n for n in shard.nodes if "redfish" in n.protocols]
        if wants_ipmi:
            from bmaas.hwlab.ipmi import IPMIServer

            # No pyghmi client runs in a worker, so select()'s fd limit does not apply.
            self._ipmi = IPMIServer(host=shard.host, max_bmcs=len(wants_ipmi))
            for spec in wants_ipmi:
                port = self._bind(
                    self._ipmi,
                    spec,
                    shard.ipmi_ports.get(spec.name, 0),
                    "IPMI (UDP)",
                    host=shard.ipmi_hosts.get(spec.name),
                )
                self.endpoints[spec.name]["ipmi"] = port
            self._ipmi.start()
        if wants_redfish:
            from bmaas.hwlab.redfish import RedfishServer

            self._redfish = RedfishServer(
                host=shard.host,
                tls=shard.redfish_tls,
                tls_dir=shard.tls_dir,
                sse_keepalive=shard.sse_keepalive,
            )
            size = shard.redfish_service_size
            for at in range(0, len(wants_redfish), size):
                group = wants_redfish[at : at + size]
                first = group[0]
                fixed = shard.redfish_ports.get(first.name, 0)
                if size == 1:
                    shape = shape_of(first)
                    port = self._bind(self._redfish, first, fixed, "Redfish (TCP)", shape=shape)
                else:
                    port = self._bind_service(group, fixed)
                for spec in group:
                    self.endpoints[spec.name]["redfish"] = port
            self._redfish.start()
            self.tls_cert = self._redfish.ca_path  # this worker's lab CA (None over HTTP)

    def _bind(
        self,
        server: Any,
        spec: NodeSpec,
        port: int,
        what: str,
        *,
        host: str | None = None,
        shape: str | None = None,
    ) -> int:
        where: dict[str, str] = {"host": host} if host else {}
        if shape is not None:  # a Redfish BMC's vendor shape
            where["shape"] = shape
        machine, secret = self.machines[spec.name], spec.password.reveal()
        return _listen(
            lambda: server.add(
                machine, username=spec.username, password=secret, port=port, **where
            ),
            f"{host or self.shard.host}:{port} for {what}",
            spec.name,
        )

    def _bind_service(self, group: list[NodeSpec], port: int) -> int:
        """One Redfish service for ``group`` (the first node's credentials)."""
        server, first = self._redfish, group[0]
        assert server is not None
        machines = [self.machines[spec.name] for spec in group]
        return _listen(
            lambda: server.add_service(
                machines, username=first.username, password=first.password.reveal(), port=port
            ),
            f"{self.shard.host}:{port} for Redfish (TCP)",
            first.name,
        )

    def stop(self) -> None:
        for server in (self._ipmi, self._redfish):
            if server is not None:
                with contextlib.suppress(Exception):  # stop what we can, then close the log
                    server.stop()
        self._ipmi = self._redfish = None
        self.events.close()

    def __enter__(self) -> ShardServers:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- control ---------------------------------------------------------------

    def machine(self, name: str) -> FakeMachine:
        try:
            return self.machines[name]
        except KeyError:
            raise InputError(f"no node {name!r} in this lab", node=name) from None

    def status(self) -> dict[str, Any]:
        out = {}
        for name, m in self.machines.items():
            out[name] = {
                "power": str(m.power_state()),
                "health": m.health,
                "bmc_down": m.bmc_down(),
                "boot_device": str(m.boot_device().device),
                # status is for people: an image URL's password stays hidden
                "media": mask_url(m.media) if m.media else m.media,
                "rules": [r.describe() for r in m.plan.rules],
                "fired": m.plan.counts(),
                "sessions": self._sessions(name),
            }
        return {"nodes": out, "events": self.events.count}

    def snapshot(self, names: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
        """What a restarted worker needs to carry on each machine (of ``names``,
        or all): settled power, boot device, media, rules (compact: labs have
        thousands)."""
        out = {}
        for name in self.machines if names is None else names:
            m = self.machine(name)
            boot = m.boot_device()
            out[name] = {
                "power": str(m.settled_power),
                "boot": [str(boot.device), boot.persistent],
                "media": m.media,
                "rules": [r.to_dict() for r in m.plan.rules],
            }
        return out

    def _sessions(self, name: str) -> dict[str, dict[str, int]]:
        """Per protocol: logins so far, sessions open now, most open at once."""
        out: dict[str, dict[str, int]] = {}
        for protocol, server in (("ipmi", self._ipmi), ("redfish", self._redfish)):
            if server is None or protocol not in self.endpoints.get(name, {}):
                continue
            bmc = server.bmc(name)
            held = bmc.open_sessions() if protocol == "ipmi" else len(bmc.sessions())
            out[protocol] = {"logins": bmc.logins, "open": held, "peak": bmc.peak_sessions}
        return out

    def add_rules(self, name: str, rules: Sequence[dict[str, Any]]) -> int:
        machine = self.machine(name)
        parsed = [FaultRule.from_dict(r, where=f"rule[{i}]") for i, r in enumerate(rules)]
        speaks = next((n.protocols for n in self.shard.nodes if n.name == name), ())
        unseen = [(i, r.unseen_on(speaks)) for i, r in enumerate(parsed)]
        problems = [f"node {name!r}: rule[{i}]: {why}" for i, why in unseen if why]
        if problems:  # refused whole, before any rule of the request is in force
            raise InputError("; ".join(problems))
        for rule in parsed:
            machine.plan.add(rule)
        return len(machine.plan.rules)

    def clear_rules(self, name: str | None) -> int:
        targets = [self.machine(name)] if name else list(self.machines.values())
        for m in targets:
            m.plan.clear()
        return len(targets)

    def force_power(self, name: str, state: str) -> str:
        self.machine(name).force_power(PowerState(state))
        return state

    def set_health(self, name: str, health: str) -> str:
        self.machine(name).set_health(health)
        return health


def _listen(add: Callable[[], Any], where: str, node: str) -> int:
    """The port ``add()`` listens on; one it cannot bind is the node's input error."""
    try:
        return int(add())
    except OSError as exc:
        raise InputError(f"cannot listen on {where}: {exc.strerror}", node=node) from None


def _handle(servers: ShardServers, command: tuple[Any, ...]) -> Any:
    verb, *args = command
    if verb == "status":
        return servers.status()
    if verb == "fault_add":
        return servers.add_rules(*args)
    if verb == "fault_clear":
        return servers.clear_rules(*args)
    if verb == "power":
        return servers.force_power(*args)
    if verb == "health":
        return servers.set_health(*args)
    if verb == "snapshot":
        return servers.snapshot(*args)
    raise InputError(f"unknown worker command {verb!r}")


def _restore(machine: FakeMachine, saved: dict[str, Any]) -> None:
    device, persistent = saved["boot"]
    machine.set_boot_device(BootDevice(device), persistent=persistent)
    if saved.get("media"):
        machine.insert_media(saved["media"])


def _raise_fd_limit() -> None:
    """A big shard holds thousands of sockets: allow as many as the system does."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def run_worker(shard: Shard, conn: Connection) -> None:
    """Worker process entry point: serve until told to stop or the parent goes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    _raise_fd_limit()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s worker: %(message)s")
    mask_logs()  # an image URL's password never reaches the log
    servers = ShardServers(shard)
    try:
        servers.start()
    except BmaasError as exc:
        conn.send(("error", str(exc)))
        return
    except Exception as exc:  # report any start-up failure to the parent, in one line
        LOG.exception("worker %d failed to start", shard.index)
        conn.send(("error", f"worker {shard.index}: {type(exc).__name__}: {exc}"))
        return
    conn.send(("ok", {"endpoints": servers.endpoints, "tls_cert": servers.tls_cert}))
    try:
        while True:
            try:
                command = conn.recv()
            except (EOFError, OSError):
                break  # the parent is gone: stop serving
            if command == ("stop",):
                conn.send(("ok", None))
                break
            try:
                conn.send(("ok", _handle(servers, command)))
            except BmaasError as exc:
                conn.send(("error", str(exc)))
    finally:
        servers.stop()
