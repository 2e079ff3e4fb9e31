"""A deploy batch on a mixed lab of vendor profiles: every request lands,
and no node is fenced for a transient incident.

Each group of nodes names its BMC's vendor profile in the lab file
(``profile: idrac10``), so the lab holds iDRAC9s, iDRAC10s, iLO 5s,
Supermicros and OpenBMCs side by side, each replaying its documented
incidents (conflict and POST windows, Lifecycle Controller busy, "already
on", IPMI busy codes, session slots, a firmware-update reboot) in lab time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bmaas import inventory
from bmaas.deadline import Deadline
from bmaas.driver import PowerAction, PowerState
from bmaas.failover import FailoverDriver, FailoverRecord, build_failover
from bmaas.faults import ProvisionFailed
from bmaas.hwlab.events import read_events
from bmaas.hwlab.harness.demo import leaks
from bmaas.hwlab.lab import Lab
from bmaas.provision import Provisioned, Request
from bmaas.registry import build_driver
from bmaas.retry import RetryingDriver, RetryLimits
from bmaas.store import Store
from tests.lab.test_provision_lab import QUICK, _provisioner

pytestmark = pytest.mark.lab

LAB_FILE = """\
seed: 11
defaults: {protocols: [redfish], network_segment: lab}
nodes:
  - {name: "idrac9-{n}", count: 2, profile: idrac9}
  - {name: "idrac10-{n}", count: 2, profile: idrac10}
  - {name: "ilo5-rf-{n}", count: 1, profile: ilo5}
  - {name: "ilo5-ipmi-{n}", count: 1, profile: ilo5, protocols: [ipmi]}
  - {name: "smc-{n}", count: 2, profile: supermicro, protocols: [ipmi]}
  - {name: "obmc-rf-{n}", count: 1, profile: openbmc}
  - {name: "obmc-ipmi-{n}", count: 1, profile: openbmc, protocols: [ipmi]}
"""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(str(tmp_path / "bmaas.db"), create=True)
    yield s
    s.close()


def test_mixed_vendor_batch_all_active_none_fenced(
    hwlab_lab: Callable[..., Lab], store: Store, tmp_path: Path
) -> None:
    lab_file = tmp_path / "vendors.yaml"
    lab_file.write_text(LAB_FILE)
    lab = hwlab_lab(lab_file=str(lab_file), hardware=QUICK)
    rules = {name: node["rules"] for name, node in lab.status()["nodes"].items()}
    assert all(rules.values()), rules  # every node replays its vendor's incidents
    inventory.enroll(store, inventory.load(lab.inventory_path))
    with _provisioner(store) as p:
        results = p.provision_many([Request(f"r{i}", network="lab") for i in range(6)], workers=3)
        failed = [r for r in results if isinstance(r, ProvisionFailed)]
        assert failed == []
        done = [r for r in results if isinstance(r, Provisioned)]
        assert len({r.node for r in done}) == 6
        for r in results:
            assert all(a.fault_class != "UnclassifiedFault" for a in r.attempts), r
        assert leaks(store) == (0, 0)
    fenced = [n.name for n in store.nodes.find() if n.fault]
    assert fenced == []
    # Which nodes the batch picked is the scheduler's business; iDRAC10's
    # power-on conflict after a power-off is met on purpose: a power cycle
    # through the operation retry ends ON, the conflict retried on the same
    # node within the budget, never a fault the node carries.
    record = store.nodes.get("idrac10-1")
    driver = build_driver(record.name, record.driver, record.driver_info, bmc_timeout=5.0)
    try:
        retrying = RetryingDriver(driver, RetryLimits(total=30.0))
        budget = Deadline.after(60.0)
        retrying.set_power_state(PowerAction.OFF, wait=True, timeout=20.0, deadline=budget)
        retrying.set_power_state(PowerAction.ON, wait=True, timeout=20.0, deadline=budget)
        assert retrying.get_power_state(deadline=budget) is PowerState.ON
    finally:
        driver.close()
    fired = {e["params"].get("incident") or e["rule"] for e in read_events(str(lab.events_path))}
    assert "idrac10-power-on-conflict" in fired, fired


def test_a_licence_gated_redfish_power_on_is_cured_over_ipmi(
    hwlab_lab: Callable[..., Lab],
) -> None:
    """bmclib's fallthrough: Supermicro's DCMS licence answer on Redfish, and
    the same BMC's IPMI powers the node on, within the one deadline."""
    lab = hwlab_lab(nodes=1, protocols="both", hardware=QUICK)
    entry = lab.inventory()["nodes"][0]
    licence = {
        "effect": "incident",
        "incident": "supermicro-licence",
        "operation": "power.set",
        "protocol": "redfish",
    }
    lab.add_faults(entry["name"], [licence])
    seen: list[FailoverRecord] = []
    driver = build_failover(
        entry["name"],
        "redfish",
        entry["driver_info"],
        build=build_driver,
        on_failover=seen.append,
        bmc_timeout=2.0,
    )
    assert isinstance(driver, FailoverDriver)
    try:
        deadline = Deadline.after(10.0)
        state = driver.set_power_state(PowerAction.ON, wait=True, timeout=5, deadline=deadline)
    finally:
        driver.close()
    assert state is PowerState.ON
    assert [(r.first, r.other, r.fault_code, r.outcome) for r in seen] == [
        ("redfish", "ipmi", "unsupported_operation", "ok")
    ]
