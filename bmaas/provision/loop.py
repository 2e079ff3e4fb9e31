"""THE reschedule loop: one request (or move) across candidate nodes, on tenacity.

Provision, move and evacuate all run through :func:`run_job`; only the
:class:`~bmaas.provision.records.Job` differs. One tenacity attempt is one
try on one node. The strategies are small and stateless, like
:mod:`bmaas.retry`'s, and compose with ``|``:

=================================  ===========================================
strategy                           stops / retries when
=================================  ===========================================
``retry_if_policy_reschedules``    retry: ``policy_for(fault).reschedule`` is
                                   NEXT_CANDIDATE (a node fault); STOP for bad
                                   input, a lost lease, no candidates, an
                                   interruption, anything not about the node
``stop_after_attempt(n)``          ``max_attempts`` nodes were tried
``stop_unless_deadline_fits``      the request's :class:`~bmaas.deadline.Deadline`
                                   leaves less than ``min_attempt`` seconds
``stop_when_cancelled``            the :class:`~bmaas.provision.cancel.CancelToken`
                                   is set: start nothing new
=================================  ===========================================

Candidates run out inside an attempt: it raises ``NoCandidates`` (a STOP
fault). When there was nothing to try at all, the backend's ``shortage``
says why, with counts, and ``ProvisionFailed``'s message is that reason
("no node of resource class 'gpu' is available (3 enrolled, 0 of that
class)"), not an empty history. A candidate the backend refuses to give (claimed meanwhile, in
maintenance, not matching) is written into the history as ``refused`` and
the next one is asked for; a refusal is not an attempt. Parallel requests
share one candidate order (best first), so they race for the same nodes: a
claim is one conditional write (claim-then-check), and a node another request
won meanwhile (``NodeUnavailable.taken``) is skipped for the next one in the
list without a history entry, so a pool with at least as many free nodes as
requests gives every request its node with no refusal at all.

The history (:class:`~bmaas.faults.Attempt`, oldest first) says for every
node why it was refused or how it failed, and what the loop decided next;
on success its last entry is the node that worked (``outcome="succeeded"``),
so ``attempts`` counts every node tried, as the CLI's ATTEMPTS column does;
:class:`~bmaas.faults.ProvisionFailed` carries all of it, chained from the
last fault, with a message saying which stop condition ended the job.
"""

from __future__ import annotations

import dataclasses
import logging

import tenacity
from tenacity import RetryCallState

from bmaas import clock as _clock
from bmaas.deadline import Deadline
from bmaas.faults import Attempt, BmaasError, NoCandidates, NodeUnavailable, ProvisionFailed
from bmaas.policy import Reschedule, policy_for
from bmaas.provision.backend import Backend
from bmaas.provision.cancel import CancelToken, Interrupted
from bmaas.provision.records import Claim, Deployed, Instance, Job

__all__ = [
    "Outcome",
    "retry_if_policy_reschedules",
    "run_job",
    "should_reschedule",
    "stop_unless_deadline_fits",
    "stop_when_cancelled",
]

LOG = logging.getLogger(__name__)


def should_reschedule(fault: BaseException) -> bool:
    """Whether a job may move on to another node after ``fault`` (the policy
    table's ``reschedule`` column). An interruption never reschedules."""
    if isinstance(fault, Interrupted) or not isinstance(fault, BmaasError):
        return False
    return policy_for(fault).reschedule is Reschedule.NEXT_CANDIDATE


class retry_if_policy_reschedules(tenacity.retry_base):  # noqa: N801 - tenacity's naming style
    """Retry (on the next candidate) when the policy table says the last
    fault is about the node; anything else, including a bug, is not retried."""

    def __call__(self, retry_state: RetryCallState) -> bool:
        outcome = retry_state.outcome
        if outcome is None or not outcome.failed:
            return False
        return should_reschedule(outcome.exception())  # type: ignore[arg-type]


class stop_unless_deadline_fits(tenacity.stop.stop_base):  # noqa: N801 - tenacity's naming style
    """Stop when ``deadline`` leaves less than ``min_attempt`` seconds: an
    attempt that cannot finish in time would only hold a node and fail."""

    def __init__(self, deadline: Deadline, min_attempt: float) -> None:
        self.deadline = deadline
        self.min_attempt = min_attempt

    def __call__(self, retry_state: RetryCallState) -> bool:
        return not self.deadline.allows(self.min_attempt)


class stop_when_cancelled(tenacity.stop.stop_base):  # noqa: N801 - tenacity's naming style
    """Stop once the caller cancelled: no new attempt starts."""

    def __init__(self, cancel: CancelToken) -> None:
        self.cancel = cancel

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.cancel.cancelled


@dataclasses.dataclass(frozen=True)
class Outcome:
    """A job that succeeded: where, how, and its whole history (every node
    tried, the one that worked last, and every refusal)."""

    instance: Instance
    deployed: Deployed
    attempts: tuple[Attempt, ...]


@dataclasses.dataclass
class _Run:
    """What one job's run has seen; belongs to the run (strategies keep none)."""

    tried: set[str] = dataclasses.field(default_factory=set)
    history: list[Attempt] = dataclasses.field(default_factory=list)
    #: the last fault a node gave (what ProvisionFailed chains from when the
    #: candidates then run out)
    last_fault: BmaasError | None = None

    @property
    def failures(self) -> int:
        return sum(1 for a in self.history if a.failed)


def run_job(
    backend: Backend,
    job: Job,
    *,
    deadline: Deadline,
    cancel: CancelToken | None = None,
    max_attempts: int = 3,
    min_attempt: float = 0.0,
    sleep: _clock.SleepFn = _clock.sleep,
    clock: _clock.ClockFn | None = None,
) -> Outcome:
    """Run ``job`` on one candidate after another until one works or a stop
    condition holds; raise :class:`ProvisionFailed` with the whole history.

    The caller opened the job and closes it (``backend.close``); every claim
    made here is completed or released here.
    """
    cancel = cancel or CancelToken()
    clock = clock or deadline.clock
    if not deadline.allows(min_attempt):  # not even one attempt fits: claim nothing
        why = f"deadline: {deadline.left():.1f}s left, an attempt needs {min_attempt:g}s"
        raise ProvisionFailed(why, request=job.label)
    run = _Run()
    if job.moving is not None and job.moving.node:
        run.tried.add(job.moving.node)  # a move never lands where it starts

    def attempt() -> tuple[Instance, Deployed]:
        cancel.check()
        claim = _claim_next(backend, job, run, deadline)
        began = clock()
        try:
            deployed = backend.deploy(claim, deadline=deadline, cancel=cancel)
            instance = backend.complete(claim, deployed, deadline=deadline)
        except BmaasError as error:
            fault = backend.diagnose(claim, error)
            run.last_fault = fault
            decision = _decision(fault)
            run.history.append(
                Attempt.from_fault(claim.node, fault, round(clock() - began, 3), decision=decision)
            )
            LOG.warning("%s: %s failed (%s); %s", job.label, claim.node, fault, decision)
            backend.release(claim, fault, policy_for(fault), deadline=deadline)
            if fault is not error:
                raise fault from error
            raise
        except BaseException as bug:  # not a fault: give the node back, then let it surface
            internal = BmaasError(f"internal error: {type(bug).__name__}: {bug}")
            backend.release(claim, internal, policy_for(internal), deadline=deadline)
            raise
        elapsed = round(clock() - began, 3)
        run.history.append(Attempt.success(claim.node, elapsed, f"{deployed.boot_method} deploy"))
        return instance, deployed

    retrying = tenacity.Retrying(
        retry=retry_if_policy_reschedules(),
        stop=tenacity.stop_after_attempt(max_attempts)
        | stop_unless_deadline_fits(deadline, min_attempt)
        | stop_when_cancelled(cancel),
        wait=tenacity.wait_none(),
        sleep=sleep,
        reraise=True,
    )
    try:
        instance, deployed = retrying(attempt)
    except BmaasError as last:
        why = _stop_reason(last, run, deadline, cancel, max_attempts, min_attempt)
        cause = run.last_fault if isinstance(last, NoCandidates) and run.last_fault else last
        raise ProvisionFailed(why, request=job.label, attempts=run.history) from cause
    return Outcome(instance, deployed, tuple(run.history))


def _claim_next(backend: Backend, job: Job, run: _Run, deadline: Deadline) -> Claim:
    """Claim the best untried candidate; a refusal goes into the history and
    the next one is asked for. ``NoCandidates`` when none is left."""
    while True:
        names = backend.candidates(job, exclude=run.tried, deadline=deadline)
        if not names:
            raise _no_candidates(backend, job, run, deadline)
        for node in names:  # claim-then-check: the claim is the check
            run.tried.add(node)
            try:
                return backend.claim(job, node, number=run.failures + 1, deadline=deadline)
            except NodeUnavailable as refused:
                if refused.taken:  # a parallel request won it: not about the node
                    LOG.debug("%s: %s taken meanwhile: %s", job.label, node, refused)
                    continue
                run.history.append(
                    Attempt.from_fault(
                        node, refused, 0.0, outcome="refused", decision="next candidate"
                    )
                )
                LOG.info("%s: %s refused: %s", job.label, node, refused)
                break  # ask again: what the refusal changed may change the list


def _no_candidates(backend: Backend, job: Job, run: _Run, deadline: Deadline) -> NoCandidates:
    if job.among is not None:
        text = f"none of {', '.join(job.among)} could be used"
    elif run.history:
        text = "every matching node was tried or refused"
    else:  # nothing to try at all: the backend says why, with counts
        text = backend.shortage(job, deadline=deadline)
    return NoCandidates(text, request=job.label)


def _decision(fault: BmaasError) -> str:
    if isinstance(fault, Interrupted):
        return "stop: interrupted"
    policy = policy_for(fault)
    if policy.reschedule is Reschedule.NEXT_CANDIDATE:
        return f"next candidate ({policy.why})" if policy.why else "next candidate"
    return f"stop ({policy.why})" if policy.why else "stop"


def _stop_reason(
    last: BmaasError,
    run: _Run,
    deadline: Deadline,
    cancel: CancelToken,
    max_attempts: int,
    min_attempt: float,
) -> str:
    """Which stop condition ended the job, in words."""
    if isinstance(last, NoCandidates):
        return "candidates exhausted" if run.history else last.message
    if isinstance(last, Interrupted) or (cancel.cancelled and should_reschedule(last)):
        return f"interrupted ({cancel.reason}) after {run.failures} attempt(s)"
    if not should_reschedule(last):
        return f"{type(last).__name__} stops the request ({policy_for(last).why})"
    if run.failures >= max_attempts:
        return f"{max_attempts} attempt(s) allowed, all used"
    if not deadline.allows(min_attempt):
        return f"deadline: {deadline.left():.1f}s left, an attempt needs {min_attempt:g}s"
    return "no attempt succeeded"
