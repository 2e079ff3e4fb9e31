"""The Ironic backend: bmaas's reschedule loop in front of Ironic's API.

Ironic has allocations, provision-state changes and node history, but no
client that tries another node when a deploy fails (metalsmith deletes the
allocation and raises; Nova's reschedule was blind). This backend gives the
one loop (:func:`bmaas.provision.loop.run_job`) what it needs.

How each seam maps onto Ironic (candidates and their ranking, shortage,
claim, deploy, diagnose, release, complete) is docs/ironic.md's table. Two
rules with their why: a claim is an allocation restricted to one node
(Ironic has no exclude list), and a deploy cannot be cancelled, so at the
deadline the client stops *waiting* (``BMCTimeout``) and release tears it
down.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from bmaas import clock as _clock
from bmaas.deadline import Deadline
from bmaas.drivers.ironic_backend.api import BUSY_ALLOCATION, Api, IronicBusy
from bmaas.drivers.ironic_backend.classify import Evidence, classify, recent_errors
from bmaas.drivers.ironic_backend.instances import InstancesMixin
from bmaas.drivers.ironic_backend.ports import PortEntry, PortLedger
from bmaas.faults import BmaasError, BMCTimeout, InputError, NodeUnavailable
from bmaas.policy import FaultPolicy
from bmaas.provision.cancel import CancelToken, Interrupted
from bmaas.provision.records import Claim, Deployed, Instance, Job, Request
from bmaas.retry import retrying

__all__ = ["ClaimState", "IronicBackend", "JobState"]

LOG = logging.getLogger(__name__)

ACTIVE = "active"
DEPLOY_FAILED = "deploy failed"
ERROR = "error"
#: a deploy waiting for its agent to call back (Ironic's DEPLOYWAIT)
WAIT_CALL_BACK = "wait call-back"
#: states a deploy ends in, one way or the other
DEPLOY_DONE = {ACTIVE, DEPLOY_FAILED, ERROR}
#: states a tear-down ends in
TEARDOWN_DONE = {"available", "clean failed", ERROR, "manageable"}


@dataclasses.dataclass
class JobState:
    """The job's own bookkeeping (``Job.handle``)."""

    ports: list[PortEntry]
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    closed: bool = False


@dataclasses.dataclass(frozen=True)
class ClaimState:
    """An attempt's allocation (``Claim.handle``)."""

    allocation: str
    node_id: str
    #: the allocation's creation time on Ironic's clock: history since then is this attempt's
    since: str | None


class IronicBackend(InstancesMixin):
    """The :class:`~bmaas.provision.backend.Backend` on Ironic's API."""

    name = "ironic"

    def __init__(
        self,
        api: Api,
        *,
        instance_info: Mapping[str, Any] | None = None,
        poll: float = 1.0,
        allocation_timeout: float = 30.0,
        teardown_timeout: float = 120.0,
        sleep: _clock.SleepFn = _clock.sleep,
        clock: _clock.ClockFn = _clock.monotonic,
    ) -> None:
        self.api = api
        #: merged under each request's own (image_url -> image_source)
        self.instance_info = dict(instance_info or {})
        self.poll = poll
        self.allocation_timeout = allocation_timeout
        self.teardown_timeout = teardown_timeout
        self.sleep = sleep
        self.clock = clock
        self.ports = PortLedger()
        self._rc: dict[str, str | None] = {}
        #: nodes on the noop network interface: a VIF call there is accepted and
        #: does nothing, so the ledger alone records the binding (no API call)
        self._noop: set[str] = set()

    # -- jobs ----------------------------------------------------------------------------

    def open(self, request: Request, *, among: Sequence[str] | None = None) -> Job:
        if request.properties:
            raise InputError(
                "Ironic matches resource class and traits, not properties", field="properties"
            )
        entries = [self.ports.user(p) for p in request.ports]
        if request.network:
            entries.append(self.ports.create(request.network, name=f"{request.name}-port"))
        return Job(
            request=request,
            ports=tuple(e.id for e in entries),
            among=tuple(among) if among is not None else None,
            handle=JobState(entries),
        )

    def close(self, job: Job, *, succeeded: bool) -> None:
        state: JobState = job.handle
        with state.lock:
            if state.closed:
                return
            state.closed = True
        if succeeded:
            self.ports.hand_over(state.ports)
        else:
            gone = self.ports.remove_created(state.ports)
            if gone:
                LOG.info("%s: removed the ports it created: %s", job.label, ", ".join(gone))

    # -- one attempt ---------------------------------------------------------------------

    def candidates(self, job: Job, *, exclude: Collection[str], deadline: Deadline) -> list[str]:
        request = job.request
        if job.among is not None:
            return [n for n in job.among if n not in exclude]
        query: dict[str, Any] = {
            "details": True,
            "provision_state": "available",
            "maintenance": False,
            "associated": False,
        }
        if request.resource_class:
            query["resource_class"] = request.resource_class
        nodes = self.api.call("node.list", self.api.bm.nodes, deadline=deadline, **query)
        wanted = set(request.traits)
        ranked = []
        for node in nodes:
            name = node.name or node.id
            if name in exclude or node.id in exclude or node.power_state is None:
                continue
            if wanted and not wanted.issubset(set(node.traits or ())):
                continue
            self._rc[name] = node.resource_class
            if node.network_interface == "noop":
                self._noop.add(name)
            faulted = bool((node.extra or {}).get("bmaas_fault"))
            spread = hashlib.sha256(f"{request.name}/{node.id}".encode()).hexdigest()
            ranked.append((faulted, spread, name))
        return [name for _, _, name in sorted(ranked)]

    def shortage(self, job: Job, *, deadline: Deadline) -> str:
        request = job.request
        rc = request.resource_class
        wanted = f"resource class {rc!r}" if rc else "any class"
        query: dict[str, Any] = {"details": True}
        if request.resource_class:
            query["resource_class"] = request.resource_class
        try:
            nodes = list(self.api.call("node.list", self.api.bm.nodes, deadline=deadline, **query))
        except BmaasError as exc:  # a report: say what is known, never raise
            return f"no available node of {wanted} in Ironic (the count failed: {exc})"
        if not nodes:
            return f"no node of {wanted} is enrolled in Ironic"
        held: dict[str, int] = {}
        for node in nodes:
            if node.is_maintenance:
                why = "in maintenance"
            elif node.instance_id or node.allocation_id:
                why = "associated"
            elif node.provision_state != "available":
                why = str(node.provision_state)
            elif node.power_state is None:
                why = "power state unknown"
            else:
                why = f"without traits {list(request.traits)}"
            held[why] = held.get(why, 0) + 1
        busy = ", ".join(f"{n} {why}" for why, n in sorted(held.items()))
        counted = "of that class" if request.resource_class else "enrolled"
        return f"no node of {wanted} is available in Ironic ({len(nodes)} {counted}: {busy})"

    def claim(self, job: Job, node: str, *, number: int, deadline: Deadline) -> Claim:
        request = job.request
        resource_class = request.resource_class or self._rc.get(node)
        if resource_class is None:
            found = self.api.call("node.get", self.api.bm.get_node, node, node=node)
            resource_class = found.resource_class
        extra = {"bmaas_request": job.label, "bmaas_attempt": number}
        limits = self.api.busy.replace(max_attempts=3)
        allocating = deadline.share(cap=self.allocation_timeout)
        try:
            for attempt in retrying(limits, idempotent=True, deadline=allocating):
                with attempt:
                    allocation = self._allocate(
                        node, resource_class, request.traits, extra, allocating
                    )
        except IronicBusy as busy:  # still locked, or taken meanwhile: the next candidate
            raise NodeUnavailable(node=node, reason=busy.message) from busy
        state: JobState = job.handle
        for port in state.ports if node not in self._noop else ():
            self.api.call(
                "node.vif_attach",
                self.api.bm.attach_vif_to_node,
                allocation.node_id,
                port.id,
                node=node,
            )
        return Claim(
            job, node, number, ClaimState(allocation.id, allocation.node_id, allocation.created_at)
        )

    def _allocate(
        self,
        node: str,
        resource_class: str,
        traits: Sequence[str],
        extra: dict[str, Any],
        deadline: Deadline,
    ) -> Any:
        """One allocation restricted to ``node``: active, or deleted and
        refused. A node another allocation now holds (a parallel request won
        it) is refused as ``taken``: that says nothing about the node, and
        retrying cannot win it back. Otherwise Ironic's own "later"
        (:data:`~.api.BUSY_ALLOCATION`: the node's lock lost to a periodic
        task at reservation, its database locked) is :class:`IronicBusy`,
        retried on the same node."""
        asked = self.clock()
        allocation = self.api.call(
            "allocation.create",
            self.api.bm.create_allocation,
            resource_class=resource_class,
            traits=list(traits) or None,
            candidate_nodes=[node],
            extra=extra,
            deadline=deadline,
        )
        settle = deadline.share(cap=self.ALLOCATION_UNPROCESSED_S)
        allocation = self._settle_allocation(allocation.id, node, settle)
        if allocation.state == "active" and allocation.node_id:
            return allocation
        self._delete_allocation(allocation.id, node)
        if allocation.state == "allocating":
            # Ironic never processed it: its conductor failed the allocation's
            # own write ("database is locked" on SQLite, not retried by Ironic
            # 39) and left it allocating for good. That is Ironic's "later",
            # not the node's: a new allocation, on the same node.
            waited = self.clock() - asked
            raise IronicBusy(
                f"Ironic did not process the allocation in {waited:.1f}s: deleted, asking again",
                node=node,
            )
        why = allocation.last_error or allocation.state
        holder = self._holder(node, deadline)
        if holder is not None:
            raise NodeUnavailable(node=node, reason=f"allocated to {holder}: {why}", taken=True)
        if any(m in str(why) for m in BUSY_ALLOCATION):
            raise IronicBusy(f"Ironic said later: {why}", node=node)
        raise NodeUnavailable(node=node, reason=why)

    #: seconds an allocation may stay ``allocating`` before it is taken for one
    #: Ironic never processed (done in well under a second when Ironic is
    #: well; CI and under-load runs saw one left allocating for 90 s)
    ALLOCATION_UNPROCESSED_S = 20.0

    def _holder(self, node: str, deadline: Deadline) -> str | None:
        """The allocation (or instance) holding ``node`` now, if any: read once
        after a refused allocation, because Ironic's refusal text is the same
        whether the node was taken or merely did not match."""
        found = self.api.call("node.get", self.api.bm.get_node, node, node=node, deadline=deadline)
        holder = found.allocation_id or found.instance_id
        return str(holder) if holder else None

    def _settle_allocation(self, allocation_id: str, node: str, deadline: Deadline) -> Any:
        wait = 0.2  # usually done in well under a second; a busy conductor takes longer
        while True:
            allocation = self.api.call(
                "allocation.get",
                self.api.bm.get_allocation,
                allocation_id,
                node=node,
                deadline=deadline,
            )
            if allocation.state != "allocating" or not deadline.sleep(wait, self.sleep):
                return allocation
            wait = min(wait * 1.5, 2.0)

    def deploy(self, claim: Claim, *, deadline: Deadline, cancel: CancelToken) -> Deployed:
        state: ClaimState = claim.handle
        info = {**self.instance_info}
        if claim.job.request.image_url:
            info["image_source"] = claim.job.request.image_url
        began = self.clock()
        if info:  # key by key: what the node already has (kernel, ramdisk) stays
            patch = [
                {"op": "add", "path": f"/instance_info/{k}", "value": v} for k, v in info.items()
            ]
            self._locked(
                "node.update",
                claim.node,
                deadline,
                lambda: self.api.bm.patch_node(state.node_id, patch),
            )
        self._locked(
            "node.set_provision_state",
            claim.node,
            deadline,
            lambda: self.api.bm.set_node_provision_state(state.node_id, "active"),
        )
        node = self._wait(claim.node, state.node_id, DEPLOY_DONE, deadline, cancel=cancel)
        if node.provision_state not in DEPLOY_DONE:
            raise BMCTimeout(
                f"deploy still {node.provision_state} at the request's deadline "
                "(Ironic cannot cancel a deploy: stopped waiting)",
                node=claim.node,
                driver=node.driver,
                operation="ironic deploy",
                elapsed=round(self.clock() - began, 3),
            )
        if node.provision_state != ACTIVE:
            raise classify(self._evidence(claim, node))
        return Deployed(claim.node, "ironic", {"deploy": round(self.clock() - began, 3)})

    def diagnose(self, claim: Claim, error: BmaasError) -> BmaasError:
        """Ironic's own account wins over what the client saw (a 409, its own
        timeout) when it names a fault; reading it never raises."""
        state: ClaimState = claim.handle
        try:
            node = self.api.call("node.get", self.api.bm.get_node, state.node_id, node=claim.node)
            evidence = self._evidence(claim, node)
        except BmaasError as unreadable:
            LOG.warning("%s: cannot read what went wrong: %s", claim.node, unreadable)
            return error
        if isinstance(error, BMCTimeout) and not evidence.texts():
            return error
        return classify(evidence, fallback=error)

    def _evidence(self, claim: Claim, node: Any) -> Evidence:
        state: ClaimState = claim.handle
        history = self.api.history(state.node_id)
        return Evidence(
            node=claim.node,
            driver=node.driver,
            provision_state=node.provision_state,
            last_error=node.last_error,
            fault=node.fault,
            history=recent_errors(history, state.since),
        )

    def release(
        self, claim: Claim, fault: BmaasError, policy: FaultPolicy, *, deadline: Deadline
    ) -> None:
        """Fence (by the policy row), detach, tear down: within a share of the
        request's ``deadline`` of at most ``teardown_timeout`` (never a fresh
        budget); past it, each API call is tried once and nothing is waited for."""
        state: ClaimState = claim.handle
        deadline = deadline.share(cap=self.teardown_timeout)
        reason = f"bmaas: {claim.job.label} attempt {claim.number}: {fault.code}: {fault}"
        try:
            if policy.fences:
                self.fence(claim.node, state.node_id, reason, deadline)
            for port in claim.job.handle.ports if claim.node not in self._noop else ():
                self._quiet(
                    "node.vif_detach",
                    claim.node,
                    self.api.bm.detach_vif_from_node,
                    state.node_id,
                    port.id,
                )
            self._quiet(
                "node.update",
                claim.node,
                self.api.bm.patch_node,
                state.node_id,
                # one key: the node's other extra keys are not ours
                [{"op": "add", "path": "/extra/bmaas_fault", "value": reason[:255]}],
            )
            if policy.fences and self._abort_waiting(claim.node, state.node_id, deadline):
                return  # fenced, its deploy aborted: left for a person, not cleaned
            ended = self.tear_down(claim.node, state.node_id, deadline)
            if ended == ERROR and not policy.fences:
                self.fence(
                    claim.node, state.node_id, f"{reason}; tear-down ended in error", deadline
                )
        except Interrupted:
            # the second signal ends a rollback's waits too: say what is left
            LOG.warning(
                "%s: rollback of %s interrupted while waiting on Ironic: left it as it is "
                "(deploying or tearing down: Ironic finishes what it was asked; "
                "`openstack baremetal node show %s`)",
                claim.job.label,
                claim.node,
                claim.node,
            )
        except BmaasError as exc:
            LOG.error("%s: could not release %s cleanly: %s", claim.job.label, claim.node, exc)
        finally:
            self._delete_allocation(state.allocation, claim.node)

    def complete(self, claim: Claim, deployed: Deployed, *, deadline: Deadline) -> Instance:
        state: ClaimState = claim.handle
        job_state: JobState = claim.job.handle
        request = claim.job.request
        name = request.instance_name or request.name
        data = {**request.to_data(), "request": request.name}
        allocation = self.api.call(
            "allocation.update",
            self.api.bm.update_allocation,
            state.allocation,
            extra={
                "bmaas_request": request.name,
                "bmaas_instance": name,
                "bmaas_data": data,
                "bmaas_ports": [
                    {**p.to_dict(), "vif": claim.node not in self._noop} for p in job_state.ports
                ],
            },
            node=claim.node,
        )
        if claim.job.moving is not None:  # the target is up: give the source back
            self.undeploy(claim.job.moving.id, deadline=deadline)
        return Instance(allocation.id, name, claim.node, data, ACTIVE)

    def status_checks(self) -> list[Any]:
        """``bmaas status check --cloud``'s checks (:mod:`.status`)."""
        from bmaas.drivers.ironic_backend.status import checks

        return checks(self.api)

    # -- node state --------------------------------------------------------------------

    def fence(self, node: str, node_id: str, reason: str, deadline: Deadline) -> None:
        """Maintenance with ``reason``: Ironic never allocates the node again
        until a person unsets it. A 409 (locked) is retried until ``deadline``."""
        self._locked(
            "node.set_maintenance",
            node,
            deadline,
            lambda: self.api.bm.set_node_maintenance(node_id, reason=reason[:255]),
        )

    def _abort_waiting(self, node: str, node_id: str, deadline: Deadline) -> bool:
        """A fenced node whose deploy still waits for its agent (``wait
        call-back``: the request gave up on it and moves on): abort the deploy
        (API 1.110, Ironic 35.0+) and leave the node in ``deploy failed`` and
        maintenance, as the fault left it, instead of a tear-down whose
        cleaning would run on a node already judged faulty. True when it
        ended there; False (tear down as before) when the node was elsewhere,
        Ironic is older, or a deploy step that cannot be aborted runs past
        ``deadline``."""
        current = self.api.call("node.get", self.api.bm.get_node, node_id, node=node)
        if current.provision_state != WAIT_CALL_BACK:
            return False
        if not self.api.abort_deploy(node_id, node=node, deadline=deadline):
            LOG.info("%s: this Ironic cannot abort from %s (API < 1.110)", node, WAIT_CALL_BACK)
            return False
        ended = self._wait(node, node_id, DEPLOY_DONE, deadline)
        return bool(ended.provision_state == DEPLOY_FAILED)

    def tear_down(self, node: str, node_id: str, deadline: Deadline) -> str | None:
        """``deleted`` (tear down: power off, clean up, allocation gone), and
        wait until it ends; the state it ended in (``error`` when the BMC is
        dead: expected, the caller fences it)."""
        current = self.api.call("node.get", self.api.bm.get_node, node_id, node=node)
        if current.provision_state in ("available", "manageable"):
            return str(current.provision_state)
        if current.provision_state in ("deploying", WAIT_CALL_BACK):
            current = self._wait(node, node_id, DEPLOY_DONE | {WAIT_CALL_BACK}, deadline)
        self._locked(
            "node.set_provision_state",
            node,
            deadline,
            lambda: self.api.bm.set_node_provision_state(node_id, "deleted"),
        )
        ended = self._wait(node, node_id, TEARDOWN_DONE, deadline)
        return None if ended is None else str(ended.provision_state)

    def _wait(
        self,
        node: str,
        node_id: str,
        states: set[str],
        deadline: Deadline,
        *,
        cancel: CancelToken | None = None,
    ) -> Any:
        """Poll the node until its provision state is one of ``states`` or
        ``deadline`` passes; returns the node as last read. With ``cancel``,
        an interrupt is honoured between polls."""
        while True:
            if cancel is not None:
                cancel.check(in_flight=True)
            current = self.api.call("node.get", self.api.bm.get_node, node_id, node=node)
            if current.provision_state in states or not deadline.sleep(self.poll, self.sleep):
                return current

    def _locked(self, what: str, node: str, deadline: Deadline, fn: Any) -> Any:
        """One API call, retried on 409 (node locked) and Ironic's busy answers
        until ``deadline``; then the :class:`IronicBusy` is raised."""
        return self.api.call(what, fn, node=node, deadline=deadline)

    def _quiet(self, what: str, node: str, fn: Any, *args: Any, **kwargs: Any) -> None:
        try:
            self.api.call(what, fn, *args, node=node, **kwargs)
        except BmaasError as exc:
            LOG.info("%s: %s failed: %s", node, what, exc)

    def _delete_allocation(self, allocation: str, node: str) -> None:
        try:
            self.api.call(
                "allocation.delete",
                self.api.bm.delete_allocation,
                allocation,
                ignore_missing=True,
                node=node,
            )
        except BmaasError as exc:
            LOG.error("%s: allocation %s not deleted: %s", node, allocation, exc)
