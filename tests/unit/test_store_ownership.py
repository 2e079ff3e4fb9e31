"""Allocations have exactly one owner: claims, releases, swaps, leases, moves,
and the attempt/instance steps the retry layer uses."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCTimeout, InputError, NodeUnavailable, RetryScope
from bmaas.health import HealthRule
from bmaas.store import (
    POWER_FAILURE,
    RECLAIMED,
    LeaseLost,
    OwnerKind,
    ProvisionState,
    Store,
)
from bmaas.store import owners as store_owners
from bmaas.store.base import Tx

Enroll = Callable[..., list[str]]


def test_claim_gives_the_node_to_one_owner(store: Store, enroll: Enroll) -> None:
    enroll(2)
    a = store.owners.create(OwnerKind.ATTEMPT, name="req-1/1")
    allocation = store.owners.claim("n01", a.id)
    assert allocation.node == "n01"
    assert allocation.owner.id == a.id
    node = store.nodes.get("n01")
    assert (node.owner_id, node.owner_kind, node.owner_name) == (a.id, OwnerKind.ATTEMPT, "req-1/1")
    assert not node.claimable
    assert [x.node for x in store.owners.allocations(owner_id=a.id)] == ["n01"]


@pytest.mark.parametrize(
    ("prepare", "reason"),
    [
        (lambda s, other: s.owners.claim("n01", other.id), "allocated to attempt other"),
        (
            lambda s, other: s.nodes.set_maintenance("n01", reason="psu", by="bob"),
            "in maintenance (bob: psu)",
        ),
        (
            lambda s, other: s.health.set_fault("n01", POWER_FAILURE, reason="x"),
            "faulted: power failure",
        ),
    ],
    ids=["allocated", "maintenance", "faulted"],
)
def test_claim_fails_with_the_reason(
    store: Store, enroll: Enroll, prepare: Callable[[Store, object], object], reason: str
) -> None:
    enroll(1)
    other = store.owners.create(OwnerKind.ATTEMPT, name="other")
    prepare(store, other)
    mine = store.owners.create(OwnerKind.ATTEMPT, name="mine")
    with pytest.raises(NodeUnavailable) as info:
        store.owners.claim("n01", mine.id)
    assert info.value.node == "n01"
    assert info.value.reason is not None
    assert info.value.reason.startswith(reason)
    assert info.value.retry is RetryScope.OTHER_NODE
    assert store.owners.allocations(owner_id=mine.id) == []


def test_claim_by_an_expired_or_gone_owner_is_refused(
    store: Store, enroll: Enroll, wall: FakeClock
) -> None:
    enroll(1)
    owner = store.owners.create(OwnerKind.ATTEMPT, ttl=30)
    wall.advance(31)
    with pytest.raises(LeaseLost, match="expired"):
        store.owners.claim("n01", owner.id)
    with pytest.raises(LeaseLost, match="gone"):
        store.owners.claim("n01", "no-such-owner")
    with pytest.raises(InputError, match="no such node"):
        store.owners.claim("n99", owner.id)
    assert store.owners.allocation("n01") is None


def test_claim_first_walks_the_candidates_in_order(store: Store, enroll: Enroll) -> None:
    enroll(3)
    store.nodes.set_maintenance("n01", reason="x", by="bob")
    first = store.owners.create(OwnerKind.ATTEMPT)
    store.owners.claim("n02", first.id)
    mine = store.owners.create(OwnerKind.ATTEMPT)
    assert store.owners.claim_first(["n01", "n02", "n03"], mine.id).node == "n03"
    with pytest.raises(NodeUnavailable):
        store.owners.claim_first(["n01", "n02"], store.owners.create(OwnerKind.ATTEMPT).id)


def test_release_is_owner_checked_and_resets_provision_state(store: Store, enroll: Enroll) -> None:
    enroll(1)
    a = store.owners.create(OwnerKind.ATTEMPT)
    b = store.owners.create(OwnerKind.ATTEMPT)
    store.owners.claim("n01", a.id, provision_state=ProvisionState.DEPLOYING)
    assert store.nodes.get("n01").provision_state is ProvisionState.DEPLOYING
    with pytest.raises(NodeUnavailable, match="held by"):
        store.owners.release("n01", b.id)
    assert store.owners.release("n01", a.id) is True
    assert store.owners.release("n01", a.id) is False  # twice is harmless
    node = store.nodes.get("n01")
    assert node.provision_state is ProvisionState.AVAILABLE
    assert node.owner_id is None


def test_swap_is_all_or_nothing_when_an_owner_changed(store: Store, enroll: Enroll) -> None:
    enroll(2)
    inst = store.owners.create(OwnerKind.INSTANCE, name="vm-1")
    move = store.owners.create(OwnerKind.MOVE, name="mv-1")
    other = store.owners.create(OwnerKind.ATTEMPT)
    store.owners.claim("n01", inst.id)
    store.owners.claim("n02", other.id)
    # Second change names the wrong old owner: the first must not land either.
    with pytest.raises(NodeUnavailable, match="owner swap refused"):
        store.owners.swap([("n01", inst.id, move.id), ("n02", inst.id, move.id)])
    assert store.nodes.get("n01").owner_id == inst.id
    assert store.nodes.get("n02").owner_id == other.id


def test_swap_is_atomic_when_it_fails_in_the_middle(
    store: Store, enroll: Enroll, monkeypatch: pytest.MonkeyPatch
) -> None:
    enroll(2)
    inst = store.owners.create(OwnerKind.INSTANCE, name="vm-1")
    move = store.owners.create(OwnerKind.MOVE, name="mv-1")
    store.owners.claim("n01", move.id)
    store.owners.claim("n02", move.id)
    real = store_owners.swap_one
    calls: list[str] = []

    def fail_second(tx: Tx, node: str, old: str, new: str) -> None:
        calls.append(node)
        if len(calls) == 2:
            raise RuntimeError("process died mid-swap")
        real(tx, node, old, new)

    monkeypatch.setattr(store_owners, "swap_one", fail_second)
    with pytest.raises(RuntimeError):
        store.owners.swap([("n01", move.id, inst.id), ("n02", move.id, inst.id)])
    assert calls == ["n01", "n02"]
    assert store.nodes.get("n01").owner_id == move.id  # the first update was rolled back
    assert store.nodes.get("n02").owner_id == move.id
    monkeypatch.setattr(store_owners, "swap_one", real)
    store.owners.swap([("n01", move.id, inst.id), ("n02", move.id, inst.id)])
    assert {a.node for a in store.owners.allocations(owner_id=inst.id)} == {"n01", "n02"}


def test_leases_renew_until_they_expire_then_are_lost(store: Store, wall: FakeClock) -> None:
    owner = store.owners.create(OwnerKind.REQUEST, ttl=30)
    wall.advance(20)
    renewed = store.owners.renew_lease(owner.id, ttl=30)
    assert renewed.lease_expires_at == pytest.approx(wall.monotonic() + 30)
    wall.advance(29)
    store.owners.renew_lease(owner.id, ttl=30)
    wall.advance(31)
    with pytest.raises(LeaseLost, match="expired"):
        store.owners.renew_lease(owner.id)
    instance = store.owners.create(OwnerKind.INSTANCE)
    assert instance.lease_expires_at is None
    assert (
        store.owners.renew_leases([instance.id, owner.id]) != []
    )  # the instance is fine, owner lost
    assert [e.owner for e in store.owners.renew_leases([instance.id, owner.id])] == [owner.id]


def test_reclaim_gives_back_what_dead_owners_held(
    store: Store, enroll: Enroll, wall: FakeClock
) -> None:
    enroll(4)
    dead_req = store.owners.create(OwnerKind.REQUEST, name="r-dead", ttl=30)
    dead_try = store.owners.create(OwnerKind.ATTEMPT, parent_id=dead_req.id, ttl=30)
    store.owners.claim("n01", dead_try.id, provision_state=ProvisionState.DEPLOYING)
    live = store.owners.create(OwnerKind.ATTEMPT, ttl=300)
    store.owners.claim("n02", live.id)
    inst = store.owners.create(OwnerKind.INSTANCE)
    store.owners.claim("n03", inst.id)
    wall.advance(60)
    assert [a.node for a in store.owners.allocations(expired=True)] == ["n01"]
    reclaimed = store.lifecycle.reclaim_expired()
    assert [(r.owner.id, r.nodes) for r in reclaimed] == [(dead_req.id, ["n01"])]
    node = store.nodes.get("n01")
    assert node.owner_id is None
    assert node.provision_state is ProvisionState.AVAILABLE  # never stuck "deploying"
    released, marked = store.nodes.events("n01")[-2:]
    assert released.kind == "released"
    assert "reclaimed" in released.message
    # still powered on for all we know: held out of service until cleaned
    assert marked.kind == "needs_cleaning"
    assert node.fault == RECLAIMED
    assert not node.claimable
    assert store.nodes.get("n02").owner_id == live.id
    assert store.nodes.get("n03").owner_id == inst.id  # durable: never reclaimed
    assert store.lifecycle.reclaim_expired() == []
    assert store.owners.find(kind=OwnerKind.ATTEMPT) == [store.owners.get(live.id)]


def test_release_attempt_frees_the_node_and_counts_the_fault(store: Store, enroll: Enroll) -> None:
    enroll(1)
    policy = HealthRule(fault_after=2)
    fault = BMCTimeout("no answer", node="n01", driver="ipmi", operation="power.set")
    for round_ in range(2):
        req = store.owners.create(OwnerKind.REQUEST)
        attempt = store.owners.create(OwnerKind.ATTEMPT, parent_id=req.id)
        store.owners.claim("n01", attempt.id, provision_state=ProvisionState.DEPLOYING)
        assert store.lifecycle.release_attempt(attempt.id, fault=fault, health_rule=policy) == [
            "n01"
        ]
        with pytest.raises(LeaseLost):
            store.owners.get(attempt.id)
        assert store.owners.get(req.id).kind is OwnerKind.REQUEST  # the request lives on
        node = store.nodes.get("n01")
        assert node.owner_id is None
        assert node.last_error == str(fault)
        assert node.fault == (POWER_FAILURE if round_ == 1 else None)
    node = store.nodes.get("n01")
    assert node.maintenance_by == "system"
    failed = [e for e in store.nodes.events("n01") if e.kind == "attempt_failed"]
    assert failed[-1].data["code"] == "bmc_timeout"


def test_promote_makes_the_instance_the_owner_in_one_step(store: Store, enroll: Enroll) -> None:
    enroll(1)
    req = store.owners.create(OwnerKind.REQUEST, name="req-9")
    attempt = store.owners.create(OwnerKind.ATTEMPT, parent_id=req.id)
    store.owners.claim("n01", attempt.id, provision_state=ProvisionState.DEPLOYING)
    instance = store.lifecycle.promote_attempt(
        attempt.id, instance_name="vm-9", data={"image": "u"}
    )
    assert instance.kind is OwnerKind.INSTANCE
    assert instance.lease_expires_at is None
    node = store.nodes.get("n01")
    assert (node.owner_id, node.provision_state) == (instance.id, ProvisionState.ACTIVE)
    for gone in (attempt.id, req.id):
        with pytest.raises(LeaseLost):
            store.owners.get(gone)
    with pytest.raises(InputError, match="holds no node"):
        store.lifecycle.promote_attempt(store.owners.create(OwnerKind.ATTEMPT).id)


def test_move_success_and_failure_leave_the_right_owner(store: Store, enroll: Enroll) -> None:
    enroll(3)
    inst = store.owners.create(OwnerKind.INSTANCE, name="vm")
    store.owners.claim("n01", inst.id, provision_state=ProvisionState.ACTIVE)

    move = store.lifecycle.begin_move(inst.id, "n02")
    assert store.nodes.get("n01").owner_id == move.id  # the move owns the source
    assert store.nodes.get("n02").owner_id == inst.id  # the instance owns the target
    assert store.nodes.get("n02").provision_state is ProvisionState.DEPLOYING
    assert store.lifecycle.finish_move(move.id) == ["n01"]
    assert store.nodes.get("n01").owner_id is None
    assert [a.node for a in store.owners.allocations(owner_id=inst.id)] == ["n02"]

    move = store.lifecycle.begin_move(inst.id, "n03")
    store.lifecycle.abort_move(move.id)
    assert store.nodes.get("n03").owner_id is None
    assert store.nodes.get("n03").provision_state is ProvisionState.AVAILABLE
    assert [a.node for a in store.owners.allocations(owner_id=inst.id)] == ["n02"]


def test_a_move_to_an_unavailable_target_changes_nothing(store: Store, enroll: Enroll) -> None:
    enroll(2)
    inst = store.owners.create(OwnerKind.INSTANCE)
    store.owners.claim("n01", inst.id)
    store.nodes.set_maintenance("n02", reason="x", by="bob")
    with pytest.raises(NodeUnavailable):
        store.lifecycle.begin_move(inst.id, "n02")
    assert store.nodes.get("n01").owner_id == inst.id
    assert store.owners.find(kind=OwnerKind.MOVE) == []


def test_a_dead_move_is_rolled_back_by_reclaim(
    store: Store, enroll: Enroll, wall: FakeClock
) -> None:
    enroll(2)
    inst = store.owners.create(OwnerKind.INSTANCE)
    store.owners.claim("n01", inst.id, provision_state=ProvisionState.ACTIVE)
    move = store.lifecycle.begin_move(inst.id, "n02", ttl=30)
    wall.advance(31)
    [done] = store.lifecycle.reclaim_expired()
    assert done.owner.id == move.id
    assert done.move_rolled_back
    assert done.nodes == ["n02"]
    assert [a.node for a in store.owners.allocations(owner_id=inst.id)] == ["n01"]
    assert store.nodes.get("n01").provision_state is ProvisionState.ACTIVE


def test_deleting_an_owner_takes_its_children_and_allocations(store: Store, enroll: Enroll) -> None:
    enroll(2)
    req = store.owners.create(OwnerKind.REQUEST)
    a1 = store.owners.create(OwnerKind.ATTEMPT, parent_id=req.id)
    store.owners.claim("n01", a1.id)
    store.owners.claim("n02", req.id)
    done = store.lifecycle.delete_owner(req.id)
    assert done.nodes == ["n01", "n02"]
    assert store.owners.allocations() == []
    assert store.owners.find() == []


def test_set_provision_state_requires_holding_the_node(store: Store, enroll: Enroll) -> None:
    enroll(1)
    a = store.owners.create(OwnerKind.ATTEMPT)
    b = store.owners.create(OwnerKind.ATTEMPT)
    store.owners.claim("n01", a.id)
    store.owners.set_provision_state("n01", ProvisionState.DEPLOYING, owner_id=a.id)
    with pytest.raises(NodeUnavailable):
        store.owners.set_provision_state("n01", ProvisionState.ACTIVE, owner_id=b.id)
    assert store.nodes.get("n01").provision_state is ProvisionState.DEPLOYING
