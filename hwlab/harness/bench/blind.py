"""The "blind reschedule" baseline of the goodput benchmark: what Nova did
before typed faults, written here so bmaas can be measured against it. It is
deliberately NOT in bmaas: no one should deploy this way.

Per request, up to ``max_hosts`` hosts. Each attempt is a new build on a new
host, as a Nova reschedule was:

* a **new port** is created for the attempt (networks were deallocated on
  reschedule and allocated again on the next host: never reused);
* the scheduler's best free node is claimed (the same ranking bmaas uses);
* the deploy runs with **no operation-level retries**: a busy answer, a lost
  packet or a slow BMC fails the attempt;
* on **any exception** (no classification: a wrong password is rescheduled
  like a dead BMC) the node is powered off once, blind, as Ironic's tear-down
  did, the attempt's port is deleted and the node released, and the request
  moves to the next host. The node's failure is not recorded anywhere, so
  the next request may pick the same broken node.

The store's ownership keeps the bookkeeping honest (one owner per attempt,
dropped in one transaction), so any leak the benchmark finds is a real one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable

from bmaas.candidates import candidates as find_candidates
from bmaas.deadline import Deadline
from bmaas.deploy import DeploySettings, deploy_node
from bmaas.driver import BMCDriver, PowerAction
from bmaas.faults import NoCandidates
from bmaas.hwlab.harness.budgets import per_call
from bmaas.provision import Request
from bmaas.retry import RetryLimits
from bmaas.store import OwnerKind, Store
from bmaas.store.records import NodeRecord, PortOrigin, ProvisionState

__all__ = ["BlindReschedule", "Placement"]

LOG = logging.getLogger(__name__)

#: no lease keeper runs for the baseline: leases outlast any benchmark run
LEASE_TTL = 3600.0


@dataclasses.dataclass(frozen=True)
class Placement:
    ok: bool
    node: str | None
    #: the class of every exception that ended an attempt, in order
    faults: tuple[str, ...]


class BlindReschedule:
    def __init__(
        self,
        store: Store,
        *,
        driver_factory: Callable[[NodeRecord], BMCDriver],
        settings: DeploySettings,
        max_hosts: int = 3,
        limits: RetryLimits | None = None,
    ) -> None:
        self.store = store
        self.driver_factory = driver_factory
        self.settings = settings
        self.max_hosts = max_hosts
        #: one attempt per BMC call (tests hand in one on a fake clock)
        self.limits = (limits or RetryLimits()).replace(max_attempts=1)

    def provision(self, request: Request) -> Placement:
        tried: list[str] = []
        faults: list[str] = []
        for host in range(1, self.max_hosts + 1):
            build = self.store.owners.create(
                OwnerKind.REQUEST, name=f"{request.name}#{host}", ttl=LEASE_TTL
            )
            try:
                node = self._attempt(request, build.id, host, tried)
            except NoCandidates as exc:  # Nova's NoValidHost: nowhere left to go
                faults.append(type(exc).__name__)
                self.store.lifecycle.delete_owner(build.id)
                break
            except Exception as exc:  # any failure at all: reschedule, unclassified
                faults.append(type(exc).__name__)
                LOG.info("%s: attempt %d failed (%s); rescheduling", request.name, host, exc)
                self.store.lifecycle.delete_owner(build.id)  # port deleted, node released
                continue
            return Placement(True, node, tuple(faults))
        return Placement(False, None, tuple(faults))

    def _attempt(self, request: Request, build_id: str, host: int, tried: list[str]) -> str:
        if request.network is not None:
            port = self.store.ports.create(
                request.network,
                owner_id=build_id,
                created_by=PortOrigin.BMAAS,
                name=f"{request.name}-port-{host}",
            )
        attempt = self.store.owners.create(
            OwnerKind.ATTEMPT, name=f"{request.name}/{host}", parent_id=build_id, ttl=LEASE_TTL
        )
        names = find_candidates(
            self.store,
            resource_class=request.resource_class,
            properties=request.properties,
            exclude=tried,
        )
        if not names:
            raise NoCandidates("no free node left", request=request.name)
        node = self.store.owners.claim_first(
            names, attempt.id, provision_state=ProvisionState.DEPLOYING
        ).node
        tried.append(node)
        if request.network is not None:
            self.store.ports.bind(port.id, node)
        driver = self.driver_factory(self.store.nodes.get(node))
        try:
            deploy_node(
                driver,
                settings=self.settings,
                limits=self.limits,
                deadline=Deadline.after(self.settings.deadline_s, clock=self.limits.clock),
            )
        except Exception:
            with contextlib.suppress(Exception):  # tear-down, blind, whatever the fault was
                driver.request_power(PowerAction.OFF, deadline=per_call(driver))
            raise
        finally:
            driver.close()
        self.store.lifecycle.promote_attempt(attempt.id, instance_name=request.name)
        return node
