"""goodput through a real Ironic: ``hwlab bench goodput --backend ironic``.

The same stream of deploy requests, three ways, each on a fresh lab and a
fresh standalone Ironic started from the same layout (``bmaas.hwlab.harness.ironic``):

* **no retry**: bmaas's :class:`~bmaas.provision.Provisioner` on the Ironic
  backend with ``max_attempts=1``: a failed deploy ends the request;
* **blind reschedule** (:func:`blind_provision`), what Nova did: up to 3
  hosts, Ironic's own random pick among the hosts not tried yet, *any*
  failure tears the node down and moves on (no classification, no record,
  so the next request may pick the same broken node), a new port per attempt;
* **bmaas**: the Provisioner on the Ironic backend, up to 3 nodes, failures
  read from node history and classified, failed nodes fenced per the policy.

The lab: dead BMCs and brownout nodes (power never comes on) behind
``bmaas-ipmi``, a brownout node behind the stock ``ipmi``, healthy nodes
behind both (:data:`LAYOUT`, repeated). Ironic's periodic power sync is off
during the stream, so every BMC call counted is one the strategies caused.

Counted: Ironic API calls at the client (:class:`bmaas.drivers.ironic_backend.Api`,
each HTTP call once, retries included); BMC calls at the lab (a zero-delay
rule on every BMC operation: its firing count); leaked allocations (held by
anything but an instance after the batch) and leaked ports.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bmaas.drivers.ironic_backend import Api, IronicBackend
from bmaas.drivers.ironic_backend.api import IronicBusy
from bmaas.fakes.machine import Hardware
from bmaas.faults import BmaasError, ProvisionFailed
from bmaas.hwlab.harness import ironic as harness
from bmaas.hwlab.harness.bench.common import (
    ironic_enroll,
    ironic_running,
    percentile,
    running_lab,
)
from bmaas.hwlab.harness.bench.report import Report, Table, fmt_seconds
from bmaas.hwlab.labspec import generate
from bmaas.provision import Provisioner, Request

__all__ = ["LAYOUT", "STRATEGIES", "Options", "blind_provision", "run"]

STRATEGIES = ("no retry", "blind reschedule", "bmaas")
QUICK = Hardware(power_on_time=0.3, power_off_time=0.2, soft_off_time=0.5, os_boot_time=1.0)
DEAD = {"name": "dead", "effect": "hang"}
STUCK = {"name": "power-stuck", "effect": "power_stuck", "operation": "power.set"}
#: every BMC operation fires it once: the lab's count of BMC calls
COUNT = {"name": "count", "effect": "delay", "seconds": 0}
#: (hardware type, fault) per node, repeated over the lab
LAYOUT: tuple[tuple[str, dict[str, Any] | None], ...] = (
    ("bmaas-ipmi", DEAD),
    ("bmaas-ipmi", None),
    ("ipmi", None),
    ("bmaas-ipmi", STUCK),
    ("ipmi", None),
    ("bmaas-ipmi", None),
    ("bmaas-ipmi", DEAD),
    ("ipmi", STUCK),
    ("bmaas-ipmi", None),
    ("ipmi", None),
    ("bmaas-ipmi", None),
    ("ipmi", None),
)


@dataclasses.dataclass(frozen=True)
class Options:
    nodes: int = 12
    requests: int = 6
    workers: int = 6
    seed: int = 7
    #: seconds one request may take, every attempt included
    deadline: float = 240.0
    #: always "ironic" here (``--backend ironic`` picks this scenario)
    backend: str = "ironic"

    @classmethod
    def smoke(cls) -> Options:
        return cls(nodes=6, requests=2, workers=2)


def _settings(workdir: Path) -> harness.IronicSettings:
    return harness.IronicSettings(
        sync_interval=3600,  # no periodic power sync: count only what the strategies cause
        power_timeout=10,
        ipmi_min_command_interval=1,
        bmaas_call_deadline=1.0,
        bmaas_operation_deadline=6.0,
        extra={"conductor": {"file_url_allowed_paths": str(workdir)}},
    )


def blind_provision(
    api: Api,
    request: Request,
    instance_info: dict[str, Any],
    *,
    max_hosts: int = 3,
    timeout: float = 240.0,
    poll: float = 0.5,
) -> tuple[bool, list[str], int]:
    """Nova's reschedule, through Ironic's API: (active?, error of each failed
    host, ports created). Deliberately blind: any failure moves on."""
    tried: list[str] = []
    errors: list[str] = []
    ports = 0
    end = time.monotonic() + timeout
    while len(errors) < max_hosts and time.monotonic() < end:
        try:
            node, allocation = _blind_claim(api, tried, min(end, time.monotonic() + 30.0))
        except BmaasError as exc:  # Ironic refused us: one more failure, blind
            errors.append(str(exc))
            continue
        if node is None:
            break
        tried.append(node)
        ports += 1  # a new port per attempt: Nova deallocated and reallocated networks
        try:
            if _blind_deploy(api, node, instance_info, end, poll):
                api.call(
                    "allocation.update",
                    api.bm.update_allocation,
                    allocation,
                    extra={"bmaas_instance": request.name},
                )
                return True, errors, ports
            errors.append("deploy failed")
            # tear down, blind: whatever the fault, the node goes back to the pool
            api.call("node.set_provision_state", api.bm.set_node_provision_state, node, "deleted")
            _wait(api, node, {"available", "error", "clean failed"}, end, poll)
        except BmaasError as exc:
            errors.append(str(exc))
        with contextlib.suppress(BmaasError):
            api.call("allocation.delete", api.bm.delete_allocation, allocation, ignore_missing=True)
    return False, errors, ports


def _blind_claim(api: Api, tried: list[str], until: float) -> tuple[str | None, str]:
    """Ironic's random pick among the free nodes not tried yet: (node,
    allocation), or (None, "") when none is left. An allocation that never
    leaves ``allocating`` (Ironic on SQLite can lose it to "database is
    locked") is deleted and picked again, as the backend does."""
    while True:
        nodes = api.call(
            "node.list",
            api.bm.nodes,
            details=True,
            provision_state="available",
            maintenance=False,
            associated=False,
            resource_class="baremetal",
        )
        free = [n.id for n in nodes if n.id not in tried and n.power_state is not None]
        if not free:
            return None, ""
        allocation = api.call(
            "allocation.create",
            api.bm.create_allocation,
            resource_class="baremetal",
            candidate_nodes=free,
        )
        while allocation.state == "allocating" and time.monotonic() < until:
            time.sleep(0.2)
            allocation = api.call("allocation.get", api.bm.get_allocation, allocation.id)
        if allocation.state == "active":
            return allocation.node_id, allocation.id
        api.call("allocation.delete", api.bm.delete_allocation, allocation.id, ignore_missing=True)
        if time.monotonic() >= until:
            raise IronicBusy("no allocation within 30 s")


def _blind_deploy(api: Api, node: str, info: dict[str, Any], end: float, poll: float) -> bool:
    patch = [{"op": "add", "path": f"/instance_info/{k}", "value": v} for k, v in info.items()]
    api.call("node.update", api.bm.patch_node, node, patch)
    api.call("node.set_provision_state", api.bm.set_node_provision_state, node, "active")
    return bool(
        _wait(api, node, {"active", "deploy failed", "error"}, end, poll).provision_state
        == "active"
    )


def _wait(api: Api, node: str, states: set[str], end: float, poll: float) -> Any:
    while True:
        current = api.call("node.get", api.bm.get_node, node)
        if current.provision_state in states or time.monotonic() > end:
            return current
        time.sleep(poll)


def _fired(status: dict[str, Any]) -> int:
    return sum(int(n.get("fired", {}).get("count", 0)) for n in status["nodes"].values())


def _one_strategy(name: str, o: Options, progress: Callable[[str], None]) -> dict[str, Any]:
    spec = generate(o.nodes, protocols="ipmi", seed=o.seed, hardware=QUICK)
    with (
        tempfile.TemporaryDirectory(prefix="bench-goodput-ironic-") as tmp,
        running_lab(spec, Path(tmp) / "lab") as lab,
        ironic_running(Path(tmp) / "ironic", _settings(Path(tmp)), None) as (ironic, conn),
    ):
        entries = lab.inventory()["nodes"]
        healthy = 0
        for i, entry in enumerate(entries):
            driver, fault = LAYOUT[i % len(LAYOUT)]
            ironic_enroll(conn, ironic, entry, driver=driver, prefix=driver)
            lab.add_faults(entry["name"], [COUNT, *([fault] if fault else [])])
            healthy += fault is None
        progress(f"{name}: Ironic with {o.nodes} nodes ({healthy} healthy) ready")
        info = {"kernel": f"file://{ironic.kernel}", "ramdisk": f"file://{ironic.ramdisk}"}
        api = Api(conn)
        backend = IronicBackend(api, instance_info=info, poll=0.5)
        bmc_before = _fired(lab.status())
        outcomes = _stream(name, o, api, backend, info)
        bmc_calls = _fired(lab.status()) - bmc_before
        allocations = list(conn.baremetal.allocations())
        leaked = [a.id for a in allocations if not (a.extra or {}).get("bmaas_instance")]
        fenced = sum(1 for n in conn.baremetal.nodes(details=True) if n.is_maintenance)
    times = [t for ok, t, _, _ in outcomes if ok]
    ports = sum(p for _, _, _, p in outcomes)
    if name != "blind reschedule":
        ports = backend.ports.created
    return {
        "requests": o.requests,
        "succeeded": len(times),
        "success_rate": len(times) / o.requests,
        "time_to_active_p50_s": percentile(times, 0.5),
        "time_to_active_p95_s": percentile(times, 0.95),
        "ironic_api_calls": api.total,
        "ironic_api_calls_by_kind": dict(api.calls),
        "bmc_calls": bmc_calls,
        "ports_created": ports,
        "leaked_allocations": len(leaked),
        "leaked_ports": backend.ports.leaked if name != "blind reschedule" else 0,
        "nodes_fenced": fenced,
        "healthy_nodes": healthy,
        "faults": dict(collections.Counter(f for _, _, fs, _ in outcomes for f in fs)),
    }


def _stream(
    name: str, o: Options, api: Api, backend: IronicBackend, info: dict[str, Any]
) -> list[tuple[bool, float, list[str], int]]:
    stream = [
        Request(f"gp-{i:03d}", resource_class="baremetal", network="lab")
        for i in range(1, o.requests + 1)
    ]
    if name == "blind reschedule":

        def place(request: Request) -> tuple[bool, float, list[str], int]:
            start = time.monotonic()
            ok, errors, ports = blind_provision(api, request, info, timeout=o.deadline)
            return ok, time.monotonic() - start, ["error"] * len(errors), ports

        with concurrent.futures.ThreadPoolExecutor(o.workers) as pool:
            return list(pool.map(place, stream))
    attempts = 1 if name == "no retry" else 3
    with Provisioner(backend=backend, max_attempts=attempts, deadline_s=o.deadline) as p:
        out = []
        for result in p.provision_many(stream, workers=o.workers):
            codes = [str(a.fault_code) for a in result.attempts if a.failed]
            if isinstance(result, ProvisionFailed):
                out.append((False, 0.0, codes, 0))
            else:
                out.append((True, result.elapsed, codes, 0))
        return out


def run(options: Options, *, progress: Callable[[str], None] = lambda _: None) -> Report:
    results = {}
    for name in STRATEGIES:
        results[name] = _one_strategy(name, options, progress)
        r = results[name]
        progress(
            f"{name}: {r['succeeded']}/{r['requests']} active, {r['ironic_api_calls']} API "
            f"calls, {r['bmc_calls']} BMC calls"
        )
    return _report(options, results)


def _report(o: Options, main: dict[str, dict[str, Any]]) -> Report:
    rows = [
        [
            name,
            f"{r['succeeded']}/{r['requests']} ({r['success_rate']:.0%})",
            fmt_seconds(r["time_to_active_p50_s"]),
            fmt_seconds(r["time_to_active_p95_s"]),
            r["ironic_api_calls"],
            r["bmc_calls"],
            r["ports_created"],
            r["leaked_allocations"],
            r["nodes_fenced"],
        ]
        for name, r in main.items()
    ]
    ours, blind = main["bmaas"], main["blind reschedule"]
    headline: dict[str, float | None] = {
        f"success rate: {name}": round(r["success_rate"], 3) for name, r in main.items()
    }
    headline["API calls: bmaas / blind"] = (
        round(ours["ironic_api_calls"] / blind["ironic_api_calls"], 2)
        if blind["ironic_api_calls"]
        else None
    )
    headline["BMC calls: bmaas / blind"] = (
        round(ours["bmc_calls"] / blind["bmc_calls"], 2) if blind["bmc_calls"] else None
    )
    headline["leaked allocations: bmaas"] = float(ours["leaked_allocations"])
    kinds = collections.Counter(d for d, _ in (LAYOUT * (o.nodes // len(LAYOUT) + 1))[: o.nodes])
    notes = [
        f"{o.requests} requests, {o.workers} at a time, on {o.nodes} nodes "
        f"({dict(kinds)}; dead BMCs and brownout nodes per LAYOUT); every request has a "
        "healthy candidate; each strategy on a fresh lab and a fresh Ironic",
        "Ironic 39 standalone (API + conductor, SQLite, noauth, ramdisk deploy, noop network), "
        "power sync off during the stream; bmaas-ipmi budget: operation 6 s, BMC call 1 s; "
        "stock ipmi min_command_interval 1 s, power_state_change_timeout 10 s",
        "API calls: counted at the client, every HTTP call (polls and retries included); "
        "BMC calls: counted at the lab's BMCs (Ironic's conductor makes them)",
        "leaked: allocations without an instance after the batch; fenced: nodes in maintenance",
    ]
    return Report(
        scenario="goodput-ironic",
        title="Goodput through a real Ironic: three retry strategies",
        params=dataclasses.asdict(o),
        tables=[
            Table(
                "one stream of deploys through Ironic, three strategies",
                [
                    "strategy",
                    "active",
                    "time to active p50",
                    "p95",
                    "Ironic API calls",
                    "BMC calls",
                    "ports created",
                    "leaked allocations",
                    "nodes fenced",
                ],
                rows,
            )
        ],
        headline=headline,
        notes=notes,
        data={"strategies": main},
    )
