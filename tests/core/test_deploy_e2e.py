"""``bmaas deploy``, ``instance list``, ``move``, ``maintenance set --evacuate``
and ``undeploy`` end to end, on every backend in ``tests/core/backends.py``."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from click.testing import Result

from bmaas.store import OwnerKind, Store
from tests.core.backends import CoreFleet
from tests.core.conftest import Run

Bmaas = Callable[..., Result]
#: quick limits: the backends' machines power on in well under a second
QUICK = ("--settle", "0.3", "--power-timeout", "5", "--bmc-timeout", "1")


@pytest.fixture
def enrolled(bmaas: Bmaas, fleet: CoreFleet) -> list[str]:
    bmaas("enroll", str(fleet.inventory))
    return fleet.names


def _instances(bmaas: Bmaas) -> dict[str, str]:
    listed = json.loads(bmaas("instance", "list", "--json").stdout)
    return {row["instance"]: row["node"] for row in listed}


def test_deploy_list_move_evacuate_undeploy(
    bmaas: Bmaas, fleet: CoreFleet, enrolled: list[str], db: str, runs: Run
) -> None:
    deployed = bmaas("deploy", "-n", "2", "--name-prefix", "web", *QUICK, "--json")
    report = json.loads(deployed.stdout)
    assert (report["ok"], report["failed"]) == (2, 0)
    assert {r["request"] for r in report["requests"]} == {"web-001", "web-002"}
    placed = _instances(bmaas)
    assert set(placed) == {"web-001", "web-002"}
    assert len(set(placed.values())) == 2

    moved = bmaas("move", "web-001", *QUICK)
    assert moved.stdout.startswith(f"web-001: moved {placed['web-001']} -> ")
    after_move = _instances(bmaas)
    assert after_move["web-001"] not in placed.values()

    node = after_move["web-002"]
    evacuated = bmaas("maintenance", "set", node, "--reason", "PSU swap", "--evacuate", *QUICK)
    assert f"{node}: instance web-002 moved to " in evacuated.stdout
    assert f"{node}: ready: maintenance by" in evacuated.stdout
    assert node not in _instances(bmaas).values()

    table = bmaas("undeploy", "--all", *QUICK)
    assert table.stdout.count("  ok    released ") == 2
    assert _instances(bmaas) == {}
    store = Store.open(db)
    try:
        assert store.owners.allocations() == []
        assert store.owners.find() == []
    finally:
        store.close()
    for secret in fleet.secrets:
        assert secret not in runs.output


def test_a_request_that_finds_no_working_node_fails_with_its_attempts(
    bmaas: Bmaas, fleet: CoreFleet, enrolled: list[str], db: str
) -> None:
    for name in fleet.names:
        fleet.add_rule(name, {"effect": "auth_fail"})
    failed = bmaas("deploy", "-n", "1", "--max-attempts", "2", *QUICK, "--json", expect=1)
    (row,) = json.loads(failed.stdout)["requests"]
    assert row["ok"] is False
    assert row["faults"] == ["bmc_auth_error", "bmc_auth_error"]
    assert [a["fault_class"] for a in row["attempt_details"]] == ["BMCAuthError"] * 2
    table = bmaas("deploy", "-n", "1", "--max-attempts", "1", *QUICK, expect=1)
    assert "FAILED" in table.stdout
    assert "bmc_auth_error" in table.stdout
    store = Store.open(db)
    try:
        assert store.owners.allocations() == []
        assert store.owners.find(kind=OwnerKind.REQUEST) == []
    finally:
        store.close()


def test_bad_deploy_arguments_are_one_line(bmaas: Bmaas, enrolled: list[str]) -> None:
    bad = bmaas("deploy", "--property", "cpus", expect=2)
    assert bad.stderr.startswith("error: --property: expected key=value")
    missing = bmaas("move", "nope", expect=2)
    assert "no instance 'nope'" in missing.stderr
    assert bmaas("undeploy", expect=2).stderr.startswith("error: INSTANCE")


def test_a_move_that_finds_no_target_says_why_for_each_candidate(
    bmaas: Bmaas, fleet: CoreFleet, enrolled: list[str]
) -> None:
    bmaas("deploy", "-n", "1", "--name-prefix", "db", *QUICK)
    source = _instances(bmaas)["db-001"]
    target = next(n for n in fleet.names if n != source)
    bmaas("maintenance", "set", target, "--reason", "fan noise", "--by", "carol")
    failed = bmaas("move", "db-001", "--to", target, *QUICK, expect=1)
    assert failed.stdout.startswith("db-001: not moved: candidates exhausted")
    assert f"  {target}: refused (node {target} unavailable (in maintenance" in failed.stdout
    assert "in maintenance (carol: fan noise)" in failed.stdout
    assert "found no working target" not in failed.stdout
    assert _instances(bmaas) == {"db-001": source}  # the instance kept its node
    network = bmaas("deploy", "-n", "4", "--network", "provisioning", expect=2)
    (line,) = network.stderr.splitlines()
    assert line.startswith("error: --network: no network 'provisioning' (enrolled: ")
    assert network.stdout == ""
