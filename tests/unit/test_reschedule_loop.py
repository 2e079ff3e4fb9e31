"""The reschedule loop (bmaas.provision.loop) against a scripted backend: the
attempt history, every stop condition, what is released with which policy,
and cancellation, with a fake clock and no store."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.fakes.clock import FakeClock
from bmaas.faults import (
    BmaasError,
    BMCAuthError,
    BMCBusy,
    BootFailure,
    InputError,
    NoCandidates,
    NodeUnavailable,
    PowerFailure,
    ProvisionFailed,
    UnclassifiedFault,
)
from bmaas.policy import FaultPolicy, Reschedule
from bmaas.provision import (
    Backend,
    CancelToken,
    Claim,
    Deployed,
    Instance,
    Interrupted,
    Job,
    Request,
    run_job,
    should_reschedule,
)
from bmaas.store import LeaseLost

#: what a node does when deployed: a fault to raise, or seconds it takes to work
Script = dict[str, BmaasError | float]


@dataclasses.dataclass
class ScriptedBackend:
    """A Backend whose nodes behave as scripted; it records every call."""

    clock: FakeClock
    nodes: Sequence[str]
    script: Script = dataclasses.field(default_factory=dict)
    refuse: dict[str, str] = dataclasses.field(default_factory=dict)
    #: nodes a parallel request claims first (NodeUnavailable.taken)
    taken: set[str] = dataclasses.field(default_factory=set)
    seconds_per_deploy: float = 10.0
    on_deploy: Callable[[str], None] | None = None
    diagnosis: Callable[[BmaasError], BmaasError] | None = None
    calls: list[tuple[str, Any]] = dataclasses.field(default_factory=list)
    released: list[tuple[str, str, Reschedule, bool]] = dataclasses.field(default_factory=list)
    name: str = "scripted"

    def open(self, request: Request, *, among: Sequence[str] | None = None) -> Job:
        return Job(request, among=tuple(among) if among else None)

    def open_move(self, instance: str, *, to: str | None = None) -> Job:
        moving = Instance("i-1", instance, self.nodes[0])
        return Job(Request(instance), moving=moving, among=(to,) if to else None)

    def close(self, job: Job, *, succeeded: bool) -> None:
        self.calls.append(("close", succeeded))

    def candidates(self, job: Job, *, exclude: Collection[str], deadline: Deadline) -> list[str]:
        assert deadline.left() > 0  # the request's budget reaches the lookup
        pool = job.among if job.among is not None else self.nodes
        return [n for n in pool if n not in exclude]

    def shortage(self, job: Job, *, deadline: Deadline) -> str:
        return f"no node of {len(self.nodes)} scripted is free"

    def claim(self, job: Job, node: str, *, number: int, deadline: Deadline) -> Claim:
        self.calls.append(("claim", (node, number)))
        if node in self.refuse:
            raise NodeUnavailable(node=node, reason=self.refuse[node])
        if node in self.taken:
            raise NodeUnavailable(node=node, reason="allocated to request other", taken=True)
        return Claim(job, node, number)

    def deploy(self, claim: Claim, *, deadline: Deadline, cancel: CancelToken) -> Deployed:
        self.calls.append(("deploy", claim.node))
        if self.on_deploy is not None:
            self.on_deploy(claim.node)
        self.clock.advance(self.seconds_per_deploy)
        cancel.check(in_flight=True)
        outcome = self.script.get(claim.node)
        if isinstance(outcome, BmaasError):
            raise outcome
        return Deployed(claim.node, "pxe")

    def diagnose(self, claim: Claim, error: BmaasError) -> BmaasError:
        return self.diagnosis(error) if self.diagnosis else error

    def release(
        self, claim: Claim, fault: BmaasError, policy: FaultPolicy, *, deadline: Deadline
    ) -> None:
        self.released.append(
            (claim.node, type(fault).__name__, policy.reschedule, policy.counts_for_health)
        )

    def complete(self, claim: Claim, deployed: Deployed, *, deadline: Deadline) -> Instance:
        self.calls.append(("complete", claim.node))
        return Instance("i-1", claim.job.request.name, claim.node)

    def instances(self) -> list[Instance]:
        return []

    def instance(self, name_or_id: str) -> Instance:
        raise InputError("none")

    def undeploy(self, instance: str, *, deadline: Deadline) -> list[str]:
        return []

    def set_maintenance(self, node: str, *, reason: str, by: str) -> None: ...

    def holder(self, node: str) -> Instance | None:
        return None

    def readiness(self, node: str) -> Any:
        raise NotImplementedError


def _run(backend: ScriptedBackend, job: Job | None = None, **kw: Any) -> Any:
    options: dict[str, Any] = {"deadline": Deadline.after(600, clock=backend.clock), **kw}
    return run_job(backend, job or backend.open(Request("r1")), **options)


def _history(exc: ProvisionFailed) -> list[tuple[str, str, str, str]]:
    return [(a.node, a.outcome, a.fault_class, a.decision) for a in exc.attempts]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=0.0)


def test_the_scripted_backend_is_a_backend(clock: FakeClock) -> None:
    assert isinstance(ScriptedBackend(clock, ["n1"]), Backend)


def test_node_faults_move_on_and_the_history_says_why(clock: FakeClock) -> None:
    backend = ScriptedBackend(
        clock,
        ["n1", "n2", "n3"],
        script={"n1": PowerFailure("stuck", node="n1"), "n2": BMCAuthError("no", node="n2")},
    )
    done = _run(backend)
    assert done.deployed.node == "n3"
    assert [(a.node, a.fault_class, a.outcome) for a in done.attempts] == [
        ("n1", "PowerFailure", "failed"),
        ("n2", "BMCAuthError", "failed"),
        ("n3", None, "succeeded"),  # every node tried, the one that worked last
    ]
    assert done.attempts[-1].elapsed == 10.0
    assert str(done.attempts[-1]) == "n3: succeeded after 10.00s (pxe deploy)"
    assert done.attempts[0].decision.startswith("next candidate (power accepted but not reached")
    assert done.attempts[0].elapsed == 10.0
    # each failure released with its row of the policy table: power counts, auth never
    assert backend.released == [
        ("n1", "PowerFailure", Reschedule.NEXT_CANDIDATE, True),
        ("n2", "BMCAuthError", Reschedule.NEXT_CANDIDATE, False),
    ]
    assert [c for c in backend.calls if c[0] == "claim"] == [
        ("claim", ("n1", 1)),
        ("claim", ("n2", 2)),
        ("claim", ("n3", 3)),
    ]


def test_candidates_exhausted_stops_and_chains_the_last_node_fault(clock: FakeClock) -> None:
    backend = ScriptedBackend(
        clock, ["n1", "n2"], script={n: BootFailure("no boot", node=n) for n in ("n1", "n2")}
    )
    with pytest.raises(ProvisionFailed) as info:
        _run(backend, max_attempts=5)
    failed = info.value
    assert failed.message == "candidates exhausted"
    assert isinstance(failed.__cause__, BootFailure)
    assert [a.node for a in failed.attempts] == ["n1", "n2"]
    assert "request r1 failed after 2 attempt(s): candidates exhausted" in str(failed)


def test_nothing_to_try_is_no_candidates(clock: FakeClock) -> None:
    backend = ScriptedBackend(clock, [])
    with pytest.raises(ProvisionFailed) as info:
        _run(backend)
    assert info.value.message == "no node of 0 scripted is free"  # the backend's shortage
    assert str(info.value) == "request r1 failed after 0 attempt(s): no node of 0 scripted is free"
    assert isinstance(info.value.__cause__, NoCandidates)
    assert backend.released == []


def test_refused_candidates_are_in_the_history_but_are_not_attempts(clock: FakeClock) -> None:
    backend = ScriptedBackend(
        clock,
        ["n1", "n2", "n3"],
        refuse={"n1": "allocated to request other", "n2": "in maintenance (alice: PSU)"},
        script={"n3": PowerFailure("stuck", node="n3")},
    )
    with pytest.raises(ProvisionFailed) as info:
        _run(backend, max_attempts=1)
    assert _history(info.value) == [
        ("n1", "refused", "NodeUnavailable", "next candidate"),
        ("n2", "refused", "NodeUnavailable", "next candidate"),
        ("n3", "failed", "PowerFailure", info.value.attempts[2].decision),
    ]
    assert "in maintenance (alice: PSU)" in info.value.attempts[1].message
    assert "after 1 attempt(s) and 2 refused candidate(s)" in str(info.value)
    assert ("claim", ("n3", 1)) in backend.calls  # refusals do not use up attempt numbers


def test_a_node_taken_by_a_parallel_request_is_skipped_without_a_history_entry(
    clock: FakeClock,
) -> None:
    backend = ScriptedBackend(clock, ["n1", "n2", "n3"], taken={"n1", "n2"})
    outcome = _run(backend, max_attempts=1)
    assert outcome.instance.node == "n3"
    # a lost race is neither an attempt nor a refusal: only the node that worked
    assert [(a.node, a.outcome) for a in outcome.attempts] == [("n3", "succeeded")]
    claims = [c for c in backend.calls if c[0] == "claim"]
    assert claims == [("claim", ("n1", 1)), ("claim", ("n2", 1)), ("claim", ("n3", 1))]
    assert len([c for c in backend.calls if c[0] == "deploy"]) == 1


def test_policy_stop_ends_the_request_at_once(clock: FakeClock) -> None:
    backend = ScriptedBackend(clock, ["n1", "n2"], script={"n1": InputError("bad image")})
    with pytest.raises(ProvisionFailed) as info:
        _run(backend)
    assert info.value.message.startswith("InputError stops the request (bad input")
    assert _history(info.value)[0][1:3] == ("failed", "InputError")
    assert info.value.attempts[0].decision.startswith("stop (bad input")
    assert ("deploy", "n2") not in backend.calls


def test_a_lost_lease_stops_the_loop(clock: FakeClock) -> None:
    backend = ScriptedBackend(clock, ["n1", "n2"], script={"n1": LeaseLost("gone", owner="x")})
    with pytest.raises(ProvisionFailed) as info:
        _run(backend)
    assert "LeaseLost stops the request" in info.value.message
    assert [c for c in backend.calls if c[0] == "deploy"] == [("deploy", "n1")]


def test_max_attempts_stops(clock: FakeClock) -> None:
    backend = ScriptedBackend(
        clock, ["n1", "n2", "n3"], script={n: BMCBusy(node=n) for n in ["n1", "n2", "n3"]}
    )
    with pytest.raises(ProvisionFailed) as info:
        _run(backend, max_attempts=2)
    assert info.value.message == "2 attempt(s) allowed, all used"
    assert [a.node for a in info.value.attempts] == ["n1", "n2"]


def test_the_deadline_must_fit_another_attempt(clock: FakeClock) -> None:
    backend = ScriptedBackend(
        clock, ["n1", "n2", "n3"], script={n: PowerFailure(node=n) for n in ("n1", "n2", "n3")}
    )
    deadline = Deadline.after(25, clock=clock)
    with pytest.raises(ProvisionFailed) as info:
        _run(backend, deadline=deadline, min_attempt=8.0, max_attempts=5)
    # 0 -> 10 (n1), 10 -> 20 (n2); 5s left < 8s needed: n3 is never claimed
    assert [a.node for a in info.value.attempts] == ["n1", "n2"]
    assert info.value.message == "deadline: 5.0s left, an attempt needs 8s"
    assert clock.monotonic() == 20.0


def test_an_expired_deadline_starts_nothing_after_the_first(clock: FakeClock) -> None:
    backend = ScriptedBackend(clock, ["n1", "n2"], script={"n1": PowerFailure(node="n1")})
    backend.seconds_per_deploy = 30.0
    with pytest.raises(ProvisionFailed) as info:
        _run(backend, deadline=Deadline.after(20, clock=clock))
    assert [a.node for a in info.value.attempts] == ["n1"]
    assert info.value.message.startswith("deadline:")


def test_cancel_lets_the_attempt_in_flight_finish(clock: FakeClock) -> None:
    backend = ScriptedBackend(clock, ["n1", "n2"])
    token = _cancel_during_deploy(backend)
    done = _run(backend, cancel=token)  # n1 was in flight: it completes, and says so
    assert done.deployed.node == "n1"
    assert ("complete", "n1") in backend.calls


def test_cancel_starts_no_new_attempt_after_a_failure(clock: FakeClock) -> None:
    backend = ScriptedBackend(clock, ["n1", "n2"], script={"n1": PowerFailure(node="n1")})
    token = _cancel_during_deploy(backend)
    with pytest.raises(ProvisionFailed) as info:
        _run(backend, cancel=token)
    assert [a.node for a in info.value.attempts] == ["n1"]
    assert info.value.message == "interrupted (SIGINT received) after 1 attempt(s)"
    assert ("claim", ("n2", 2)) not in backend.calls
    assert backend.released == [("n1", "PowerFailure", Reschedule.NEXT_CANDIDATE, True)]


def _cancel_during_deploy(backend: ScriptedBackend) -> CancelToken:
    token = CancelToken()
    backend.on_deploy = lambda node: token.cancel("SIGINT received")
    return token


def test_roll_back_interrupts_the_attempt_in_flight(clock: FakeClock) -> None:
    token = CancelToken()
    backend = ScriptedBackend(
        clock, ["n1", "n2"], on_deploy=lambda node: token.cancel("SIGINT", roll_back=True)
    )
    with pytest.raises(ProvisionFailed) as info:
        _run(backend, cancel=token)
    assert _history(info.value) == [("n1", "failed", "Interrupted", "stop: interrupted")]
    assert backend.released == [("n1", "Interrupted", Reschedule.STOP, False)]
    assert isinstance(info.value.__cause__, Interrupted)


def test_cancelled_before_the_first_attempt_claims_nothing(clock: FakeClock) -> None:
    token = CancelToken()
    token.cancel("SIGTERM received")
    backend = ScriptedBackend(clock, ["n1"])
    with pytest.raises(ProvisionFailed) as info:
        _run(backend, cancel=token)
    assert info.value.attempts == []
    assert backend.calls == []


def test_diagnose_decides_what_the_fault_was(clock: FakeClock) -> None:
    """An Ironic-like backend reads the node's history: the loop acts on the
    diagnosis, and the chain keeps what the deploy raised."""
    backend = ScriptedBackend(
        clock,
        ["n1", "n2"],
        script={"n1": UnclassifiedFault("deploy failed", node="n1")},
        diagnosis=lambda error: InputError("image not found"),
    )
    with pytest.raises(ProvisionFailed) as info:
        _run(backend)
    assert _history(info.value)[0][2] == "InputError"
    cause = info.value.__cause__
    assert isinstance(cause, InputError)
    assert isinstance(cause.__cause__, UnclassifiedFault)


def test_a_bug_releases_the_node_and_surfaces(clock: FakeClock) -> None:
    backend = ScriptedBackend(clock, ["n1"])

    def boom(node: str) -> None:
        raise RuntimeError("bug")

    backend.on_deploy = boom
    with pytest.raises(RuntimeError, match="bug"):
        _run(backend)
    assert backend.released == [("n1", "BmaasError", Reschedule.STOP, False)]


def test_a_move_never_lands_where_it_starts(clock: FakeClock) -> None:
    backend = ScriptedBackend(clock, ["n1", "n2"])
    done = _run(backend, backend.open_move("web-1"))
    assert done.deployed.node == "n2"
    assert ("claim", ("n1", 1)) not in backend.calls


def test_reschedule_decision_comes_from_the_policy_table() -> None:
    assert should_reschedule(PowerFailure("x"))
    assert should_reschedule(NodeUnavailable("x"))
    assert not should_reschedule(InputError("x"))
    assert not should_reschedule(LeaseLost("x"))
    assert not should_reschedule(Interrupted("x"))
    assert not should_reschedule(RuntimeError("x"))


def test_no_attempt_starts_when_the_deadline_cannot_fit_one(clock: FakeClock) -> None:
    backend = ScriptedBackend(clock, ["n1"])
    with pytest.raises(ProvisionFailed) as info:
        _run(backend, deadline=Deadline.after(3, clock=clock), min_attempt=5.0)
    assert info.value.message == "deadline: 3.0s left, an attempt needs 5s"
    assert backend.calls == []
