"""The library's front door: provision, move, evacuate and undeploy, each one
call, all through the one reschedule loop (:func:`bmaas.provision.loop.run_job`)
on a backend (embedded by default).

::

    from bmaas.provision import Provisioner, Request
    with Provisioner(store, driver_factory=factory) as p:
        done = p.provision(Request("web-1", resource_class="baremetal"))
        print(done.node, [str(a) for a in done.attempts])

Budget: each request gets ``deadline_s`` seconds (``Provisioner(deadline_s=)``),
and never more than a caller's :class:`~bmaas.deadline.Deadline` (a CLI
command's ``--deadline``) leaves; ``Provisioner(deadline=)`` hands the
caller's budget to what starting does (the embedded backend's reclaim).
Interruption: a :class:`CancelToken` (the provisioner's own, or one per
call) stops starting new work; see :mod:`bmaas.provision.cancel`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from bmaas import clock as _clock
from bmaas import threads
from bmaas.deadline import Deadline
from bmaas.deploy import DeploySettings, ReadyHook
from bmaas.driver import BMCDriver
from bmaas.faults import BmaasError, InputError, ProvisionFailed
from bmaas.health import HealthRule
from bmaas.provision.backend import Backend, Readiness
from bmaas.provision.cancel import CancelToken, Interrupted
from bmaas.provision.embedded import DEPLOY_HEALTH, EmbeddedBackend
from bmaas.provision.loop import run_job
from bmaas.provision.records import Instance, Moved, Provisioned, Request
from bmaas.retry import RetryLimits
from bmaas.runtime import CLOSE_WITHIN, Runtime
from bmaas.store import DEFAULT_LEASE_TTL

if TYPE_CHECKING:  # the caller's store: importing it here would load SQLAlchemy
    from bmaas.store import Store

__all__ = ["Provisioner", "provision", "status_of"]

LOG = logging.getLogger(__name__)

DriverFactory = Callable[[Any], BMCDriver]
Result = Provisioned | ProvisionFailed


def status_of(result: Result) -> str:
    """What a request ended as, in one word, for reports: ``active``,
    ``failed``, ``interrupted`` (stopped after it started, rolled back) or
    ``not started`` (cancelled before it began)."""
    if isinstance(result, Provisioned):
        return "active"
    if isinstance(result.__cause__, Interrupted):
        return "interrupted" if result.attempts else "not started"
    return "failed"


class Provisioner:
    """Deploys requests onto nodes through a backend, rescheduling by fault.

    With a ``store`` and a ``driver_factory`` it runs the embedded backend;
    pass ``backend=`` for another (Ironic). Thread-safe: :meth:`provision_many`
    runs requests in parallel. Use as a context manager (or call
    :meth:`close`) so lease renewal stops and its sessions are logged out.
    """

    def __init__(
        self,
        store: Store | None = None,
        *,
        driver_factory: DriverFactory | None = None,
        backend: Backend | None = None,
        limits: RetryLimits | None = None,
        settings: DeploySettings = DeploySettings(),  # noqa: B008 - frozen dataclass
        max_attempts: int = 3,
        deadline_s: float = 900.0,
        min_attempt: float | None = None,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        health: HealthRule = DEPLOY_HEALTH,
        ready: ReadyHook | None = None,
        keep_leases: bool = True,
        clock: _clock.ClockFn | None = None,
        cancel: CancelToken | None = None,
        deadline: Deadline | None = None,
    ) -> None:
        """``deadline``: the caller's budget (a CLI command's ``--deadline``).
        Starting the embedded backend (reclaiming and cleaning what dead
        clients left) takes a share of it, at most ``deadline_s``; only a
        caller with no budget of its own (this is the public edge) gets a
        fresh ``deadline_s`` for it."""
        if max_attempts < 1:
            raise InputError("must be at least 1", field="max_attempts")
        self.limits = limits or RetryLimits()
        self.settings = settings
        self.max_attempts = max_attempts
        self.deadline_s = deadline_s
        #: the shortest time a deploy can succeed in: the settle window. Less
        #: left than this and no new attempt starts.
        self.min_attempt = settings.settle if min_attempt is None else min_attempt
        self.clock = clock or self.limits.clock
        self.cancel = cancel or CancelToken()
        self.store = store
        self.embedded: EmbeddedBackend | None = None
        self.rt: Runtime | None = None  # the embedded backend's (Ironic's reaches no BMC)
        self._budget = deadline  # the caller's (None: a caller with none): close's
        if backend is None:
            if store is None or driver_factory is None:
                raise InputError("needs a store and a driver_factory, or a backend")
            self.rt = Runtime(probe=False)
            self.embedded = EmbeddedBackend(
                store,
                driver_factory=driver_factory,
                limits=self.limits,
                settings=settings,
                lease_ttl=lease_ttl,
                health=health,
                ready=ready,
                keep_leases=keep_leases,
                rt=self.rt,
                # starting (reclaiming what dead clients left) takes a share
                # of the caller's budget, at most one request's
                deadline=self._request_deadline(deadline),
            )
            backend = self.embedded
        self.backend: Backend = backend
        self.reclaimed = self.embedded.reclaimed if self.embedded is not None else []

    def close(self) -> None:
        """Stop lease renewal; close the runtime within the caller's budget."""
        if self.embedded is not None:
            self.embedded.close_backend()
        if self.rt is not None:
            self.rt.close(self._budget or Deadline.after(CLOSE_WITHIN))

    def __enter__(self) -> Provisioner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request_deadline(self, deadline: Deadline | None) -> Deadline:
        """One request's budget: ``self.deadline`` seconds, within the caller's."""
        if deadline is None:
            return Deadline.after(self.deadline_s, clock=self.clock)
        return deadline.share(cap=self.deadline_s)

    def _run(self, job: Any, deadline: Deadline | None, cancel: CancelToken | None) -> Any:
        return run_job(
            self.backend,
            job,
            deadline=self._request_deadline(deadline),
            cancel=cancel or self.cancel,
            max_attempts=self.max_attempts,
            min_attempt=self.min_attempt,
            sleep=self.limits.sleep,
            clock=self.clock,
        )

    # -- requests ------------------------------------------------------------------

    def provision(
        self,
        request: Request,
        *,
        candidates: Sequence[str] | None = None,
        deadline: Deadline | None = None,
        cancel: CancelToken | None = None,
    ) -> Provisioned:
        """Deploy ``request`` on the best node, moving to alternates on node
        faults; ``candidates`` limits the choice to these nodes (in order).
        Raises :class:`ProvisionFailed` listing every attempt and refusal."""
        start = self.clock()
        token = cancel or self.cancel
        if token.cancelled:
            raise ProvisionFailed(
                "interrupted before it started", request=request.name
            ) from Interrupted(token.reason)
        job = self.backend.open(request, among=candidates)
        succeeded = False
        try:
            outcome = self._run(job, deadline, token)
            succeeded = True
        finally:
            self.backend.close(job, succeeded=succeeded)
        return Provisioned(
            request=request.name,
            instance=outcome.instance.name,
            instance_id=outcome.instance.id,
            node=outcome.deployed.node,
            attempts=outcome.attempts,
            elapsed=round(self.clock() - start, 3),
            ports=job.ports,
            boot_method=outcome.deployed.boot_method,
        )

    def provision_many(
        self,
        requests: Sequence[Request],
        *,
        workers: int = 8,
        on_result: Callable[[Result], None] | None = None,
        deadline: Deadline | None = None,
        cancel: CancelToken | None = None,
    ) -> list[Result]:
        """Provision ``requests`` in parallel; one result per request, in
        order. Once ``cancel`` is set, requests not yet started end as
        ``not started`` (see :func:`status_of`) and those in flight finish."""
        token = cancel or self.cancel

        def one(request: Request) -> Result:
            try:
                return self.provision(request, deadline=deadline, cancel=token)
            except ProvisionFailed as exc:
                return exc
            except BmaasError as exc:  # bad input or the store failed: say so per request
                failed = ProvisionFailed(str(exc), request=request.name)
                failed.__cause__ = exc
                return failed

        results: list[Result] = []
        with threads.pool(max(1, workers), "bmaas-request") as pool:
            for result in pool.map(one, requests):
                results.append(result)
                if on_result is not None:
                    on_result(result)
        return results

    # -- instances -----------------------------------------------------------------

    def instance(self, name_or_id: str) -> Instance:
        return self.backend.instance(name_or_id)

    def instances(self) -> list[Instance]:
        return self.backend.instances()

    def undeploy(self, name_or_id: str, *, deadline: Deadline | None = None) -> list[str]:
        """Power the instance's node off, eject media, then release the node
        and the ports (bmaas-made ports are deleted, the user's kept). A node
        that cannot be powered off is released with a fault, so nothing
        claims it until a person has looked."""
        return self.backend.undeploy(name_or_id, deadline=self._request_deadline(deadline))

    def move(
        self,
        name_or_id: str,
        *,
        to: str | None = None,
        deadline: Deadline | None = None,
        cancel: CancelToken | None = None,
    ) -> Moved:
        """Re-deploy an instance onto another node (``to``, or the best
        candidate, then alternates) through the same loop as a request.
        During the move the move owns the source and the instance the target;
        success frees the source, failure frees the target and gives the
        source back. ``ProvisionFailed`` says why each candidate was refused
        or failed; bad input and a lost lease stop at once."""
        start = self.clock()
        job = self.backend.open_move(name_or_id, to=to)
        assert job.moving is not None
        assert job.moving.node is not None
        token = cancel or self.cancel
        if token.cancelled:
            raise ProvisionFailed(
                "interrupted before it started", request=job.label
            ) from Interrupted(token.reason)
        outcome = self._run(job, deadline, token)
        return Moved(
            job.moving.name,
            job.moving.node,
            outcome.deployed.node,
            outcome.attempts,
            round(self.clock() - start, 3),
        )

    # -- maintenance ---------------------------------------------------------------

    def readiness(self, nodes: Sequence[str]) -> list[Readiness]:
        """Whether each node is ready for work on it (in maintenance, holding nothing)."""
        return [self.backend.readiness(n) for n in nodes]


def provision(
    request: Request,
    *,
    store: Store,
    driver_factory: DriverFactory,
    candidates: Sequence[str] | None = None,
    max_attempts: int = 3,
    deadline_s: float = 900.0,
    limits: RetryLimits | None = None,
    deadline: Deadline | None = None,
    **options: Any,
) -> Provisioned:
    """Provision one request (see :class:`Provisioner` for the options);
    ``deadline`` (the caller's budget) bounds starting and the request."""
    with Provisioner(
        store,
        driver_factory=driver_factory,
        max_attempts=max_attempts,
        deadline_s=deadline_s,
        limits=limits,
        deadline=deadline,
        **options,
    ) as provisioner:
        return provisioner.provision(request, candidates=candidates, deadline=deadline)
