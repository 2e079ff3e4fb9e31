"""Provisioning with a client-side reschedule: a request becomes an active
node, or fails with a typed account of every attempt, and never leaks a node,
a port or an allocation on the way.

Nova used to hide BMC trouble behind an automatic reschedule triggered by any
"unknown" exception. Here every failure is typed, and each type is handled at
the right level:

* the operation level (:mod:`bmaas.retry`) retries a busy or briefly
  unreachable BMC on the same node, and never resends a reboot blindly;
* the request level (this module) moves the request to the next candidate
  when a fault means "this node" (:func:`should_reschedule`), and stops at
  once when it means "this request" (bad input) or "our own state" (a lost
  lease, a database error).

Ownership follows the migration-allocations design: the request owns its
ports (created once, before any node is picked); each attempt owns its node;
on success the node and the ports pass to the new instance in one
transaction; on failure the attempt's node is released and the ports unbound
in one transaction, ready for the next attempt. Leases are renewed while we
work, so a client killed mid-deploy leaves nothing a later run does not
reclaim.

::

    from bmaas import provision
    with provision.Provisioner(store, driver_factory=factory) as p:
        done = p.provision(provision.Request("web-1", resource_class="baremetal"))
        print(done.node, [a.fault_class for a in done.attempts])
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bmaas import clock as _clock
from bmaas.candidates import candidates as find_candidates
from bmaas.deploy import DeploySettings, ReadyHook, Step, deploy_node
from bmaas.driver import BMCDriver
from bmaas.faults import (
    Attempt,
    BmaasError,
    BMCFault,
    BMCTimeout,
    InputError,
    NoCandidates,
    NodeUnavailable,
    ProvisionFailed,
)
from bmaas.health import Hysteresis
from bmaas.instances import InstancesMixin, Moved, counts_against_node, fence
from bmaas.lease import LeaseKeeper
from bmaas.provision.records import Provisioned, Request
from bmaas.retry import RetryPolicy
from bmaas.store import DEFAULT_LEASE_TTL, LeaseLost, OwnerKind, Store
from bmaas.store.records import Owner, Port, PortOrigin, ProvisionState

__all__ = [
    "DEPLOY_FAILURE",
    "DEPLOY_HEALTH",
    "Moved",
    "Provisioned",
    "Provisioner",
    "Request",
    "provision",
    "should_reschedule",
]

LOG = logging.getLogger(__name__)

DriverFactory = Callable[[Any], BMCDriver]

#: the fault a node gets after failing deploys in a row. Unlike the sync's
#: "power failure", good power reads do not clear it: a node that powers fine
#: but will not boot needs a person (``bmaas maintenance unset``).
DEPLOY_FAILURE = "deploy failure"
DEPLOY_HEALTH = Hysteresis(fault_after=2, recover_after=2, fault=DEPLOY_FAILURE)


@dataclasses.dataclass(frozen=True)
class _UnusedRequest:
    """What a user asks for. ``properties`` are minimums for numbers
    (``cpus: 8`` means at least 8) and exact for anything else."""

    name: str
    resource_class: str | None = None
    properties: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: boot this image by virtual media where the node supports it (else PXE)
    image_url: str | None = None
    #: create one port on this network for the request (bmaas owns it)
    network: str | None = None
    #: ports the user created: reused by every attempt, never deleted by bmaas
    ports: tuple[str, ...] = ()
    #: the instance's name (default: the request's)
    instance_name: str | None = None

    def to_data(self) -> dict[str, Any]:
        return {
            "resource_class": self.resource_class,
            "properties": dict(self.properties),
            "image_url": self.image_url,
        }


@dataclasses.dataclass(frozen=True)
class _UnusedProvisioned:
    """A request that became an instance."""

    request: str
    instance: str
    instance_id: str
    node: str
    #: every attempt that failed before the one that worked
    attempts: tuple[Attempt, ...]
    elapsed: float
    ports: tuple[str, ...]
    boot_method: str

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["attempts"] = [dataclasses.asdict(a) for a in self.attempts]
        return out


def should_reschedule(fault: BaseException) -> bool:
    """Whether a request may move on to another node after ``fault``.

    Yes for anything that says "this node": every BMC fault (a BMC that is
    busy or unreachable was already retried on the spot by the operation
    level, an auth or protocol error is this BMC's problem) and a node that
    cannot be used (claimed meanwhile, its segment out of IPs). No for the
    rest: bad input fails the same way everywhere, and a lost lease or a
    database error means we no longer know what we own.
    """
    return isinstance(fault, BMCFault | NodeUnavailable)


class Provisioner(InstancesMixin):
    """Deploys requests onto nodes of a :class:`~bmaas.store.Store`.

    Thread-safe: :meth:`provision_many` runs requests in parallel. Use as a
    context manager (or call :meth:`close`) so lease renewal stops.
    """

    def __init__(
        self,
        store: Store,
        *,
        driver_factory: DriverFactory,
        policy: RetryPolicy | None = None,
        settings: DeploySettings = DeploySettings(),  # noqa: B008 - frozen dataclass
        max_attempts: int = 3,
        deadline: float = 900.0,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        health: Hysteresis = DEPLOY_HEALTH,
        ready: ReadyHook | None = None,
        keep_leases: bool = True,
        clock: _clock.ClockFn | None = None,
    ) -> None:
        if max_attempts < 1:
            raise InputError("must be at least 1", field="max_attempts")
        self.store = store
        self.driver_factory = driver_factory
        self.policy = policy or RetryPolicy()
        self.settings = settings
        self.max_attempts = max_attempts
        self.deadline = deadline
        self.lease_ttl = lease_ttl
        self.health = health
        self.ready = ready
        self.clock = clock or self.policy.clock
        self.keeper = LeaseKeeper(store, ttl=lease_ttl) if keep_leases else None
        if self.keeper is not None:
            self.keeper.start()
        # Whatever a killed client left behind (its leases expired) goes back
        # before we pick nodes: "reclaimed by any later run".
        self.reclaimed = store.reclaim_expired()
        for done in self.reclaimed:
            LOG.warning("reclaimed from a dead client: %s", done)

    def close(self) -> None:
        if self.keeper is not None:
            self.keeper.close()

    def __enter__(self) -> Provisioner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- leases --------------------------------------------------------------------

    def _own(self, kind: OwnerKind, **kw: Any) -> Owner:
        owner = self.store.create_owner(kind, ttl=self.lease_ttl, **kw)
        if self.keeper is not None:
            self.keeper.add(owner.id)
        return owner

    def _disown(self, owner_id: str) -> None:
        if self.keeper is not None:
            self.keeper.discard(owner_id)

    def _check_leases(self, owner_ids: Sequence[str]) -> Callable[[Step], None]:
        def check(step: Step) -> None:
            if self.keeper is None:
                return
            for lost in self.keeper.lost:
                if lost.owner in owner_ids:
                    raise lost

        return check

    # -- provisioning ----------------------------------------------------------------

    def provision(
        self, request: Request, *, candidates: Sequence[str] | None = None
    ) -> Provisioned:
        """Deploy ``request`` on the best node, moving to alternates on node
        faults; ``candidates`` limits the choice to these nodes (in order).
        Raises :class:`ProvisionFailed` listing every attempt."""
        start = self.clock()
        owner = self._own(OwnerKind.REQUEST, name=request.name, data=request.to_data())
        attempts: list[Attempt] = []
        done = False
        try:
            ports = self._prepare_ports(owner, request)
            result = self._attempts(request, owner, ports, candidates, attempts, start)
            done = True
            return result
        finally:
            self._disown(owner.id)
            if not done:
                with contextlib.suppress(BmaasError):  # gone already: reclaimed or promoted
                    cleanup = self.store.delete_owner(owner.id)
                    LOG.info("request %s: cleaned up %s", request.name, cleanup)

    def _prepare_ports(self, owner: Owner, request: Request) -> list[Port]:
        """The request's ports, made once, before any node is picked."""
        ports = [self.store.attach_port(pid, owner.id) for pid in request.ports]
        if request.network:
            ports.append(
                self.store.create_port(
                    request.network,
                    owner_id=owner.id,
                    created_by=PortOrigin.BMAAS,
                    name=f"{request.name}-port",
                )
            )
        return ports

    def _attempts(
        self,
        request: Request,
        owner: Owner,
        ports: list[Port],
        among: Sequence[str] | None,
        attempts: list[Attempt],
        start: float,
    ) -> Provisioned:
        tried: set[str] = set()
        last: BaseException | None = None
        while len(attempts) < self.max_attempts:
            if self.clock() - start >= self.deadline:
                last = last or BMCTimeout(f"request deadline of {self.deadline:g}s reached")
                break
            claimed = self._claim_next(request, owner, tried, among, len(attempts) + 1)
            if claimed is None:
                break
            attempt, node = claimed
            tried.add(node)
            began = self.clock()
            try:
                boot_method = self._deploy_attempt(request, attempt, node, ports, start)
            except BmaasError as fault:
                last = fault
                attempts.append(Attempt.from_fault(node, fault, self.clock() - began))
                self._end_attempt(attempt, node, fault)
                if not should_reschedule(fault):
                    break
                LOG.warning(
                    "request %s: %s failed (%s); trying elsewhere",
                    request.name,
                    node,
                    type(fault).__name__,
                )
                continue
            instance = self.store.promote_attempt(
                attempt.id,
                instance_name=request.instance_name or request.name,
                data={**request.to_data(), "request": request.name, "boot_method": boot_method},
            )
            self._disown(attempt.id)
            return Provisioned(
                request=request.name,
                instance=instance.name or instance.id,
                instance_id=instance.id,
                node=node,
                attempts=tuple(attempts),
                elapsed=round(self.clock() - start, 3),
                ports=tuple(p.id for p in ports),
                boot_method=boot_method,
            )
        if not attempts and last is None:
            last = NoCandidates(
                f"no available node matches resource class {request.resource_class!r} "
                f"and properties {dict(request.properties)}",
                request=request.name,
            )
        reason = "no attempt succeeded" if attempts else "nothing was tried"
        raise ProvisionFailed(reason, request=request.name, attempts=attempts) from last

    def _claim_next(
        self,
        request: Request,
        owner: Owner,
        tried: set[str],
        among: Sequence[str] | None,
        number: int,
    ) -> tuple[Owner, str] | None:
        """Claim the best untried candidate for a new attempt. Nodes another
        request claims first are skipped (not counted as attempts)."""
        attempt = self._own(OwnerKind.ATTEMPT, name=f"{request.name}/{number}", parent_id=owner.id)
        skipped: set[str] = set()
        while True:
            names = find_candidates(
                self.store,
                resource_class=request.resource_class,
                properties=request.properties,
                exclude=tried | skipped,
                among=among,
            )
            if not names:
                self._disown(attempt.id)
                with contextlib.suppress(BmaasError):
                    self.store.delete_owner(attempt.id)
                return None
            try:
                self.store.claim(names[0], attempt.id, provision_state=ProvisionState.DEPLOYING)
            except NodeUnavailable:
                skipped.add(names[0])  # lost the race for it: the next one
                continue
            return attempt, names[0]

    def _deploy_attempt(
        self, request: Request, attempt: Owner, node: str, ports: list[Port], start: float
    ) -> str:
        for port in ports:
            self.store.bind_port(port.id, node)
        remaining = self.deadline - (self.clock() - start)
        settings = dataclasses.replace(
            self.settings,
            image_url=request.image_url,
            deadline=min(self.settings.deadline, remaining),
        )
        driver = self.driver_factory(self.store.node(node))
        try:
            try:
                report = deploy_node(
                    driver,
                    settings=settings,
                    policy=self.policy,
                    ready=self.ready,
                    before_step=self._check_leases([attempt.id, attempt.parent_id or ""]),
                )
            except BmaasError as fault:
                fence(driver, fault)
                raise
        finally:
            driver.close()
        return report.boot_method

    def _end_attempt(self, attempt: Owner, node: str, fault: BaseException) -> None:
        self._disown(attempt.id)
        policy = self.health if counts_against_node(fault) else None
        try:
            self.store.release_attempt(
                attempt.id, fault=fault if isinstance(fault, BmaasError) else None, policy=policy
            )
        except LeaseLost:
            LOG.warning("attempt on %s was already reclaimed", node)

    def provision_many(
        self,
        requests: Sequence[Request],
        *,
        workers: int = 8,
        on_result: Callable[[Provisioned | ProvisionFailed], None] | None = None,
    ) -> list[Provisioned | ProvisionFailed]:
        """Provision ``requests`` in parallel; one result per request, in order."""

        def one(request: Request) -> Provisioned | ProvisionFailed:
            try:
                return self.provision(request)
            except ProvisionFailed as exc:
                return exc
            except BmaasError as exc:  # the store failed under us: say so per request
                failed = ProvisionFailed(str(exc), request=request.name)
                failed.__cause__ = exc
                return failed

        results: list[Provisioned | ProvisionFailed] = []
        with concurrent.futures.ThreadPoolExecutor(max(1, workers)) as pool:
            for result in pool.map(one, requests):
                results.append(result)
                if on_result is not None:
                    on_result(result)
        return results


def provision(
    request: Request,
    *,
    store: Store,
    driver_factory: DriverFactory,
    candidates: Sequence[str] | None = None,
    max_attempts: int = 3,
    deadline: float = 900.0,
    policy: RetryPolicy | None = None,
    **options: Any,
) -> Provisioned:
    """Provision one request (see :class:`Provisioner` for the options)."""
    with Provisioner(
        store,
        driver_factory=driver_factory,
        max_attempts=max_attempts,
        deadline=deadline,
        policy=policy,
        **options,
    ) as provisioner:
        return provisioner.provision(request, candidates=candidates)
