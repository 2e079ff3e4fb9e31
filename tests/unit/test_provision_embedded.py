"""Move, evacuate, cancellation, budgets and reclaim cleaning through the one
reschedule loop on the embedded backend (FakeDriver, fake clock)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.faults import FaultRule
from bmaas.faults import InputError, ProvisionFailed
from bmaas.provision import (
    CLEANING_FAILURE,
    CancelToken,
    Provisioned,
    Provisioner,
    Request,
    evacuate,
    status_of,
)
from bmaas.store import RECLAIMED, OwnerKind, ProvisionState, Store
from tests.unit.test_provision import SETTINGS, Rack

STUCK = [{"effect": "power_stuck", "operation": "power.set"}]


def test_move_history_says_why_each_candidate_was_refused_or_failed(store: Store) -> None:
    rack = Rack(store, count=4, rules={"n03": STUCK})
    rack.provisioner.provision(Request("r1"), candidates=["n01"])
    store.nodes.set_maintenance("n02", reason="PSU", by="alice")
    with pytest.raises(ProvisionFailed) as info:
        rack.provisioner.move("r1", to="n02")
    (refused,) = info.value.attempts
    assert (refused.node, refused.outcome) == ("n02", "refused")
    assert "in maintenance (alice: PSU)" in refused.message
    assert "found no working target" not in str(info.value)
    assert "request move:r1 failed after 0 attempt(s) and 1 refused" in str(info.value)
    assert store.nodes.get("n01").owner_kind is OwnerKind.INSTANCE  # the instance kept its node

    moved = rack.provisioner.move("r1")
    assert moved.target == "n04"  # n02 in maintenance is not a candidate; n03 failed
    assert [(a.node, a.fault_class) for a in moved.attempts] == [
        ("n03", "PowerFailure"),
        ("n04", None),  # the target that worked
    ]
    assert moved.attempts[0].decision.startswith("next candidate")
    assert store.nodes.get("n03").owner_id is None
    assert store.owners.find(kind=OwnerKind.MOVE) == []


def test_move_stops_on_bad_input_instead_of_trying_on(store: Store) -> None:
    rack = Rack(store, count=2)
    rack.provisioner.provision(Request("r1"))
    with pytest.raises(InputError, match="no instance 'nope'"):
        rack.provisioner.move("nope")
    with pytest.raises(InputError, match="no such node"):
        rack.provisioner.move("r1", to="n99")
    assert store.owners.find(kind=OwnerKind.MOVE) == []


def test_repeated_faults_fence_a_node_with_a_reason_naming_the_request(store: Store) -> None:
    rack = Rack(store, count=2, rules={"n01": STUCK}, max_attempts=1)
    for name in ("r1", "r2"):
        with pytest.raises(ProvisionFailed):
            rack.provisioner.provision(Request(name), candidates=["n01"])
    node = store.nodes.get("n01")
    assert node.maintenance
    assert "request r2: n01: power.set" in (node.maintenance_reason or "")


def test_evacuate_moves_instances_and_reports_readiness(store: Store) -> None:
    rack = Rack(store, count=4, rules={"n03": STUCK})
    rack.provisioner.provision(Request("a", network="prov"), candidates=["n01"])
    rack.provisioner.provision(Request("b"), candidates=["n02"])
    report = evacuate(rack.provisioner, ["n01", "n02"], reason="rack swap", by="bob")
    assert [(node, m.instance, m.target) for node, m in report.moved] == [
        ("n01", "a", "n04"),
    ]
    ((node, error),) = report.failed  # n02's instance: n03 failed, nothing else left
    assert node == "n02"
    assert isinstance(error, ProvisionFailed)
    assert [a.node for a in error.attempts] == ["n03"]
    ready = {r.node: r for r in report.readiness}
    assert ready["n01"].ready
    assert not ready["n02"].ready
    assert "held by instance b" in ready["n02"].detail
    assert not report.ok
    assert store.nodes.get("n01").maintenance_by == "bob"
    (port,) = store.ports.find()
    assert port.node == "n04"


def test_cancel_mid_batch_finishes_in_flight_and_starts_nothing_else(store: Store) -> None:
    token = CancelToken()

    def ready(node: str, driver: object) -> bool:
        token.cancel("SIGINT received")  # the operator presses Ctrl-C mid-deploy
        return True

    rack = Rack(store, count=3, ready=ready, cancel=token)
    results = rack.provisioner.provision_many(
        [Request(f"r{i}", network="prov") for i in range(3)], workers=1
    )
    assert [status_of(r) for r in results] == ["active", "not started", "not started"]
    assert isinstance(results[0], Provisioned)
    # the store agrees with the report: one instance, nothing else held or left
    (instance,) = store.owners.find()
    assert instance.kind is OwnerKind.INSTANCE
    assert [a.node for a in store.owners.allocations()] == [results[0].node]
    assert len(store.ports.find()) == 1


def test_second_signal_rolls_back_the_attempt_in_flight(store: Store) -> None:
    token = CancelToken()

    asked: list[str] = []

    def ready(node: str, driver: object) -> bool:
        asked.append(node)
        token.cancel("SIGINT received")
        token.cancel("SIGINT received")  # pressed twice: roll back before the next wait
        return False  # not ready yet: without the roll-back it would poll for 10s

    rack = Rack(store, count=2, ready=ready, cancel=token)
    (result,) = rack.provisioner.provision_many([Request("r1", network="prov")])
    assert status_of(result) == "interrupted"
    assert isinstance(result, ProvisionFailed)
    assert [(a.node, a.fault_class) for a in result.attempts] == [("n01", "Interrupted")]
    assert asked == ["n01"]  # asked once: no further wait after the signal
    assert "n02" not in rack.drivers
    assert store.owners.find() == []
    assert store.owners.allocations() == []
    assert store.ports.find() == []
    assert rack.fleet.machine("n01").power_state() in (PowerState.OFF, PowerState.POWERING_OFF)


def test_a_command_budget_is_shared_by_its_requests(store: Store) -> None:
    rack = Rack(store, count=3)
    clock = rack.fleet.clock
    budget = Deadline.after(17, clock=clock.monotonic)
    rack.provisioner.provision(Request("r1"), deadline=budget)
    rack.provisioner.provision(Request("r2"), deadline=budget)
    assert budget.left() < SETTINGS.settle  # a deploy takes 7s of fake time
    with pytest.raises(ProvisionFailed) as info:
        rack.provisioner.provision(Request("r3"), deadline=budget)
    assert info.value.message.startswith("deadline:")
    assert info.value.attempts == []
    assert clock.monotonic() <= budget.at


def _dead_request_on(store: Store, wall: FakeClock, node: str) -> None:
    request = store.owners.create(OwnerKind.REQUEST, name="dead", ttl=30)
    attempt = store.owners.create(OwnerKind.ATTEMPT, parent_id=request.id, ttl=30)
    store.owners.claim(node, attempt.id, provision_state=ProvisionState.DEPLOYING)
    wall.advance(31)


def _fresh_run(rack: Rack) -> Provisioner:
    """What the next client does first: reclaim what dead ones left, and clean."""
    return Provisioner(
        rack.store, driver_factory=rack.factory, limits=rack.policy, keep_leases=False
    )


def test_reclaim_powers_off_and_ejects_before_the_node_is_available(
    store: Store, wall: FakeClock
) -> None:
    rack = Rack(store, count=2, power=PowerState.ON)
    machine = rack.fleet.machine("n01")
    machine.insert_media("http://images/installer.iso")
    _dead_request_on(store, wall, "n01")
    assert store.lifecycle.reclaim_expired() != []
    assert store.nodes.get("n01").fault == RECLAIMED
    assert not store.nodes.get("n01").claimable  # still on: nobody may have it yet

    fresh = _fresh_run(rack)
    assert fresh.embedded is not None
    assert fresh.embedded.cleaned.cleaned == ("n01",)
    assert machine.power_state() in (PowerState.OFF, PowerState.POWERING_OFF)
    assert machine.media is None
    node = store.nodes.get("n01")
    assert node.fault is None
    assert node.claimable
    assert store.nodes.events("n01")[-1].kind == "cleaned"
    assert rack.fleet.machine("n02").power_state() is PowerState.ON  # not reclaimed: untouched


def test_a_reclaimed_node_that_will_not_power_off_goes_into_maintenance(
    store: Store, wall: FakeClock
) -> None:
    rack = Rack(store, count=2, power=PowerState.ON)
    rack.fleet.machine("n01").plan.add(FaultRule.from_dict({"effect": "auth_fail"}))
    _dead_request_on(store, wall, "n01")
    fresh = _fresh_run(rack)
    assert fresh.embedded is not None
    ((name, why),) = fresh.embedded.cleaned.fenced
    assert name == "n01"
    node = store.nodes.get("n01")
    assert node.fault == CLEANING_FAILURE
    assert node.maintenance
    assert "reclaimed from a dead client, could not power off" in (node.maintenance_reason or "")
    assert "rejected credentials" in why
    assert store.nodes.get("n02").claimable


def test_the_library_guides_example_imports_what_exists() -> None:
    """The library guide's Python example (docs/library.md) compiles and
    every name it imports is there (running it needs BMCs: the lab test
    tests/lab/test_runnable_docs.py runs it against a lab)."""
    import ast
    import importlib
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "library.md").read_text()
    section = page.split("## Provisioning", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{node.module}.{alias.name}"


def test_parallel_requests_on_a_healthy_pool_never_collide(store: Store) -> None:
    """Eight requests list their candidates at the same moment (a barrier
    holds each until all have listed: the herd of ``bmaas deploy --count 96
    --workers 96``), so all eight see the same best node first; claim-then-
    check gives each its own node with no refusal: exactly eight deploys, one
    per node, and nothing in any request's history. Claims are taken one at a
    time in the process, so none is lost either: eight claims (before: 8 + 7
    + ... + 1 = 36, 28 of them lost)."""
    rack = Rack(store, count=8)
    backend = rack.provisioner.backend
    barrier = threading.Barrier(8, timeout=10)
    listed: set[int] = set()
    deployed: list[str] = []
    claims: list[str] = []
    lock = threading.Lock()
    list_candidates, deploy, claim = backend.candidates, backend.deploy, store.owners.claim

    def candidates(job: Any, *, exclude: Any, deadline: Any) -> list[str]:
        names = list_candidates(job, exclude=exclude, deadline=deadline)
        with lock:
            first = threading.get_ident() not in listed
            listed.add(threading.get_ident())
        if first:
            barrier.wait()  # every request has its list before anyone claims
        return names

    def counted_deploy(claim: Any, **kw: Any) -> Any:
        with lock:
            deployed.append(claim.node)
        return deploy(claim, **kw)

    def counted_claim(node: str, *args: Any, **kw: Any) -> Any:
        with lock:
            claims.append(node)
        return claim(node, *args, **kw)

    backend.candidates = candidates  # type: ignore[method-assign]
    backend.deploy = counted_deploy  # type: ignore[method-assign]
    store.owners.claim = counted_claim  # type: ignore[method-assign]
    results = rack.provisioner.provision_many(
        [Request(f"r{i}") for i in range(8)], workers=8, deadline=Deadline.after(600.0)
    )
    assert all(isinstance(r, Provisioned) for r in results), results
    # no refusal, no failure: each history is the one node that worked
    assert [[a.outcome for a in r.attempts] for r in results] == [["succeeded"]] * 8
    assert sorted(deployed) == rack.names  # 8 attempts, one per node
    assert sorted(claims) == rack.names  # one claim a node, none lost
    assert sorted(r.node for r in results if isinstance(r, Provisioned)) == rack.names


def test_the_start_up_reclaim_takes_a_share_of_the_callers_deadline(
    store: Store, wall: FakeClock
) -> None:
    """A command's budget reaches the reclaim: one already spent cleans
    nothing on the wire (the node is fenced, not cleaned on a fresh budget)."""
    rack = Rack(store, count=2, power=PowerState.ON)
    _dead_request_on(store, wall, "n01")
    spent = Deadline.after(0.0, clock=rack.fleet.clock.monotonic)
    fresh = Provisioner(
        rack.store, driver_factory=rack.factory, limits=rack.policy, keep_leases=False,
        deadline=spent,
    )  # fmt: skip
    assert fresh.embedded is not None
    assert fresh.embedded.cleaned.cleaned == ()
    ((name, why),) = fresh.embedded.cleaned.fenced
    assert name == "n01"
    assert "deadline" in why.lower()
    assert rack.fleet.machine("n01").power_state() is PowerState.ON  # never asked to power off
    assert [c for c in rack.calls("n01") if c.startswith("power.set")] == []


def test_a_claim_on_a_node_another_request_holds_writes_nothing(store: Store) -> None:
    """A node already allocated is refused as taken from the read the claim
    makes anyway: no attempt owner is written (and deleted) for it, so a herd
    of parallel requests listing the same best node costs the store's one
    writer one claim each, not one per node each lost (the vendor matrix's
    96 deploys at once: ~14,000 write turns)."""
    rack = Rack(store, count=2)
    rack.provisioner.provision(Request("r1"), candidates=["n01"])
    backend = rack.provisioner.backend
    owned: list[str] = []
    own = backend._own

    def counted_own(*args: Any, **kw: Any) -> Any:
        owned.append(kw["name"])
        return own(*args, **kw)

    backend._own = counted_own  # type: ignore[method-assign]
    result = rack.provisioner.provision(Request("r2"), candidates=["n01", "n02"])
    assert result.node == "n02"
    assert owned == ["r2", "r2/1"]  # the request, and one attempt: n02's, none for n01
    assert [a.node for a in result.attempts] == ["n02"]  # taken is no refusal
