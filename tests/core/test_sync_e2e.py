"""``bmaas sync`` drives a node whose BMC stops answering into "power failure"
maintenance after three faulted passes, and back out after two good ones;
a person's maintenance is never cleared. Runs on every backend."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import Result

from bmaas.faults import NodeUnavailable
from bmaas.store import POWER_FAILURE, SYSTEM, OwnerKind, Store
from tests.core.backends import CoreFleet

Bmaas = Callable[..., Result]


def node(bmaas: Bmaas, name: str) -> dict[str, Any]:
    return json.loads(bmaas("node", "show", name, "--json").stdout)


def test_sync_into_power_failure_and_back_out_with_hysteresis(
    bmaas: Bmaas, fleet: CoreFleet, db: str
) -> None:
    bmaas("enroll", str(fleet.inventory))
    flaky, person = fleet.names[0], fleet.names[1]
    # --no-retry: each pass is one raw read per node, so three hangs are three
    # faulted passes (the operation retry would absorb them in fewer). At
    # least 2 s a read: a hang is counted only if the client was not itself
    # waiting for a CPU for a quarter of the bound (bmaas.lateness), which a
    # 0.5 s bound on a busy runner was (the person's count fell one short:
    # failed once in CI at load 6). The BMCs hang until the test clears them
    # (an IPMI client retransmits within a longer bound: a rule counted in
    # requests would be spent in fewer passes).
    sync = ("sync", "--bmc-timeout", str(max(fleet.deadline, 2.0)), "--no-retry")
    bmaas(*sync)  # all readable
    bmaas("maintenance", "set", person, "--reason", "firmware", "--by", "carol")
    for name in (flaky, person):
        fleet.add_rule(name, {"effect": "hang", "operation": "power.get"})

    for round_ in (1, 2):
        result = bmaas(*sync, expect=1)
        assert "BMCTimeout" in result.stdout
        state = node(bmaas, flaky)
        assert (state["fault"], state["maintenance"], state["fault_count"]) == (None, False, round_)
        assert state["power_state"] == "unknown"  # a failed read is never "off"

    result = bmaas(*sync, expect=1)
    assert f"into fault: {flaky}, {person}" in result.stderr
    state = node(bmaas, flaky)
    assert (state["fault"], state["maintenance"], state["maintenance_by"]) == (
        POWER_FAILURE,
        True,
        SYSTEM,
    )
    store = Store.open(db)
    try:
        with pytest.raises(NodeUnavailable, match="faulted: power failure"):
            store.owners.claim(flaky, store.owners.create(OwnerKind.ATTEMPT).id)
    finally:
        store.close()

    for name in (flaky, person):
        fleet.clear_rules(name)
    # The BMCs answer again. One good pass is not enough.
    # These passes wait a healthy BMC's time: their first read logs in afresh
    # (the hung sessions were dropped), more round trips than 0.5 s holds for
    # an in-process BMC at load 12.
    answered = ("sync", "--bmc-timeout", "5", "--no-retry")
    bmaas(*answered)
    assert node(bmaas, flaky)["fault"] == POWER_FAILURE
    result = bmaas(*answered)
    assert f"recovered: {flaky}, {person}" in result.stderr
    healed = node(bmaas, flaky)
    assert (healed["fault"], healed["maintenance"]) == (None, False)
    assert healed["power_state"] in ("on", "off")
    kept = node(bmaas, person)  # the person's maintenance outlives the fault
    assert (kept["fault"], kept["maintenance"], kept["maintenance_by"]) == (None, True, "carol")
    kinds = [e["kind"] for e in healed["events"]]
    assert kinds.count("fault_set") == 1
    assert kinds.count("fault_cleared") == 1


def test_an_interval_sync_runs_its_passes_and_reports_each(bmaas: Bmaas, fleet: CoreFleet) -> None:
    bmaas("enroll", str(fleet.inventory))
    result = bmaas("sync", "--interval", "30", "--count", "1")
    assert result.stdout.startswith(f"pass 1: {len(fleet.names)} nodes read, 0 failed")
    bmaas("sync", "--count", "2", expect=2)  # --count needs --interval
