"""Protocol failover (bmaas.failover) over two FakeDrivers of one machine:
only the faults the policy's "other protocol" column names fall through,
within the one deadline, recorded; no real sleeps, no sockets."""

from __future__ import annotations

from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver, BootDevice, PowerAction, PowerState
from bmaas.failover import FailoverDriver, FailoverRecord, build_failover, protocols_in
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.fleet import FakeFleet
from bmaas.fakes.machine import Hardware
from bmaas.faults import (
    BMCAuthError,
    BMCBusy,
    BMCTimeout,
    BMCUnreachable,
    SlotTimeout,
    UnsupportedOperation,
)
from bmaas.policy import OTHER_PROTOCOL_MAY_CURE, POLICY, policy_for
from tests.budgets import ask

HW = Hardware(power_on_time=1, power_off_time=1)


def _pair(*rules: dict[str, Any]) -> tuple[FailoverDriver, FakeFleet, list[FailoverRecord]]:
    """Two drivers of one machine; each rule fires once, so it meets the first only."""
    fleet = FakeFleet(clock=FakeClock(), seed=1)
    fleet.add("n1", hardware=HW, rules=[{**r, "times": 1} for r in rules])
    seen: list[FailoverRecord] = []
    first, other = (
        FakeDriver("n1", fleet=fleet, bmc_timeout=5.0),
        FakeDriver("n1", fleet=fleet, bmc_timeout=5.0),
    )
    return FailoverDriver(first, other, on_failover=seen.append), fleet, seen


def test_the_column_names_only_faults_where_nothing_happened() -> None:
    assert {r.fault for r in POLICY if r.other_protocol_may_cure} == OTHER_PROTOCOL_MAY_CURE
    assert policy_for(UnsupportedOperation).other_protocol_may_cure
    assert policy_for(BMCUnreachable).other_protocol_may_cure
    for cls in (BMCBusy, BMCAuthError, BMCTimeout):
        assert not policy_for(cls).other_protocol_may_cure


@pytest.mark.parametrize(
    "rule",
    [
        {"effect": "incident", "incident": "supermicro-licence", "operation": "power.set"},
        {"effect": "unsupported", "operation": "power.set"},
    ],
)
def test_unsupported_or_licence_gated_falls_through_and_is_recorded(rule: dict[str, Any]) -> None:
    driver, fleet, seen = _pair(rule)
    deadline = Deadline.after(10.0, clock=fleet.clock.monotonic)
    driver.request_power(PowerAction.ON, deadline=deadline)
    fleet.clock.advance(2)
    assert driver.get_power_state(deadline=deadline) is PowerState.ON
    assert seen == [
        FailoverRecord("n1", "power.set", "fake", "fake", "unsupported_operation", "ok")
    ]
    assert driver.history == seen


def test_busy_is_not_cured_elsewhere() -> None:
    driver, _, seen = _pair({"effect": "busy", "operation": "power.get"})
    with pytest.raises(BMCBusy):
        ask(driver.get_power_state)
    assert seen == []


def test_a_timeout_never_resends_elsewhere() -> None:
    """It may have acted: a reset sent over the other protocol would be a second reset."""
    driver, _, seen = _pair({"effect": "hang", "operation": "power.set"})
    with pytest.raises(BMCTimeout):
        ask(driver.request_power, PowerAction.REBOOT)
    assert seen == []


def test_when_the_other_fails_too_its_fault_names_the_first() -> None:
    fleet = FakeFleet(clock=FakeClock(), seed=1)
    fleet.add("n1", hardware=HW, rules=[{"effect": "unsupported", "operation": "boot.set"}])
    driver = FailoverDriver(FakeDriver("n1", fleet=fleet), FakeDriver("n1", fleet=fleet))
    with pytest.raises(UnsupportedOperation) as info:
        ask(driver.set_boot_device, BootDevice.PXE)
    assert any("after failing over from fake" in note for note in info.value.__notes__)
    assert [r.outcome for r in driver.history] == ["unsupported_operation"]


def test_no_time_left_no_failover() -> None:
    driver, fleet, seen = _pair({"effect": "unsupported", "operation": "power.get"})
    spent = Deadline.after(0.0, clock=fleet.clock.monotonic)
    with pytest.raises((UnsupportedOperation, SlotTimeout)):  # nothing sent: bmaas's budget
        driver.get_power_state(deadline=spent)
    assert seen == []


def test_vmedia_stays_on_the_first_protocol() -> None:
    driver, _, seen = _pair({"effect": "incident", "incident": "idrac-licence"})
    with pytest.raises(UnsupportedOperation):
        ask(driver.insert_virtual_media, "http://x/y.iso")
    assert seen == []


def test_build_failover_only_when_both_protocols_are_configured() -> None:
    built: list[str] = []

    def build(node: str, driver: str, info: Any, **kw: Any) -> BMCDriver:
        built.append(driver)
        fleet = FakeFleet(clock=FakeClock())
        fleet.add(node, hardware=HW)
        return FakeDriver(node, fleet=fleet)

    both = {"ipmi_address": "10.0.0.1", "redfish_address": "https://10.0.0.2"}
    assert protocols_in(both) == ["ipmi", "redfish"]
    assert isinstance(build_failover("n", "redfish", both, build=build), FailoverDriver)
    assert built == ["redfish", "ipmi"]
    one = {"redfish_address": "https://10.0.0.2"}
    assert not isinstance(build_failover("n", "redfish", one, build=build), FailoverDriver)


def test_failovers_are_counted_in_the_sync_metrics() -> None:
    from bmaas.metrics import SyncMetrics

    metrics = SyncMetrics()
    metrics.observe_failover(
        FailoverRecord("n1", "power.set", "redfish", "ipmi", "unsupported_operation", "ok")
    )
    text = metrics.render().decode()
    assert (
        'bmaas_protocol_failovers_total{code="unsupported_operation",first="redfish",'
        'other="ipmi",outcome="ok"} 1.0'
    ) in text
