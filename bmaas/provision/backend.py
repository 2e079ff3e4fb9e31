"""The backend seam: where the reschedule loop meets the nodes.

The loop (:mod:`bmaas.provision.loop`) decides *what* to do next from the
fault taxonomy and the policy table; a backend does it, against its own idea
of nodes and allocations. Two backends implement this protocol:

* **embedded** (:class:`bmaas.provision.embedded.EmbeddedBackend`, the
  default): bmaas's store and drivers, nothing to run;
* **ironic** (``drivers/ironic_backend``): Ironic's API through openstacksdk
  (allocations claim, provision-state changes deploy, node history says what
  went wrong).

One request, as the loop drives a backend::

    open(request) ─────────────▶ Job   request-level resources made ONCE (ports:
      │                                 bmaas-made ones created, the user's attached)
      ▼
    ┌─▶ candidates(job, exclude=tried) ─▶ [n3, n7, ...]  best first, none tried yet
    │     │ (empty: stop, "candidates exhausted"; before any attempt:
    │     │  shortage(job) says why, with counts)
    │     ▼
    │   claim(job, n3, number=k, deadline) ─▶ Claim   one allocation, owned by this attempt
    │     │ NodeUnavailable: "refused" in the history, next candidate, not an attempt
    │     ▼
    │   deploy(claim, deadline, cancel) ─▶ Deployed ──▶ complete(claim, deployed,
    │     │                                              deadline) ─▶ Instance
    │     │ raises                                       the instance owns the node
    │     ▼                                              and the ports; close(job, True)
    │   diagnose(claim, error) ─▶ BmaasError   what really went wrong (Ironic:
    │     │                                    node history / last_error, classified)
    │     ▼
    │   release(claim, fault, policy_for(fault), deadline)  node back to available, or into
    │     │                                       maintenance naming request + fault;
    │     │                                       the job's ports unbound, kept
    └─────┘ policy says NEXT_CANDIDATE, attempts and deadline allow, not cancelled
      │
      ▼ otherwise
    close(job, succeeded=False)   delete what the request created, never what the
                                  user passed in; nothing stays allocated
    raise ProvisionFailed(attempts=[every attempt and refusal, with why])

A move is the same loop on a job from :meth:`Backend.open_move`: ``claim``
gives the target to the instance while the move holds the source,
``complete`` moves the ports to the target and gives the source back (powered
off), ``release`` gives the target back and the instance keeps its source.

Rules every backend keeps:

* every method raises only :class:`~bmaas.faults.BmaasError` subclasses;
  foreign exceptions (SQLAlchemy, openstacksdk, keystoneauth) are mapped at
  the backend's edge, ``raise X(...) from exc``;
* ``claim`` is one conditional write (no read-then-write): two requests never
  hold one node; a node it cannot have raises ``NodeUnavailable`` with a
  ``reason`` (allocated, maintenance, faulted, does not match);
* every step that talks to a BMC or a service (``claim``, ``deploy``,
  ``release``, ``complete``, ``undeploy``) takes the request's
  :class:`~bmaas.deadline.Deadline` as a required keyword and ends by it,
  handing shares of it down (``deadline.share(cap=...)``); a clean-up never
  starts a fresh budget of its own. A clean-up whose deadline has passed
  does its bookkeeping (store, allocation) and leaves the node as it is:
  a node left on is powered off by the next deploy on it, or by reclaim;
* ``deploy`` ends by ``deadline`` (a backend that cannot cancel a deploy, as
  Ironic cannot, stops *waiting* at the deadline and reports ``BMCTimeout``-
  or ``BootFailure``-class faults, and ``release`` then tears it down);
  between its steps and before each wait it calls
  ``cancel.check(in_flight=True)``;
* losing the request's lease (or allocation) behind its back raises
  :class:`~bmaas.store.LeaseLost`: the loop stops at once;
* success leaves exactly one allocation, owned by the instance; final failure
  leaves nothing allocated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from typing import Any, Protocol, runtime_checkable

from bmaas.deadline import Deadline
from bmaas.faults import BmaasError
from bmaas.policy import FaultPolicy
from bmaas.provision.cancel import CancelToken
from bmaas.provision.records import Claim, Deployed, Instance, Job, Request

__all__ = ["Backend", "Readiness"]


@dataclasses.dataclass(frozen=True)
class Readiness:
    """Whether a node is ready for work on it: in maintenance and holding
    nothing (no allocation, no bound port, no instance)."""

    node: str
    ready: bool
    maintenance: bool
    maintenance_by: str | None
    reason: str | None
    fault: str | None
    #: what still holds the node, one line each
    held_by: tuple[str, ...]
    #: one line for people
    detail: str

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["held_by"] = list(self.held_by)
        return out


@runtime_checkable
class Backend(Protocol):
    """Nodes, allocations and deploys, as the reschedule loop needs them."""

    #: "embedded", "ironic": for reports and metrics
    name: str

    # -- jobs and request-level resources ------------------------------------------

    def open(self, request: Request, *, among: Sequence[str] | None = None) -> Job:
        """Start a request: take its lease/owner and make its request-level
        resources ONCE (create the ports bmaas owns, attach the user's).
        ``among`` limits the nodes to these, in order. Bad input
        (``InputError``: unknown network, port in use) is raised here, before
        any node is touched, and leaves nothing behind."""
        ...

    def open_move(self, instance: str, *, to: str | None = None) -> Job:
        """Start moving ``instance`` (name or id) to another node (``to``,
        or the best candidate). The job's request is the instance's request."""
        ...

    def close(self, job: Job, *, succeeded: bool) -> None:
        """End a job. After a failure: delete only what the request created
        (bmaas-made ports), detach the user's ports, drop any allocation left;
        after a success: only end the job's own bookkeeping. Idempotent."""
        ...

    # -- one attempt -----------------------------------------------------------------

    def candidates(self, job: Job, *, exclude: Collection[str], deadline: Deadline) -> list[str]:
        """Names of nodes that could serve ``job`` now, best first, none in
        ``exclude`` (the nodes this job tried or was refused). With
        ``job.among``: those nodes, in that order, even ones ``claim`` will
        refuse (so the history can say why). The lookup ends by ``deadline``."""
        ...

    def shortage(self, job: Job, *, deadline: Deadline) -> str:
        """Why no node can serve ``job`` at all, in one line with counts: what
        :class:`~bmaas.faults.NoCandidates` and ``ProvisionFailed`` say when
        ``candidates`` was empty before any attempt ("no node of resource
        class 'gpu' is available (3 enrolled, 0 match)"). Never raises; a
        count that ``deadline`` cuts short says so."""
        ...

    def claim(self, job: Job, node: str, *, number: int, deadline: Deadline) -> Claim:
        """Give ``node`` to attempt ``number`` of ``job`` in one conditional
        write, and bind the job's ports to it. ``NodeUnavailable`` (with
        ``reason``) if the node cannot be had; ``LeaseLost`` if the job is gone."""
        ...

    def deploy(self, claim: Claim, *, deadline: Deadline, cancel: CancelToken) -> Deployed:
        """Make the claimed node run the request's image; raise the typed fault
        that stopped it. Ends by ``deadline``; checks
        ``cancel.check(in_flight=True)`` between steps."""
        ...

    def diagnose(self, claim: Claim, error: BmaasError) -> BmaasError:
        """What went wrong with a failed deploy, as a typed fault: the error
        itself when it is already precise (embedded), or the classification
        of the node's history, ``last_error`` and ``fault`` (Ironic). Never raises."""
        ...

    def release(
        self, claim: Claim, fault: BmaasError, policy: FaultPolicy, *, deadline: Deadline
    ) -> None:
        """Give a failed attempt's node back: power it off where the fault
        allows, unbind the job's ports (kept for the next attempt), record
        ``fault`` on the node, and, when ``policy.counts_for_health`` says
        so, count it (repeated faults put the node into maintenance with a
        reason naming the request and the fault). Best effort: never raises
        for the node's sake; ``LeaseLost`` is logged, not raised."""
        ...

    def complete(self, claim: Claim, deployed: Deployed, *, deadline: Deadline) -> Instance:
        """The attempt worked: in one step the instance owns the node and the
        job's ports (a move: the target; the source is powered off and given back)."""
        ...

    # -- instances and maintenance -----------------------------------------------------

    def instances(self) -> list[Instance]:
        """Every instance, oldest first."""
        ...

    def instance(self, name_or_id: str) -> Instance:
        """One instance; ``InputError`` if there is none."""
        ...

    def undeploy(self, instance: str, *, deadline: Deadline) -> list[str]:
        """Power the instance's node off, eject media, release the node and
        its ports (bmaas-made deleted, the user's kept). A node that cannot be
        powered off is released into maintenance with a fault. Returns the
        nodes released."""
        ...

    def set_maintenance(self, node: str, *, reason: str, by: str) -> None:
        """Take ``node`` out of service: never claimed while there."""
        ...

    def holder(self, node: str) -> Instance | None:
        """The instance holding ``node``, if any (what evacuate must move)."""
        ...

    def readiness(self, node: str) -> Readiness:
        """Is ``node`` ready for work on it (in maintenance, holding nothing)?"""
        ...
