"""The maintenance, allocations and TLS checks, on store state alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from bmaas.fakes.clock import FakeClock
from bmaas.hwlab.tls import make_certificate
from bmaas.inventory import NodeSpec
from bmaas.status import Result
from bmaas.store import POWER_FAILURE, OwnerKind, Store
from tests.fleet import install_stub_drivers
from tests.unit.conftest import network_spec
from tests.unit.status.conftest import MakeContext, run

Enroll = Callable[..., list[str]]


# -- maintenance -----------------------------------------------------------------------


def test_no_maintenance_is_success(make_ctx: MakeContext, enroll: Enroll) -> None:
    enroll(3)
    maintenance = run(make_ctx(), "maintenance")["maintenance"]
    assert (maintenance.result, maintenance.details) == (
        Result.SUCCESS,
        ("none of 3 node(s) in maintenance or faulted",),
    )


def test_a_persons_maintenance_and_a_system_fault_are_told_apart(
    make_ctx: MakeContext, enroll: Enroll, store: Store
) -> None:
    enroll(5)
    store.nodes.set_maintenance("n01", reason="replacing PSU", by="alice")
    store.nodes.set_maintenance("n02", reason="replacing PSU", by="alice")
    store.nodes.set_maintenance("n03", reason="firmware", by="bob")
    store.health.set_fault("n04", POWER_FAILURE, reason="3 power reads failed")
    maintenance = run(make_ctx(), "maintenance")["maintenance"]
    assert maintenance.result is Result.WARNING
    assert maintenance.nodes == {"faulted": ["n04"], "maintenance": ["n01", "n02", "n03"]}
    assert maintenance.details == (
        "1 faulted by bmaas, 3 in maintenance by people, of 5 node(s)",
        "1 node(s) faulted by bmaas, 'power failure': n04 (last error: 3 power reads failed)",
        "2 node(s) in maintenance by alice, 'replacing PSU': n01, n02",
        "1 node(s) in maintenance by bob, 'firmware': n03",
    )


def test_a_fault_on_a_node_a_person_already_holds_counts_in_both(
    make_ctx: MakeContext, enroll: Enroll, store: Store
) -> None:
    enroll(1)
    store.nodes.set_maintenance("n01", reason="DIMM", by="carol")
    store.health.set_fault("n01", POWER_FAILURE, reason="power fault latched")
    maintenance = run(make_ctx(), "maintenance")["maintenance"]
    assert maintenance.nodes == {"faulted": ["n01"], "maintenance": ["n01"]}


def test_a_node_a_failed_attempt_left_media_on_warns_as_needing_cleaning(
    make_ctx: MakeContext, enroll: Enroll, store: Store
) -> None:
    """Issue 49: a node not offered because a failed attempt left the deploy
    ISO and a boot override on it (the BMC did not answer the undo) is named,
    with what it holds, until the sync or the next command cleans it."""
    enroll(3)
    store.health.set_leftovers(
        "n02",
        {"media": "http://user:pw@images/deploy.iso", "boot override": "cdrom"},
        reason="BMC did not answer the eject",
    )
    maintenance = run(make_ctx(), "maintenance")["maintenance"]
    assert maintenance.result is Result.WARNING
    assert maintenance.nodes == {"needs_cleaning": ["n02"]}
    assert maintenance.details == (
        "0 faulted by bmaas, 0 in maintenance by people, 1 needing cleaning, of 3 node(s)",
        "1 node(s) need cleaning, not offered until the sync or the next command undoes "
        "what a failed attempt left: n02 (media http://user:***@images/deploy.iso, "
        "boot override cdrom)",
    )
    assert "pw" not in " ".join(maintenance.details)
    store.health.clear_leftovers("n02", done="ejected")
    assert run(make_ctx(), "maintenance")["maintenance"].result is Result.SUCCESS


# -- allocations -----------------------------------------------------------------------


def test_live_allocations_are_success(make_ctx: MakeContext, enroll: Enroll, store: Store) -> None:
    enroll(2)
    owner = store.owners.create(OwnerKind.ATTEMPT, ttl=60)
    store.owners.claim("n01", owner.id)
    allocations = run(make_ctx(), "allocations")["allocations"]
    assert allocations.result is Result.SUCCESS
    assert allocations.details[0].startswith("1 allocation(s), every owner alive")


def test_an_orphaned_allocation_warns_until_a_sync_reclaims_it(
    make_ctx: MakeContext, enroll: Enroll, store: Store, wall: FakeClock
) -> None:
    enroll(2, segment="rack1", networks=[network_spec()])
    request = store.owners.create(OwnerKind.REQUEST, name="r-1", ttl=60)
    attempt = store.owners.create(OwnerKind.ATTEMPT, name="r-1/1", parent_id=request.id, ttl=60)
    port = store.ports.create("prov", owner_id=request.id)
    store.owners.claim("n01", attempt.id)
    store.ports.bind(port.id, "n01")
    wall.advance(600)  # the process holding them died ten minutes ago
    allocations = run(make_ctx(), "allocations")["allocations"]
    assert allocations.result is Result.WARNING
    assert allocations.nodes["orphaned"] == ["n01"]
    assert "lease expired 9m ago" in allocations.details[0]
    assert "`bmaas sync`" in allocations.details[0]
    assert any(f"{port.id[:8]}" in line for line in allocations.details)

    store.lifecycle.reclaim_expired()  # what the next `bmaas sync` pass does
    after = run(make_ctx(), "allocations")["allocations"]
    assert after.result is Result.SUCCESS


def test_an_allocation_on_a_node_in_maintenance_warns(
    make_ctx: MakeContext, enroll: Enroll, store: Store
) -> None:
    enroll(2)
    instance = store.owners.create(OwnerKind.INSTANCE, name="web-1")
    store.owners.claim("n02", instance.id)
    store.nodes.set_maintenance("n02", reason="fan noise", by="dave")
    allocations = run(make_ctx(), "allocations")["allocations"]
    assert allocations.result is Result.WARNING
    assert allocations.nodes == {"allocated_in_maintenance": ["n02"]}
    assert "n02 (instance web-1)" in allocations.details[0]


def test_ports_without_an_owner_warn(
    make_ctx: MakeContext, enroll: Enroll, store: Store, db_url: str
) -> None:
    enroll(1, segment="rack1", networks=[network_spec()])
    instance = store.owners.create(OwnerKind.INSTANCE, name="db-1")
    mine = store.ports.create("prov", owner_id=instance.id)
    user = store.ports.create("prov", owner_id=instance.id, created_by="user")
    store.owners.claim("n01", instance.id)
    store.ports.bind(user.id, "n01")
    # Neither can happen through the store's API; a hand-edited or damaged
    # database can have both, and nothing would ever reclaim them.
    with store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE ports SET owner_id = NULL"))
    allocations = run(make_ctx(), "allocations")["allocations"]
    assert allocations.result is Result.WARNING
    assert set(allocations.nodes) == {"ownerless_ports", "unowned_bound_ports"}
    assert allocations.nodes["unowned_bound_ports"] == ["n01"]
    text = "\n".join(allocations.details)
    assert mine.id[:8] in text
    assert f"{user.id[:8]} on n01 (10.1.0.10)" in text


# -- TLS ---------------------------------------------------------------------------------


def redfish(name: str, **info: Any) -> NodeSpec:
    return NodeSpec(
        name,
        "redfish",
        {
            "redfish_address": "https://10.0.0.1",
            "redfish_username": "admin",
            "redfish_password": "${RF_PW}",
            **info,
        },
    )


@pytest.fixture
def stubs(monkeypatch: pytest.MonkeyPatch) -> None:
    install_stub_drivers(monkeypatch)


def test_no_redfish_nodes(make_ctx: MakeContext, enroll: Enroll) -> None:
    enroll(2)
    tls = run(make_ctx(), "tls")["tls"]
    assert (tls.result, tls.details) == (Result.SUCCESS, ("no Redfish nodes",))


@pytest.mark.usefixtures("stubs")
def test_verification_on_or_a_ca_bundle_is_success(
    make_ctx: MakeContext, store: Store, tmp_path: Path
) -> None:
    # a bundle that holds a certificate (one that does not is refused: issue 44)
    bundle = make_certificate(tmp_path / "tls", ["127.0.0.1"]).ca_path
    store.nodes.enroll([redfish("r1"), redfish("r2", redfish_verify_ca=str(bundle))])
    tls = run(make_ctx(), "tls")["tls"]
    assert (tls.result, tls.details) == (Result.SUCCESS, ("2 Redfish node(s), all verifying TLS",))


@pytest.mark.usefixtures("stubs")
def test_verification_off_and_plain_http_warn(make_ctx: MakeContext, store: Store) -> None:
    store.nodes.enroll(
        [
            redfish("r1", redfish_verify_ca=False),
            redfish("r2", redfish_verify_ca="no"),
            redfish("r3", redfish_address="http://10.0.0.3"),
            redfish("r4"),
        ]
    )
    tls = run(make_ctx(), "tls")["tls"]
    assert tls.result is Result.WARNING
    assert tls.nodes == {"verify_off": ["r1", "r2"], "plain_http": ["r3"]}
    assert "redfish_verify_ca: false" in tls.details[0]


@pytest.mark.usefixtures("stubs")
def test_plain_http_on_loopback_is_a_note_not_a_warning(
    make_ctx: MakeContext, store: Store
) -> None:
    store.nodes.enroll(
        [
            redfish("r1", redfish_address="http://127.0.0.1:8000"),
            redfish("r2", redfish_address="http://[::1]:8001"),
            redfish("r3", redfish_address="http://localhost:8002"),
        ]
    )
    tls = run(make_ctx(), "tls")["tls"]
    assert tls.result is Result.SUCCESS
    assert tls.nodes == {"plain_http_loopback": ["r1", "r2", "r3"]}
    assert "loopback" in tls.details[0]


@pytest.mark.usefixtures("stubs")
def test_a_missing_ca_bundle_fails(make_ctx: MakeContext, store: Store, tmp_path: Path) -> None:
    gone = tmp_path / "gone.pem"
    store.nodes.enroll([redfish("r1", redfish_verify_ca=str(gone))])
    tls = run(make_ctx(), "tls")["tls"]
    assert tls.result is Result.FAILURE
    assert tls.nodes == {"missing_ca": ["r1"]}
    assert str(gone) in tls.details[0]


@pytest.mark.usefixtures("stubs")
def test_ipmi_nodes_with_redfish_keys_are_not_redfish_nodes(
    make_ctx: MakeContext, store: Store
) -> None:
    info = {"ipmi_address": "10.0.0.9", "ipmi_username": "a", "ipmi_password": "${X}"}
    store.nodes.enroll([NodeSpec("i1", "ipmi", {**info, "redfish_verify_ca": False})])
    assert run(make_ctx(), "tls")["tls"].details == ("no Redfish nodes",)
