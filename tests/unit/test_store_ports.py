"""Ports: created before a node is picked, bound after, unbound on failure,
reused by the next attempt; cleanup deletes only what bmaas created."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCTimeout, InputError, NodeUnavailable, RetryScope
from bmaas.inventory import NetworkSpec, SegmentSpec
from bmaas.store import LeaseLost, OwnerKind, PortOrigin, SegmentExhausted, Store
from tests.unit.conftest import network_spec

Enroll = Callable[..., list[str]]


@pytest.fixture
def rack(enroll: Enroll) -> list[str]:
    """Four nodes in segment rack1 (pool .10-.20) of network prov, one in rack2."""
    names = enroll(4, segment="rack1", networks=[network_spec()])
    enroll(
        1,
        prefix="x",
        segment="rack2",
        networks=[
            network_spec(
                "prov",
                {
                    "rack1": ("10.1.0.0/24", "10.1.0.10", "10.1.0.20"),
                    "rack2": ("10.2.0.0/24", "10.2.0.10", "10.2.0.11"),
                },
            )
        ],
    )
    return names


def test_the_request_lifecycle_reuses_its_port_across_attempts(
    store: Store, rack: list[str]
) -> None:
    request = store.owners.create(OwnerKind.REQUEST, name="req-1")
    port = store.ports.create(
        "prov", owner_id=request.id, name="eth0", mac_address="52:54:00:aa:bb:01"
    )
    assert (port.bound, port.created_by, port.owner_id) == (False, PortOrigin.BMAAS, request.id)

    # Attempt 1 on n01 binds, then fails: the node goes back and the port is unbound.
    a1 = store.owners.create(OwnerKind.ATTEMPT, parent_id=request.id)
    store.owners.claim("n01", a1.id)
    bound = store.ports.bind(port.id, "n01")
    assert (bound.node, bound.segment, bound.ip_address) == ("n01", "rack1", "10.1.0.10")
    assert store.ports.bind(port.id, "n01") == bound  # idempotent
    store.lifecycle.release_attempt(a1.id, fault=BMCTimeout("late", node="n01"))
    after = store.ports.get(port.id)
    assert (after.node, after.ip_address) == (None, None)

    # Attempt 2 on n02 reuses the same port (same id, same MAC).
    a2 = store.owners.create(OwnerKind.ATTEMPT, parent_id=request.id)
    store.owners.claim("n02", a2.id)
    rebound = store.ports.bind(port.id, "n02")
    assert (rebound.id, rebound.mac_address, rebound.node) == (port.id, "52:54:00:aa:bb:01", "n02")

    # Success: the instance owns the node and the port, the request is gone.
    instance = store.lifecycle.promote_attempt(a2.id, instance_name="vm-1")
    final = store.ports.get(port.id)
    assert (final.owner_id, final.node, final.ip_address) == (
        instance.id,
        "n02",
        rebound.ip_address,
    )
    assert store.ports.find(owner_id=request.id) == []


def test_cleanup_deletes_bmaas_ports_and_hands_back_user_ports(
    store: Store, rack: list[str]
) -> None:
    user_port = store.ports.create("prov", created_by=PortOrigin.USER, name="mine")
    assert user_port.owner_id is None
    request = store.owners.create(OwnerKind.REQUEST)
    ours = store.ports.create("prov", owner_id=request.id)
    store.ports.attach(user_port.id, request.id)
    store.ports.attach(user_port.id, request.id)  # idempotent
    store.owners.claim("n01", request.id)
    store.ports.bind(ours.id, "n01")
    store.ports.bind(user_port.id, "n01")

    done = store.ports.cleanup(request.id)
    assert done.deleted == [ours.id]
    assert done.detached == [user_port.id]
    with pytest.raises(InputError, match="no such port"):
        store.ports.get(ours.id)
    kept = store.ports.get(user_port.id)
    assert (kept.owner_id, kept.node, kept.ip_address) == (None, None, None)
    assert kept.created_by is PortOrigin.USER


def test_final_failure_path_user_port_survives_request_deletion(
    store: Store, rack: list[str], wall: FakeClock
) -> None:
    user_port = store.ports.create("prov", created_by=PortOrigin.USER)
    request = store.owners.create(OwnerKind.REQUEST, ttl=30)
    store.ports.create("prov", owner_id=request.id)
    store.ports.attach(user_port.id, request.id)
    wall.advance(31)  # the client died: reclaim must clean like a final failure
    [done] = store.lifecycle.reclaim_expired()
    assert len(done.ports_deleted) == 1
    assert done.ports_detached == [user_port.id]
    assert [p.id for p in store.ports.find()] == [user_port.id]


def test_a_port_binds_only_to_a_node_its_owner_holds(store: Store, rack: list[str]) -> None:
    request = store.owners.create(OwnerKind.REQUEST)
    port = store.ports.create("prov", owner_id=request.id)
    with pytest.raises(NodeUnavailable, match="its owner holds"):
        store.ports.bind(port.id, "n01")
    stranger = store.owners.create(OwnerKind.ATTEMPT)
    store.owners.claim("n01", stranger.id)
    with pytest.raises(NodeUnavailable, match="its owner holds"):
        store.ports.bind(port.id, "n01")
    attempt = store.owners.create(OwnerKind.ATTEMPT, parent_id=request.id)
    store.owners.claim("n02", attempt.id)
    store.ports.bind(port.id, "n02")
    with pytest.raises(InputError, match="unbind it first"):
        store.ports.bind(port.id, "n01")


def test_ips_come_from_the_nodes_segment_never_twice_never_the_gateway(
    store: Store, enroll: Enroll
) -> None:
    tiny = SegmentSpec(
        "tiny", "10.9.0.0/29", "10.9.0.1", [{"start": "10.9.0.1", "end": "10.9.0.4"}]
    )
    net = NetworkSpec("prov", [tiny])
    enroll(4, segment="tiny", networks=[net])
    request = store.owners.create(OwnerKind.REQUEST)
    ips = []
    for name in ("n01", "n02", "n03"):
        store.owners.claim(name, request.id)
        ips.append(
            store.ports.bind(store.ports.create("prov", owner_id=request.id).id, name).ip_address
        )
    assert ips == ["10.9.0.2", "10.9.0.3", "10.9.0.4"]

    # The fourth has nowhere to go: a typed fault that says "try elsewhere".
    store.owners.claim("n04", request.id)
    port = store.ports.create("prov", owner_id=request.id)
    with pytest.raises(SegmentExhausted) as info:
        store.ports.bind(port.id, "n04")
    assert isinstance(info.value, NodeUnavailable)
    assert info.value.retry is RetryScope.OTHER_NODE
    assert info.value.code == "segment_exhausted"
    assert "tiny" in str(info.value)
    assert store.ports.get(port.id).node is None

    # Unbinding frees an address for the next binding.
    first = store.ports.find(node="n01")[0]
    store.ports.unbind(first.id)
    assert store.ports.bind(port.id, "n04").ip_address == "10.9.0.2"


def test_a_node_on_another_network_or_none_is_unavailable(store: Store, enroll: Enroll) -> None:
    enroll(1, prefix="a", segment="rack1", networks=[network_spec("prov")])
    enroll(
        1,
        prefix="b",
        segment="s2",
        networks=[network_spec("other", {"s2": ("10.5.0.0/24", "10.5.0.9", "10.5.0.9")})],
    )
    enroll(1, prefix="c")
    request = store.owners.create(OwnerKind.REQUEST)
    port = store.ports.create("prov", owner_id=request.id)
    for node, reason in (("b01", "not on the port's network"), ("c01", "no segment")):
        store.owners.claim(node, request.id)
        with pytest.raises(NodeUnavailable) as info:
            store.ports.bind(port.id, node)
        assert info.value.reason == reason


def test_releasing_an_allocation_unbinds_every_port_on_the_node(
    store: Store, rack: list[str]
) -> None:
    request = store.owners.create(OwnerKind.REQUEST)
    ports = [store.ports.create("prov", owner_id=request.id) for _ in range(2)]
    store.owners.claim("n01", request.id)
    for port in ports:
        store.ports.bind(port.id, "n01")
    store.owners.release("n01", request.id)
    assert all(not store.ports.get(p.id).bound for p in ports)
    kinds = [e.kind for e in store.nodes.events("n01")]
    assert kinds.count("port_bound") == 2
    assert kinds.count("port_unbound") == 2


def test_orphaned_ports_are_the_ones_whose_owner_died(
    store: Store, rack: list[str], wall: FakeClock
) -> None:
    live = store.owners.create(OwnerKind.REQUEST, ttl=300)
    dead = store.owners.create(OwnerKind.REQUEST, ttl=10)
    store.ports.create("prov", owner_id=live.id)
    orphan = store.ports.create("prov", owner_id=dead.id)
    store.ports.create("prov", created_by="user")  # unowned user port: not an orphan
    wall.advance(11)
    assert [p.id for p in store.ports.find(orphaned=True)] == [orphan.id]
    assert len(store.ports.find(orphaned=False)) == 2


def test_port_arguments_are_checked(store: Store, rack: list[str], wall: FakeClock) -> None:
    with pytest.raises(InputError, match="needs an owner"):
        store.ports.create("prov")
    request = store.owners.create(OwnerKind.REQUEST, ttl=5)
    with pytest.raises(InputError, match="no such network"):
        store.ports.create("nope", owner_id=request.id)
    other = store.owners.create(OwnerKind.REQUEST)
    port = store.ports.create("prov", owner_id=other.id)
    with pytest.raises(InputError, match="another owner"):
        store.ports.attach(port.id, request.id)
    wall.advance(6)
    with pytest.raises(LeaseLost):
        store.ports.create("prov", owner_id=request.id)
