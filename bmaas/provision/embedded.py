"""The embedded backend: bmaas's own store and drivers, nothing to run.

How the seam maps onto the store (see :mod:`bmaas.store.lifecycle`):

==================  ==========================================================
seam                store
==================  ==========================================================
``open``            a REQUEST owner (leased); its ports made once (bmaas-made
                    created, the user's attached)
``open_move``       nothing yet: the instance and its ports are the job
``claim``           an ATTEMPT owner claims the node and the request's ports
                    bind to it; a move: ``begin_move`` (the move owns the
                    source, the instance claims the target), in one transaction
``deploy``          :func:`bmaas.deploy.deploy_node` through the drivers, the
                    leases and the cancellation token checked before each step
``diagnose``        the fault itself: drivers already classify exactly
``release``         undo what the deploy left (power off, eject, boot
                    from disk: when the policy row's ``power_off_after_
                    failure`` says so); what could not be undone is
                    recorded as the node's leftovers (never claimed until
                    cleaned: :mod:`bmaas.provision.leftovers`), then
                    ``release_attempt`` /
                    ``abort_move`` in one transaction, the fault recorded
                    and, when the row ``fences``, counted
                    (:data:`DEPLOY_HEALTH`: two in a row -> maintenance)
``complete``        ``promote_attempt``; a move: ports to the target, source
                    powered off, ``finish_move``
``close``           failure: delete the REQUEST owner (its bmaas-made ports
                    deleted, the user's detached, any allocation dropped)
==================  ==========================================================
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from bmaas.candidates import candidates as find_candidates
from bmaas.candidates import matches
from bmaas.deadline import Deadline
from bmaas.deploy import DeploySettings, ReadyHook, Step, deploy_node, undeploy_node
from bmaas.driver import BMCDriver, PowerAction, PowerState, Quirk
from bmaas.faults import (
    BmaasError,
    InputError,
    NodeUnavailable,
    SlotTimeout,
)
from bmaas.health import HealthRule
from bmaas.lease import LeaseKeeper
from bmaas.policy import FaultPolicy, policy_for
from bmaas.provision.backend import Readiness
from bmaas.provision.cancel import CancelToken
from bmaas.provision.leftovers import Started, undo_leftovers, what_was_left
from bmaas.provision.readiness import readiness
from bmaas.provision.reclaim import Cleaned, reclaim
from bmaas.provision.records import Claim, Deployed, Instance, Job, Request
from bmaas.retry import RetryingDriver, RetryLimits
from bmaas.runtime import Runtime, node_driver
from bmaas.store import DEFAULT_LEASE_TTL, LeaseLost, OwnerKind
from bmaas.store.records import QUIRKS_KEY, NodeRecord, Owner, PortOrigin, ProvisionState

if TYPE_CHECKING:  # the caller's store: importing it here would load SQLAlchemy
    from bmaas.store import Reclaimed, Store

__all__ = ["DEPLOY_FAILURE", "DEPLOY_HEALTH", "UNDEPLOY_FAILURE", "EmbeddedBackend"]

LOG = logging.getLogger(__name__)

_QUIRKS = frozenset(str(q) for q in Quirk)

DriverFactory = Callable[[Any], BMCDriver]

#: the fault a node gets after failing deploys in a row. Unlike the sync's
#: "power failure", good power reads do not clear it: a node that powers fine
#: but will not boot needs a person (``bmaas maintenance unset``).
DEPLOY_FAILURE = "deploy failure"
DEPLOY_HEALTH = HealthRule(fault_after=2, recover_after=2, fault=DEPLOY_FAILURE)
#: the fault a node gets when it cannot be powered off as it is given up
UNDEPLOY_FAILURE = "undeploy failure"


class EmbeddedBackend:
    """The :class:`~bmaas.provision.backend.Backend` over a :class:`Store`.

    Starting it reclaims what dead clients left (and cleans those nodes);
    :meth:`close` stops lease renewal.
    """

    name = "embedded"

    def __init__(
        self,
        store: Store,
        *,
        driver_factory: DriverFactory,
        limits: RetryLimits | None = None,
        settings: DeploySettings = DeploySettings(),  # noqa: B008 - frozen dataclass
        lease_ttl: float = DEFAULT_LEASE_TTL,
        health: HealthRule = DEPLOY_HEALTH,
        ready: ReadyHook | None = None,
        keep_leases: bool = True,
        rt: Runtime,
        deadline: Deadline,
    ) -> None:
        """``deadline`` bounds what starting does: reclaiming and cleaning
        what dead clients left; ``rt``: the host's runtime, whose pool holds
        the sessions (both required; :class:`~bmaas.provision.Provisioner`
        makes them)."""
        self.store = store
        self.rt = rt
        self.driver_factory = driver_factory
        self.limits = limits or RetryLimits()
        self.settings = settings
        self.lease_ttl = lease_ttl
        #: one claim at a time in this process (:meth:`claim`)
        self._claiming = threading.Lock()
        self.health = health
        self.ready = ready
        self.keeper = LeaseKeeper(store, ttl=lease_ttl).start() if keep_leases else None
        #: what each attempt's deploy set out to do and the steps it started
        #: (by claim handle): what a failure left
        self._started: dict[str, Started] = {}
        # What a killed client left behind goes back, cleaned, before we pick nodes.
        self.reclaimed: list[Reclaimed]
        self.cleaned: Cleaned
        self.reclaimed, self.cleaned = reclaim(
            store,
            rt,
            driver_factory=driver_factory,
            limits=self.limits,
            power_timeout=settings.power_timeout,
            deadline=deadline,
        )
        for done in self.reclaimed:
            LOG.warning("reclaimed from a dead client: %s", done)

    def close_backend(self) -> None:
        if self.keeper is not None:
            self.keeper.close()

    # -- leases ----------------------------------------------------------------------

    def _own(self, kind: OwnerKind, **kw: Any) -> Owner:
        owner = self.store.owners.create(kind, ttl=self.lease_ttl, **kw)
        if self.keeper is not None:
            self.keeper.add(owner.id)
        return owner

    def _disown(self, owner_id: str | None) -> None:
        if self.keeper is not None and owner_id:
            self.keeper.discard(owner_id)

    def _check(
        self, owner_ids: Sequence[str], cancel: CancelToken, started: list[Step]
    ) -> Callable[[Step], None]:
        def check(step: Step) -> None:
            cancel.check(in_flight=True)
            if self.keeper is not None:
                for lost in self.keeper.lost:
                    if lost.owner in owner_ids:
                        raise lost
            started.append(step)

        return check

    # -- jobs --------------------------------------------------------------------------

    def open(self, request: Request, *, among: Sequence[str] | None = None) -> Job:
        owner = self._own(OwnerKind.REQUEST, name=request.name, data=request.to_data())
        try:
            ports = [self.store.ports.attach(pid, owner.id) for pid in request.ports]
            if request.network:
                ports.append(
                    self.store.ports.create(
                        request.network,
                        owner_id=owner.id,
                        created_by=PortOrigin.BMAAS,
                        name=f"{request.name}-port",
                    )
                )
        except BaseException:
            self._disown(owner.id)
            with contextlib.suppress(BmaasError):
                self.store.lifecycle.delete_owner(owner.id)
            raise
        chosen = tuple(among) if among is not None else None
        return Job(request, tuple(p.id for p in ports), among=chosen, handle=owner.id)

    def open_move(self, instance: str, *, to: str | None = None) -> Job:
        inst = self.instance(instance)
        if to is not None:
            self.store.nodes.get(to)  # an unknown node is bad input, not a refused candidate
        held = self.store.owners.allocations(owner_id=inst.id)
        if len(held) != 1:
            raise InputError(f"instance {instance!r} holds {len(held)} nodes, not 1")
        ports = tuple(p.id for p in self.store.ports.find(owner_id=inst.id))
        return Job(inst.request(), ports, moving=inst, among=(to,) if to else None)

    def close(self, job: Job, *, succeeded: bool) -> None:
        if job.handle is None:
            return
        self._disown(job.handle)
        if not succeeded:
            with contextlib.suppress(BmaasError):  # gone already: reclaimed or promoted
                cleanup = self.store.lifecycle.delete_owner(job.handle)
                LOG.info("%s: cleaned up %s", job.label, cleanup)

    # -- attempts ----------------------------------------------------------------------

    def candidates(self, job: Job, *, exclude: Collection[str], deadline: Deadline) -> list[str]:
        # the store's engine is bounded by the command's deadline already
        if job.among is not None:
            return [n for n in job.among if n not in exclude]
        request = job.request
        names = find_candidates(
            self.store,
            resource_class=request.resource_class,
            properties=request.properties,
            exclude=exclude,
        )
        if not request.traits:
            return names
        keep = {r.name for r in self.store.nodes.find(names) if _has_traits(r, request)}
        return [n for n in names if n in keep]

    def shortage(self, job: Job, *, deadline: Deadline) -> str:
        return shortage_text(self.store.nodes.find(), job.request)

    def claim(self, job: Job, node: str, *, number: int, deadline: Deadline) -> Claim:
        """Claim-then-check, one claim at a time in this process.

        Parallel requests list the same best node first. Each claim that
        loses costs the store's one writer three turns (an attempt owner
        written, the claim refused, the owner deleted), and under a herd
        the winner's write is still queued when the others read. So 96
        requests at once (``bmaas deploy --count 96 --workers 96`` on the
        vendor matrix) made 4,788 claims, 4,676 lost, in 63 s. Taken one
        at a time, a request reads the node after the last claim was
        committed and passes a taken one over without writing. Other
        processes still meet at the claim, the conditional write that
        stays the check."""
        if not self._claiming.acquire(timeout=deadline.left()):
            raise SlotTimeout(
                "another request of this process was claiming a node until the deadline",
                node=node,
                operation="claim",
            )
        try:
            return self._claim(job, node, number)
        finally:
            self._claiming.release()

    def _claim(self, job: Job, node: str, number: int) -> Claim:
        record = self.store.nodes.get(node)
        request = job.request
        if not (
            matches(record, request.resource_class, request.properties)
            and _has_traits(record, request)
        ):
            raise NodeUnavailable(
                node=node,
                reason=f"does not match resource class {request.resource_class!r}, "
                f"properties {dict(request.properties)}, traits {list(request.traits)}",
            )
        if job.moving is not None:
            move = self.store.lifecycle.begin_move(
                job.moving.id, node, ttl=self.lease_ttl, name=f"{job.label}/{number}"
            )
            if self.keeper is not None:
                self.keeper.add(move.id)
            return Claim(job, node, number, handle=move.id)
        if record.allocated:  # won by a request ahead of this one (see claim)
            raise NodeUnavailable(
                node=node, reason=f"allocated to {record.owner_name or 'another owner'}", taken=True
            )
        attempt = self._own(
            OwnerKind.ATTEMPT, name=f"{request.name}/{number}", parent_id=job.handle
        )
        try:
            self.store.owners.claim(node, attempt.id, provision_state=ProvisionState.DEPLOYING)
            for port in job.ports:
                self.store.ports.bind(port, node)
        except BaseException:
            self._disown(attempt.id)
            with contextlib.suppress(BmaasError):
                self.store.lifecycle.delete_owner(attempt.id)
            raise
        return Claim(job, node, number, handle=attempt.id)

    def deploy(self, claim: Claim, *, deadline: Deadline, cancel: CancelToken) -> Deployed:
        settings = dataclasses.replace(self.settings, image_url=claim.job.request.image_url)
        owners = [claim.handle, claim.job.handle or ""]
        record = self.store.nodes.get(claim.node)
        # What the node's BMC showed in earlier deploys (stock sushy-tools
        # keeps a one-time boot override as persistent): adapt, not fail.
        known = {q for q in record.extra.get(QUIRKS_KEY) or () if q in _QUIRKS}
        with self._driver(record, deadline) as driver:
            driver.quirks |= {Quirk(q) for q in known}
            started = self._started[claim.handle] = Started.of(driver, settings.image_url)
            try:
                report = deploy_node(
                    driver,
                    settings=settings,
                    limits=self.limits,
                    ready=self.ready,
                    before_step=self._check(owners, cancel, started.steps),
                    deadline=deadline,
                )
            finally:
                learned = {str(q) for q in driver.quirks} - known
                if learned:
                    self._record_quirks(claim.node, learned)
        return Deployed(claim.node, report.boot_method, report.steps)

    @contextlib.contextmanager
    def _driver(self, record: NodeRecord, deadline: Deadline) -> Iterator[BMCDriver]:
        """The node's pooled driver, held until the block ends."""
        with node_driver(self.rt, record, self.driver_factory, deadline=deadline) as drv:
            yield drv

    def _record_quirks(self, node: str, quirks: set[str]) -> None:
        """Keep what the BMC showed on the node's record (reported once)."""
        try:
            for quirk in self.store.nodes.record_quirks(node, quirks):
                LOG.warning("%s: the BMC shows %s; recorded on the node", node, quirk)
        except BmaasError as exc:  # a capability note must not fail a deploy
            LOG.info("%s: could not record BMC quirks %s: %s", node, sorted(quirks), exc)

    def diagnose(self, claim: Claim, error: BmaasError) -> BmaasError:
        return error  # bmaas's drivers classify at their edge already

    def release(
        self, claim: Claim, fault: BmaasError, policy: FaultPolicy, *, deadline: Deadline
    ) -> None:
        self._undo_after_failure(claim, fault, deadline)
        self._disown(claim.handle)
        counted = self.health if policy.fences else None
        context = f"request {claim.job.label}"
        try:
            if claim.job.moving is not None:
                self.store.lifecycle.abort_move(claim.handle)
                self._rebind(claim.job.ports, claim.job.moving.node)
                if counted is not None:
                    self.store.health.record_fault(
                        claim.node, fault, health_rule=counted, context=context
                    )
                else:
                    self.store.nodes.add_event(claim.node, "attempt_failed", f"{context}: {fault}")
            else:
                self.store.lifecycle.release_attempt(
                    claim.handle, fault=fault, health_rule=counted, context=context
                )
        except LeaseLost:
            LOG.warning("%s: attempt on %s was already reclaimed", claim.job.label, claim.node)

    def _undo_after_failure(self, claim: Claim, fault: BaseException, deadline: Deadline) -> None:
        """Undo what the failed deploy left on the node (power, media, boot
        override), once, best effort, within the request's ``deadline`` (one
        request of at most ``bmc_timeout`` each). Skipped when its BMC is the
        problem (it could not act anyway) or our claim is in doubt (the policy
        table's ``power_off_after_failure``), or when no time is left. What
        is still left is recorded: the node is not offered until cleaned.
        A lost lease records nothing: the node is reclaimed, and cleaned so."""
        left = what_was_left(self._started.pop(claim.handle, None))
        if not left or isinstance(fault, LeaseLost):
            return
        if policy_for(fault).power_off_after_failure:
            try:
                with self._driver(self.store.nodes.get(claim.node), deadline) as driver:
                    left = undo_leftovers(driver, left, deadline=deadline)
            except BmaasError as exc:
                LOG.info("%s: no driver to clean up after a failed deploy: %s", claim.node, exc)
        if left:
            self.store.health.set_leftovers(
                claim.node, left, reason=f"request {claim.job.label} failed: {fault}"
            )

    def complete(self, claim: Claim, deployed: Deployed, *, deadline: Deadline) -> Instance:
        job = claim.job
        if job.moving is not None:
            return self._finish_move(claim, deadline)
        request = job.request
        owner = self.store.lifecycle.promote_attempt(
            claim.handle,
            instance_name=request.instance_name or request.name,
            data={
                **request.to_data(),
                "request": request.name,
                "boot_method": deployed.boot_method,
            },
        )
        self._disown(claim.handle)
        self._disown(job.handle)
        self._started.pop(claim.handle, None)
        # a deploy leaves its node on: record it, as `power on` would
        self.store.health.note_power(states={claim.node: PowerState.ON})
        return self._instance(owner)

    def _finish_move(self, claim: Claim, deadline: Deadline) -> Instance:
        """The target is up: ports to it, the source powered off within the
        request's ``deadline`` (a source not off by then is fenced)."""
        job = claim.job
        assert job.moving is not None
        assert job.moving.node is not None
        source = job.moving.node
        self._rebind(job.ports, claim.node)
        fenced: BmaasError | None = None
        try:
            with self._driver(self.store.nodes.get(source), deadline) as old:
                RetryingDriver(old, self.limits).set_power_state(
                    PowerAction.OFF,
                    wait=True,
                    timeout=self.settings.power_timeout,
                    deadline=deadline,
                )
        except BmaasError as fault:
            LOG.warning("%s: could not power off the move's source: %s", source, fault)
            fenced = fault
        self.store.lifecycle.finish_move(claim.handle)
        self._disown(claim.handle)
        self.store.owners.set_provision_state(
            claim.node, ProvisionState.ACTIVE, owner_id=job.moving.id
        )
        # the power states the move left: target on, source off (or unknown)
        self.store.health.note_power(
            states={
                claim.node: PowerState.ON,
                source: PowerState.UNKNOWN if fenced is not None else PowerState.OFF,
            }
        )
        if fenced is not None:
            self.store.health.set_fault(source, UNDEPLOY_FAILURE, reason=str(fenced))
        return self.instance(job.moving.id)

    def _rebind(self, ports: Sequence[str], node: str | None) -> None:
        for port in ports:
            try:
                self.store.ports.unbind(port)
                if node is not None:
                    self.store.ports.bind(port, node)
            except BmaasError as exc:
                LOG.error("port %s: could not go to %s: %s", port, node, exc)

    # -- instances -----------------------------------------------------------------------

    def _instance(self, owner: Owner) -> Instance:
        held = self.store.owners.allocations(owner_id=owner.id)
        node = held[0].node if held else None
        state = str(self.store.nodes.get(node).provision_state) if node else None
        return Instance(owner.id, owner.name or owner.id, node, dict(owner.data), state)

    def instances(self) -> list[Instance]:
        return [self._instance(o) for o in self.store.owners.find(kind=OwnerKind.INSTANCE)]

    def instance(self, name_or_id: str) -> Instance:
        for owner in self.store.owners.find(kind=OwnerKind.INSTANCE):
            if name_or_id in (owner.id, owner.name):
                return self._instance(owner)
        raise InputError(f"no instance {name_or_id!r}", field="INSTANCE")

    def undeploy(self, instance: str, *, deadline: Deadline) -> list[str]:
        inst = self.instance(instance)
        nodes = [a.node for a in self.store.owners.allocations(owner_id=inst.id)]
        for node in nodes:
            try:
                with self._driver(self.store.nodes.get(node), deadline) as driver:
                    undeploy_node(
                        driver,
                        limits=self.limits,
                        power_timeout=self.settings.power_timeout,
                        deadline=deadline,
                    )
            except BmaasError as fault:
                if not policy_for(fault).fences:
                    # Not the node's fault (busy, bmaas's own wait or budget,
                    # credentials, bad driver_info): nothing says the node is
                    # broken, and it may still run the instance. The instance
                    # keeps its nodes; undeploying again finishes the job.
                    LOG.warning(
                        "%s: undeploy of %s not finished (not the node's fault; it keeps "
                        "the node, run undeploy again): %s",
                        node,
                        inst.name,
                        fault,
                    )
                    raise
                LOG.warning("%s: undeploy failed: %s", node, fault)
                self.store.lifecycle.delete_owner(inst.id)
                # The fault's message names the step that failed (power.set or
                # vmedia.eject); an eject fails only after the power-off worked.
                self.store.health.set_fault(node, UNDEPLOY_FAILURE, reason=str(fault))
                powered_off = str(getattr(fault, "operation", "") or "").startswith("vmedia")
                self.store.health.note_power(
                    states={node: PowerState.OFF if powered_off else PowerState.UNKNOWN}
                )
                return nodes
            self.store.health.note_power(states={node: PowerState.OFF})  # the state it was left in
        self.store.lifecycle.delete_owner(inst.id)
        return nodes

    # -- maintenance -------------------------------------------------------------------

    def set_maintenance(self, node: str, *, reason: str, by: str) -> None:
        self.store.nodes.set_maintenance(node, reason=reason, by=by)

    def holder(self, node: str) -> Instance | None:
        rec = self.store.nodes.get(node)
        if rec.owner_kind is not OwnerKind.INSTANCE or rec.owner_id is None:
            return None
        return self.instance(rec.owner_id)

    def readiness(self, node: str) -> Readiness:
        return readiness(self.store, node)


def shortage_text(nodes: Sequence[NodeRecord], request: Request) -> str:
    """Why none of ``nodes`` can serve ``request``, with counts: none enrolled,
    none of the resource class, none with the properties and traits asked,
    or every match held (allocated, in maintenance, faulted)::

        no node of resource class 'gpu' is available (3 enrolled, 0 of that class)
        no node of resource class 'gpu' is free (3 enrolled, 2 match: 1 allocated, 1 faulted)
    """
    if not nodes:
        return "no node is enrolled (run `bmaas enroll FILE`)"
    wanted = f"resource class {request.resource_class!r}" if request.resource_class else "any class"
    counts = [f"{len(nodes)} enrolled"]
    of_class = [n for n in nodes if matches(n, request.resource_class, {})]
    if request.resource_class:
        counts.append(f"{len(of_class)} of that class")
    match = [n for n in of_class if matches(n, None, request.properties)]
    match = [n for n in match if _has_traits(n, request)]
    asked = [f"properties {dict(request.properties)}"] if request.properties else []
    asked += [f"traits {list(request.traits)}"] if request.traits else []
    if of_class and asked:
        counts.append(f"{len(match)} with {' and '.join(asked)}")
    elif of_class:
        counts.append(f"{len(match)} match")
    if not match:
        return f"no node of {wanted} is available ({', '.join(counts)})"
    held = {
        "allocated": sum(1 for n in match if n.allocated),
        "faulted": sum(1 for n in match if n.fault and not n.allocated),
        "in maintenance": sum(1 for n in match if n.maintenance and not (n.allocated or n.fault)),
        "needing cleaning": sum(
            1 for n in match if n.leftovers and not (n.allocated or n.fault or n.maintenance)
        ),
    }
    busy = ", ".join(f"{v} {k}" for k, v in held.items() if v)
    if not busy:  # every match is excluded: a move's own source
        return f"no other node of {wanted} is free ({', '.join(counts)})"
    return f"no node of {wanted} is free ({', '.join(counts)}: {busy})"


def _has_traits(record: NodeRecord, request: Request) -> bool:
    """Traits (Ironic's word) match a node's ``traits`` property: all of the
    request's must be there."""
    have = record.properties.get("traits") or ()
    return set(request.traits) <= set(have)
