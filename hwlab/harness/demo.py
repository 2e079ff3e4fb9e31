"""``hwlab demo``: the product working, in one command.

Bring up a seeded flaky lab (IPMI and Redfish nodes, a share of dead and
browned-out ones), enroll its inventory, deploy a batch of instances with the
retry library, check that nothing leaked, undeploy, check again, and tear
the lab down. The summary is what an operator would want to see: requests,
successes, attempts, faults by class, nodes the system put into maintenance,
and leaked allocations and ports (always 0).
"""

from __future__ import annotations

import collections
import dataclasses
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bmaas import inventory as inventory_mod
from bmaas.deploy import DeploySettings
from bmaas.fakes.machine import Hardware
from bmaas.faults import ProvisionFailed
from bmaas.hwlab.lab import Lab
from bmaas.hwlab.labspec import generate
from bmaas.ops import driver_factory
from bmaas.provision import Provisioned, Provisioner, Request
from bmaas.retry import RetryLimits
from bmaas.store import OwnerKind, Store
from bmaas.store.records import SYSTEM, PortOrigin

__all__ = ["DemoOptions", "DemoSummary", "leaks", "run_demo"]

#: quick hardware, so the demo takes seconds and not minutes
DEMO_HARDWARE = Hardware(power_on_time=1.0, power_off_time=0.5, soft_off_time=1.0, os_boot_time=2.0)


@dataclasses.dataclass(frozen=True)
class DemoOptions:
    nodes: int = 12
    requests: int = 8
    protocols: str = "mixed"
    profile: str = "flaky,dead-bmc,brownout"
    seed: int | str = 7
    bmc_deadline: float = 1.0
    settle: float = 2.0
    workers: int = 8


@dataclasses.dataclass
class DemoSummary:
    nodes: int
    requests: int
    succeeded: int
    failed: int
    attempts: int
    faults_by_class: dict[str, int]
    maintenance: list[str]
    leaked_allocations: int
    leaked_ports: int
    leaked_after_undeploy: int
    time_to_active_p50: float | None
    time_to_active_max: float | None
    elapsed: float
    results: list[dict[str, Any]]

    @property
    def clean(self) -> bool:
        return not (self.leaked_allocations or self.leaked_ports or self.leaked_after_undeploy)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "clean": self.clean}


def leaks(store: Store) -> tuple[int, int]:
    """Allocations held by anything but an instance, and bmaas-made ports
    owned by anything but an instance: after a batch, both must be zero."""
    allocations = sum(
        1 for a in store.owners.allocations() if a.owner.kind is not OwnerKind.INSTANCE
    )
    instances = {o.id for o in store.owners.find(kind=OwnerKind.INSTANCE)}
    ports = sum(
        1
        for p in store.ports.find()
        if p.created_by is PortOrigin.BMAAS and p.owner_id not in instances
    )
    return allocations, ports


def run_demo(
    options: DemoOptions,
    workdir: Path,
    *,
    on_result: Callable[[Provisioned | ProvisionFailed], None] | None = None,
) -> DemoSummary:
    """Run the whole demo in ``workdir`` (lab state and database); the lab is
    stopped whatever happens."""
    start = time.monotonic()
    spec = generate(
        options.nodes,
        protocols=options.protocols,
        seed=options.seed,
        profile=options.profile,
        hardware=DEMO_HARDWARE,
    )
    with Lab(spec, workdir / "lab") as lab:
        store = Store.open(str(workdir / "bmaas.db"), create=True)
        try:
            inventory_mod.enroll(store, inventory_mod.load(lab.inventory_path))
            settings = DeploySettings(
                power_timeout=8.0, settle=options.settle, boot_timeout=20.0, deadline_s=60.0
            )
            requests = [
                Request(f"demo-{i:03d}", network="lab") for i in range(1, options.requests + 1)
            ]
            with Provisioner(
                store,
                driver_factory=driver_factory(bmc_timeout=options.bmc_deadline),
                limits=RetryLimits(total=15.0),
                settings=settings,
                max_attempts=3,
                deadline_s=180.0,
            ) as provisioner:
                results = provisioner.provision_many(
                    requests, workers=options.workers, on_result=on_result
                )
                leaked_allocations, leaked_ports = leaks(store)
                for result in results:
                    if isinstance(result, Provisioned):
                        provisioner.undeploy(result.instance)
            # Set by the system, never by a person: deploy faults in a row, or a
            # node fenced because it would not power off at undeploy.
            maintenance = [
                f"{n.name} ({n.fault})"
                for n in store.nodes.find()
                if n.fault or (n.maintenance and n.maintenance_by == SYSTEM)
            ]
            after = len(store.owners.allocations()) + sum(
                1 for p in store.ports.find() if p.created_by is PortOrigin.BMAAS
            )
        finally:
            store.close()
    done = [r for r in results if isinstance(r, Provisioned)]
    failed = [r for r in results if isinstance(r, ProvisionFailed)]
    # BMC faults only: a refused candidate (maintenance, no match) is no fault
    faults = collections.Counter(
        str(a.fault_class) for r in results for a in r.attempts if a.failed
    )
    times = [r.elapsed for r in done]
    return DemoSummary(
        nodes=options.nodes,
        requests=options.requests,
        succeeded=len(done),
        failed=len(failed),
        attempts=sum(_tried(r) for r in results),
        faults_by_class=dict(faults.most_common()),
        maintenance=maintenance,
        leaked_allocations=leaked_allocations,
        leaked_ports=leaked_ports,
        leaked_after_undeploy=after,
        time_to_active_p50=round(statistics.median(times), 2) if times else None,
        time_to_active_max=round(max(times), 2) if times else None,
        elapsed=round(time.monotonic() - start, 2),
        results=[_row(r) for r in results],
    )


def _tried(result: Provisioned | ProvisionFailed) -> int:
    """Deploys tried in a result's history, the one that worked included
    (refusals are not attempts)."""
    return sum(1 for a in result.attempts if a.tried)


def _row(result: Provisioned | ProvisionFailed) -> dict[str, Any]:
    if isinstance(result, Provisioned):
        return {
            "request": result.request,
            "node": result.node,
            "faults": [f"{a.node}:{a.fault_class}" for a in result.attempts if a.failed],
            "elapsed": result.elapsed,
        }
    return {
        "request": result.request,
        "node": None,
        "faults": [f"{a.node}:{a.fault_class}" for a in result.attempts if a.failed],
        "error": str(result.__cause__ or result),
    }
