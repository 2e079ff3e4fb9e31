"""Ironic's periodic power sync with bmaas's reads: a BMC that is busy now
and then is never fenced, and a latched power fault does not block the
power-on that clears it."""

from __future__ import annotations

import re
import time
from typing import Any

from bmaas import faulttext
from bmaas.hwlab.harness import ironic as harness
from tests.ironic.conftest import SETTINGS

#: sync passes to watch (the issue's bar is at least 10)
PASSES = 10


def test_busy_now_and_then_is_not_a_sync_failure(
    ironic_node: Any, ironic_lab: Any, baremetal: Any
) -> None:
    nodes = [ironic_node(driver) for driver in ("bmaas-ipmi", "bmaas-redfish")]
    for _, lab_name in nodes:
        ironic_lab.add_faults(
            lab_name, [{"effect": "busy", "operation": "power.get", "probability": 0.5}]
        )
    before = ironic_lab.status()["events"]
    # each pass reads every node; sync_max_retries consecutive failures would fence
    time.sleep(SETTINGS.sync_interval * (PASSES + 1))
    assert ironic_lab.status()["events"] - before >= PASSES  # the BMCs did answer busy
    for node, _ in nodes:
        fresh = baremetal.baremetal.get_node(node.id)
        assert not fresh.is_maintenance, f"{fresh.name}: {fresh.maintenance_reason}"
        assert fresh.fault is None


def test_latched_power_fault_is_reported_and_cleared_by_power_on(
    ironic_node: Any, ironic_lab: Any, baremetal: Any
) -> None:
    node, lab_name = ironic_node("bmaas-ipmi")
    baremetal.baremetal.set_node_power_state(node, "power on", wait=True, timeout=60)
    # the machine turns off on its own and the BMC latches a main power fault
    ironic_lab.add_faults(
        lab_name, [{"effect": "power_lost", "operation": "power.get", "times": 1}]
    )
    end = time.monotonic() + SETTINGS.sync_interval * 6
    reported = None
    while time.monotonic() < end and reported is None:
        for event in harness.history(baremetal, node):
            parsed = faulttext.parse(str(event.get("event")))
            if parsed is not None and parsed.code == "power_failure":
                reported = event
        time.sleep(0.5)
    assert reported is not None, "the latched fault never reached node history"
    assert "read anyway" in str(reported["event"])
    # the read returned "power off", so Ironic could act: power on clears the latch
    baremetal.baremetal.set_node_power_state(node, "power on", wait=True, timeout=60)
    fresh = baremetal.baremetal.get_node(node.id)
    assert fresh.power_state == "power on"
    assert not fresh.is_maintenance


def test_a_hung_bmc_is_fenced_without_holding_the_sync_for_its_timeout(
    ironic_node: Any, ironic_lab: Any, baremetal: Any
) -> None:
    """Issue 26: a hung BMC used to hold one of the sync's workers for the
    whole call deadline every cycle until Ironic fenced it. Once bmaas's own
    background probe has confirmed the silence, the sync's reads of it fail
    at once (the read's text says so and took well under the call deadline),
    and Ironic still fences the node as before (its counting is unchanged)."""
    node, lab_name = ironic_node("bmaas-ipmi")
    ironic_lab.add_faults(lab_name, [{"effect": "hang"}])  # every request, logins too
    end = time.monotonic() + SETTINGS.sync_interval * 10 + SETTINGS.bmaas_sync_deadline * 4
    fresh = baremetal.baremetal.get_node(node.id)
    while time.monotonic() < end and not fresh.is_maintenance:
        time.sleep(0.5)
        fresh = baremetal.baremetal.get_node(node.id)
    assert fresh.is_maintenance, "Ironic never fenced the hung BMC's node"
    assert fresh.fault == "power failure"
    reason = str(fresh.maintenance_reason)
    parsed = faulttext.parse(reason)
    assert parsed is not None, reason
    assert parsed.code in ("bmc_timeout", "bmc_unreachable"), reason
    # the read that tipped it over did not ask the BMC: the background probe had
    assert "not asked again by this read" in reason, reason
    took = re.search(r"power state read gave up after (\d+\.\d+)s", reason)
    assert took is not None, reason
    assert float(took[1]) < SETTINGS.bmaas_call_deadline / 4, reason


def test_a_newly_hung_bmcs_first_sync_read_waits_only_its_silence_bound(
    ironic: Any, ironic_node: Any, ironic_lab: Any, baremetal: Any
) -> None:
    """Issue 35: the first pass after BMCs hang was held by each hung read
    for the whole call deadline (and its session's logout for as long
    again). A BMC whose answers the conductor knows is now waited for at
    most its silence bound: the first read after the hang is cut there, says
    so, is counted, and Ironic fences the node as before."""
    node, lab_name = ironic_node("bmaas-ipmi")
    mark = ironic.log_path.stat().st_size if ironic.log_path.exists() else 0
    # a few passes read it, so its answer times are known (two are enough)
    time.sleep(SETTINGS.sync_interval * 5)
    ironic_lab.add_faults(lab_name, [{"effect": "hang"}])
    end = time.monotonic() + SETTINGS.sync_interval * 10 + SETTINGS.bmaas_sync_deadline * 4
    fresh = baremetal.baremetal.get_node(node.id)
    while time.monotonic() < end and not fresh.is_maintenance:
        time.sleep(0.5)
        fresh = baremetal.baremetal.get_node(node.id)
    assert fresh.is_maintenance, "Ironic never fenced the hung BMC's node"
    assert fresh.fault == "power failure"
    with open(ironic.log_path, encoding="utf-8", errors="replace") as log:
        log.seek(mark)
        cut = [
            line
            for line in log
            if str(fresh.name) in line and "no answer within this BMC's silence bound" in line
        ]
    assert cut, "no sync read of the hung BMC was cut at its silence bound"
    parsed = faulttext.parse(cut[0].split("bmaas: ", 1)[-1])
    assert parsed is not None, cut[0]
    assert parsed.code == "bmc_timeout", cut[0]
    bound = re.search(r"silence bound of (\d+\.\d+)s", cut[0])
    assert bound is not None, cut[0]
    assert float(bound[1]) < SETTINGS.bmaas_call_deadline, cut[0]
