"""Sync shares: several sync workers on one database split the fleet, never
hold one node twice, and take over a dead worker's nodes once its lease ran
out. Runs on SQLite and (marked pg) on PostgreSQL."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from bmaas.fakes.clock import FakeClock
from bmaas.gate import bmc_of
from bmaas.share import FleetShare, owner_of
from bmaas.store import OwnerKind, Store
from tests.unit.test_sync_steady import Statements

Enroll = Callable[..., list[str]]
TTL = 60.0


@pytest.fixture
def shares(store: Store) -> Iterator[list[FleetShare]]:
    made: list[FleetShare] = []
    yield made
    for share in made:
        share.keeper.close()


def join(store: Store, shares: list[FleetShare], name: str) -> FleetShare:
    share = FleetShare(store, ttl=TTL, name=name)
    shares.append(share)
    return share


def names(share: FleetShare, store: Store) -> set[str]:
    return {r.name for r in share.take(store.nodes.find())}


def test_claims_never_give_one_node_to_two_workers(
    store: Store, enroll: Enroll, wall: FakeClock
) -> None:
    nodes = enroll(6)
    a = store.owners.create(OwnerKind.SYNC, ttl=TTL).id
    b = store.owners.create(OwnerKind.SYNC, ttl=TTL).id
    assert store.shares.claim(a, nodes[:4], ttl=10) == nodes[:4]
    assert store.shares.claim(b, nodes[2:], ttl=10) == nodes[4:]
    assert store.shares.claim(a, nodes[:4], ttl=10) == nodes[:4]  # renewing is fine
    held = store.shares.held()
    assert held == {**dict.fromkeys(nodes[:4], a), **dict.fromkeys(nodes[4:], b)}
    wall.advance(10)  # a's rows ran out: anyone may take them
    assert store.shares.claim(b, nodes[:2], ttl=10) == nodes[:2]
    assert store.shares.release(b, nodes[:1]) == 1
    assert store.shares.claim(a, nodes[:1], ttl=10) == nodes[:1]
    assert store.shares.release(a) == 3  # n01, and n03-n04 whose rows ran out
    assert set(store.shares.held()) == {nodes[1]}  # b's n05-n06 ran out too
    assert sorted(w.id for w in store.shares.workers()) == sorted([a, b])


def test_three_workers_split_the_fleet_and_take_over_a_dead_ones_share(
    store: Store, enroll: Enroll, wall: FakeClock, shares: list[FleetShare]
) -> None:
    everything = set(enroll(60))
    workers = [join(store, shares, n) for n in ("a", "b", "c")]
    taken = [names(w, store) for w in workers]
    assert set().union(*taken) == everything
    assert sum(len(t) for t in taken) == len(everything)  # disjoint
    assert all(taken)  # 60 nodes: each worker has some
    ids = [w.worker_id for w in workers]
    bmcs = {r.name: bmc_of(r.driver, r.name, r.driver_info) for r in store.nodes.find()}
    assert all(
        owner_of(bmcs[n], ids) == workers[i].worker_id for i, t in enumerate(taken) for n in t
    )

    dead = workers.pop()
    dead.keeper.close()  # killed: no renewal, no goodbye
    wall.advance(TTL / 2)
    for w in workers:
        w.keeper.renew_now()
    during = [names(w, store) for w in workers]
    assert not (set().union(*during) & taken[2])  # its rows still held: nobody reads them twice
    wall.advance(TTL / 2)  # one lease period after its last renewal
    for w in workers:
        w.keeper.renew_now()
    after = [names(w, store) for w in workers]
    assert set().union(*after) == everything
    assert sum(len(t) for t in after) == len(everything)
    assert dead.worker_id not in [o.id for o in store.shares.workers()]


def test_a_joining_worker_waits_for_the_holder_to_give_nodes_back(
    store: Store, enroll: Enroll, shares: list[FleetShare]
) -> None:
    everything = set(enroll(40))
    a = join(store, shares, "a")
    assert names(a, store) == everything
    b = join(store, shares, "b")
    assert names(b, store) == set()  # a still holds them all: no double read
    mine = names(a, store)  # a sees b and gives b's share back
    assert mine
    assert mine != everything
    theirs = names(b, store)
    assert theirs == everything - mine
    b.close()  # leaving on purpose: a takes over at once
    shares.remove(b)
    assert names(a, store) == everything


@pytest.mark.parametrize("size", [3, 60])
def test_a_steady_claim_renews_in_one_update_whatever_the_fleets_size(
    store: Store, enroll: Enroll, wall: FakeClock, size: int
) -> None:
    """A worker claiming exactly what it holds (every pass of a steady
    fleet) renews its rows: its rows read, one UPDATE, nothing inserted --
    not a row per node built and run every pass (16 ms of CPU at 200 nodes,
    1 ms renewed). The renewal counts: the rows live a ttl from now."""
    nodes = enroll(size)
    a = store.owners.create(OwnerKind.SYNC, ttl=TTL).id
    b = store.owners.create(OwnerKind.SYNC, ttl=TTL).id
    assert store.shares.claim(a, nodes, ttl=10) == nodes
    counted = Statements(store)
    wall.advance(8)
    assert store.shares.claim(a, nodes, ttl=10) == nodes  # renewed: 10 s from now
    sqlite = store.db.engine.dialect.name == "sqlite"
    begin = {"BEGIN IMMEDIATE": 1} if sqlite else {}
    assert counted.by_pass[0] == Counter(
        {**begin, "SELECT": 1, "UPDATE": 1, "UPDATE sync_shares": 1}
    )
    wall.advance(8)  # 16 s after the first claim: held only through the renewal
    assert store.shares.claim(b, nodes, ttl=10) == []
    assert set(store.shares.held().values()) == {a}


def test_rows_run_out_between_passes_are_renewed_when_nobody_took_them(
    store: Store, enroll: Enroll, wall: FakeClock
) -> None:
    """``bmaas sync --interval 60`` with the default ``--lease-ttl 60``:
    every pass finds its rows run out. Nobody took them, so the claim
    renews them (one SELECT, one UPDATE) as the INSERT would have taken
    them; one another worker took is not renewed: the INSERT decides."""
    nodes = enroll(6)
    a = store.owners.create(OwnerKind.SYNC, ttl=TTL).id
    b = store.owners.create(OwnerKind.SYNC, ttl=TTL).id
    assert store.shares.claim(a, nodes, ttl=TTL) == nodes
    counted = Statements(store)
    wall.advance(TTL)  # the next pass: every row ran out
    assert store.shares.claim(a, nodes, ttl=TTL) == nodes
    sqlite = store.db.engine.dialect.name == "sqlite"
    begin = {"BEGIN IMMEDIATE": 1} if sqlite else {}
    assert counted.by_pass[0] == Counter(
        {**begin, "SELECT": 1, "UPDATE": 1, "UPDATE sync_shares": 1}
    )
    wall.advance(TTL - 1)  # renewed a ttl from the claim: still a's
    assert store.shares.claim(b, nodes[:1], ttl=TTL) == []
    wall.advance(1)
    assert store.shares.claim(b, nodes[:1], ttl=TTL) == nodes[:1]  # ran out: b takes it
    assert store.shares.claim(a, nodes, ttl=TTL) == nodes[1:]  # not renewed over b
    assert store.shares.held() == {nodes[0]: b, **dict.fromkeys(nodes[1:], a)}


def test_a_claim_that_is_not_what_the_worker_holds_goes_through_the_insert(
    store: Store, enroll: Enroll, wall: FakeClock
) -> None:
    """More, fewer or other nodes than held, or a row run out: no renewal
    (the rows a claim must not extend, the nodes it must take)."""
    nodes = enroll(6)
    a = store.owners.create(OwnerKind.SYNC, ttl=TTL).id
    b = store.owners.create(OwnerKind.SYNC, ttl=TTL).id
    assert store.shares.claim(a, nodes[:3], ttl=10) == nodes[:3]
    assert store.shares.claim(a, nodes[:4], ttl=10) == nodes[:4]  # one more: inserted
    assert store.shares.claim(b, nodes[4:], ttl=10) == nodes[4:]
    assert store.shares.claim(a, nodes, ttl=10) == nodes[:4]  # b's are not taken
    wall.advance(10)  # every row ran out
    assert store.shares.claim(b, nodes[:2], ttl=10) == nodes[:2]
    assert store.shares.claim(a, nodes[:4], ttl=10) == nodes[2:4]  # b holds two now
    held = store.shares.held()
    assert held == {**dict.fromkeys(nodes[:2], b), **dict.fromkeys(nodes[2:4], a)}
