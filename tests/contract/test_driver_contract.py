"""The driver contract, run on every backend in ``backends.BACKENDS``."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import (
    BMCInfo,
    BootDevice,
    BootSetting,
    Capability,
    FirmwareComponent,
    PowerAction,
    PowerState,
)
from bmaas.fakes.faults import FaultRule
from bmaas.faults import (
    BmaasError,
    BMCTimeout,
    InputError,
    SettingsNotApplied,
    SlotTimeout,
    UnsupportedOperation,
)
from bmaas.policy import policy_for
from tests.budgets import CpuWait, no_budget, per_call
from tests.contract.backends import BACKENDS, Target


@pytest.fixture(params=BACKENDS)
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    with request.param() as t:
        yield t


def test_probe_answers_with_a_known_power_state(target: Target) -> None:
    info = target.driver.probe(deadline=per_call(target.driver))
    assert isinstance(info, BMCInfo)
    assert info.power_state in (PowerState.ON, PowerState.OFF)


def test_power_on_converges_and_is_idempotent(target: Target) -> None:
    d = target.driver
    assert (
        d.set_power_state(
            PowerAction.ON, wait=True, timeout=target.power_timeout, deadline=no_budget(d)
        )
        is PowerState.ON
    )
    boots = target.machine.boots
    assert (
        d.set_power_state(
            PowerAction.ON, wait=True, timeout=target.power_timeout, deadline=no_budget(d)
        )
        is PowerState.ON
    )
    assert target.machine.boots == boots  # powering on a node that is on does nothing
    assert d.get_power_state(deadline=per_call(d)) is PowerState.ON


def test_power_off_converges_and_is_idempotent(target: Target) -> None:
    target.machine.force_power(PowerState.ON)
    d = target.driver
    assert (
        d.set_power_state(
            PowerAction.OFF, wait=True, timeout=target.power_timeout, deadline=no_budget(d)
        )
        is PowerState.OFF
    )
    assert (
        d.set_power_state(
            PowerAction.OFF, wait=True, timeout=target.power_timeout, deadline=no_budget(d)
        )
        is PowerState.OFF
    )
    assert d.get_power_state(deadline=per_call(d)) is PowerState.OFF


def test_power_state_eventually_converges_without_wait(target: Target) -> None:
    d = target.driver
    d.set_power_state(PowerAction.ON, deadline=per_call(d))
    target.wait(target.machine.hardware.power_on_time + 0.1)
    assert d.get_power_state(deadline=per_call(d)) is PowerState.ON


def test_reboot_restarts_the_node(target: Target) -> None:
    target.machine.force_power(PowerState.ON)
    boots = target.machine.boots
    state = target.driver.set_power_state(
        PowerAction.REBOOT,
        wait=True,
        timeout=target.power_timeout,
        deadline=no_budget(target.driver),
    )
    assert state is PowerState.ON
    target.wait(0.5)
    assert target.machine.boots == boots + 1


def test_soft_off_when_supported(target: Target) -> None:
    if not target.driver.supports(Capability.SOFT_POWER):
        pytest.skip("driver declares no soft power")  # a declared absence, not a missing feature
    target.machine.force_power(PowerState.ON)
    state = target.driver.set_power_state(
        PowerAction.SOFT_OFF,
        wait=True,
        timeout=target.power_timeout,
        deadline=no_budget(target.driver),
    )
    assert state is PowerState.OFF


@pytest.mark.parametrize("persistent", [True, False])
@pytest.mark.parametrize("device", list(BootDevice))
def test_boot_device_round_trip(target: Target, device: BootDevice, persistent: bool) -> None:
    target.driver.set_boot_device(device, persistent=persistent, deadline=per_call(target.driver))
    assert target.driver.get_boot_device(deadline=per_call(target.driver)) == BootSetting(
        device, persistent
    )


OPTIONAL: dict[Capability, Callable[[Target], object]] = {
    Capability.VIRTUAL_MEDIA: lambda t: t.driver.insert_virtual_media(
        "http://img/x.iso", deadline=per_call(t.driver)
    ),
    Capability.INVENTORY: lambda t: t.driver.get_inventory(deadline=per_call(t.driver)),
    Capability.BOOT_PROGRESS: lambda t: t.driver.get_boot_progress(deadline=per_call(t.driver)),
    Capability.BIOS: lambda t: t.driver.get_bios(deadline=per_call(t.driver)),
    Capability.FIRMWARE: lambda t: t.driver.get_firmware_inventory(deadline=per_call(t.driver)),
}


@pytest.mark.parametrize("capability", list(OPTIONAL), ids=str)
def test_capabilities_are_declared_truthfully(target: Target, capability: Capability) -> None:
    call = OPTIONAL[capability]
    if target.driver.supports(capability):
        call(target)
    else:
        with pytest.raises(UnsupportedOperation) as info:
            call(target)
        assert info.value.node == target.driver.node


def serves(target: Target, capability: Capability) -> bool:
    return target.driver.supports(capability)


def test_bios_set_is_pending_until_the_reset_and_verified_after_it(target: Target) -> None:
    if not serves(target, Capability.BIOS):
        pytest.skip("no BIOS settings behind this driver")  # declared: checked above
    d = target.driver
    pending = d.set_bios({"ProcTurboMode": "Disabled"}, deadline=per_call(d))
    assert pending == {"ProcTurboMode": "Disabled"}
    assert d.set_bios({"ProcTurboMode": "Disabled"}, deadline=per_call(d)) == pending  # idempotent
    assert d.get_bios(deadline=per_call(d)).current["ProcTurboMode"] == "Enabled"
    # before the reset it has not applied: never success
    with pytest.raises(SettingsNotApplied) as info:
        d.verify_bios({"ProcTurboMode": "Disabled"}, deadline=per_call(d))
    assert info.value.attributes["ProcTurboMode"]["pending"] is True
    d.set_power_state(
        PowerAction.REBOOT, wait=True, timeout=target.power_timeout, deadline=no_budget(d)
    )
    settings = d.verify_bios({"ProcTurboMode": "Disabled"}, deadline=per_call(d))
    assert settings.current["ProcTurboMode"] == "Disabled"
    assert settings.pending == {}


def test_bios_settings_that_apply_partly_are_reported_not_applied(target: Target) -> None:
    if not serves(target, Capability.BIOS):
        pytest.skip("no BIOS settings behind this driver")
    d = target.driver
    target.machine.bios.applies = "partly"
    target.machine.bios.sticky = {"ProcHyperthreading"}
    wanted = {"ProcTurboMode": "Disabled", "ProcHyperthreading": "Disabled"}
    d.set_bios(wanted, deadline=per_call(d))
    d.set_power_state(
        PowerAction.REBOOT, wait=True, timeout=target.power_timeout, deadline=no_budget(d)
    )
    with pytest.raises(SettingsNotApplied) as info:
        d.verify_bios(wanted, deadline=per_call(d))
    assert set(info.value.attributes) == {"ProcHyperthreading"}
    assert "ProcHyperthreading: wanted 'Disabled', reads 'Enabled' (still pending)" in str(
        info.value
    )
    row = policy_for(info.value)
    assert not row.retried_here
    assert not row.counts_for_health


def test_bios_changes_are_checked_against_the_registry_before_anything_is_sent(
    target: Target,
) -> None:
    if not serves(target, Capability.BIOS):
        pytest.skip("no BIOS settings behind this driver")
    d = target.driver
    changes = {
        "NoSuchThing": "x",
        "SystemModelName": "mine",
        "ProcCoreDisable": 99,
        "SriovEnable": "maybe",
        "ProcTurboMode": "Sometimes",
    }
    with pytest.raises(InputError) as info:
        d.set_bios(changes, deadline=per_call(d))
    problems = [str(p) for p in getattr(info.value, "problems", [])]
    assert len(problems) == 5, problems  # every problem at once, one each
    assert any("NoSuchThing: no such attribute" in p for p in problems)
    assert any("SystemModelName: is read-only" in p for p in problems)
    assert any("ProcCoreDisable: 99 is above 7" in p for p in problems)
    assert any("SriovEnable: 'maybe' is not true or false" in p for p in problems)
    assert any("'Sometimes' is not one of Enabled, Disabled" in p for p in problems)
    assert target.machine.bios.pending == {}  # nothing sent


def test_detailed_inventory_lists_the_parts(target: Target) -> None:
    d = target.driver
    if not d.supports(Capability.INVENTORY):
        pytest.skip("no inventory")
    summary = d.get_inventory(deadline=per_call(d))
    assert summary.nics is None  # not asked for: not read
    detailed = d.get_inventory(deadline=per_call(d), detail=True)
    assert detailed.manufacturer == summary.manufacturer
    if serves(target, Capability.FIRMWARE):
        assert detailed.firmware
        assert detailed.nics
        assert all(nic.mac for nic in detailed.nics)


def test_firmware_inventory_lists_components_with_versions(target: Target) -> None:
    if not serves(target, Capability.FIRMWARE):
        pytest.skip("no firmware inventory behind this driver")
    components = target.driver.get_firmware_inventory(deadline=per_call(target.driver))
    assert components
    assert all(isinstance(c, FirmwareComponent) and c.id and c.version for c in components)


def test_virtual_media_insert_and_eject_are_idempotent(target: Target) -> None:
    d = target.driver
    if not d.supports(Capability.VIRTUAL_MEDIA):
        with pytest.raises(UnsupportedOperation):
            d.eject_virtual_media(deadline=per_call(d))
        return
    d.insert_virtual_media("http://img/a.iso", deadline=per_call(d))
    d.insert_virtual_media("http://img/a.iso", deadline=per_call(d))
    assert target.machine.media == "http://img/a.iso"
    d.eject_virtual_media(deadline=per_call(d))
    d.eject_virtual_media(deadline=per_call(d))
    assert target.machine.media is None


@pytest.mark.parametrize("effect", ["busy", "internal_error", "unsupported", "auth_fail"])
def test_every_failure_is_a_bmaas_error(target: Target, effect: str) -> None:
    target.machine.plan.add(FaultRule.from_dict({"effect": effect, "operation": "power.get"}))
    with pytest.raises(BmaasError) as info:
        target.driver.get_power_state(deadline=per_call(target.driver))
    assert info.value.node == target.driver.node
    assert info.value.operation == "power.get"
    assert type(info.value).__module__ == "bmaas.faults"


def test_repr_names_node_and_close_is_safe_twice(target: Target) -> None:
    assert target.driver.node in repr(target.driver)
    target.driver.close()
    target.driver.close()


# -- the budget: every call ends by the Deadline it is handed ----------------------------

#: slack for a real backend's scheduling (a generous bound, not a timing test);
#: the time the calling thread waited for a CPU comes on top (CpuWait)
SLACK = 1.0


def test_a_call_whose_deadline_passed_sends_nothing(target: Target) -> None:
    d = target.driver
    spent = Deadline.after(0.0, clock=d.clock)
    # bmaas's budget, not the BMC's fault: never counted against the node (issue 36)
    with pytest.raises(SlotTimeout, match="nothing sent") as info:
        d.request_power(PowerAction.ON, deadline=spent)
    assert info.value.operation == "power.set"
    assert not policy_for(info.value).counts_for_health
    assert not policy_for(info.value).fences
    target.wait(target.power_timeout / 2)
    assert target.machine.power_state() is PowerState.OFF  # the request never left


def test_a_hung_bmc_costs_the_deadline_handed_in_not_the_drivers_own(target: Target) -> None:
    d = target.driver
    target.machine.plan.add(FaultRule.from_dict({"effect": "hang", "operation": "power.get"}))
    begun = d.clock()
    with CpuWait() as starved, pytest.raises(BMCTimeout):
        d.get_power_state(deadline=Deadline.after(0.5, clock=d.clock))
    took = d.clock() - begun
    print(f"hung call, 0.5 s deadline: {took:.3f} s, {starved.seconds:.3f} s waiting for a CPU")
    assert 0.5 - 1e-6 <= took <= 0.5 + SLACK + starved.seconds


def test_waiting_for_power_ends_by_the_deadline(target: Target) -> None:
    d = target.driver
    begun = d.clock()
    # off, nobody asked for on: only the budget ends the wait, before the
    # hardware's 60 s: bmaas's budget, not the node's fault (issue 36) -- the
    # wait's own end, or its last read refused for want of time
    with CpuWait() as starved, pytest.raises(SlotTimeout, match=r"power window ended|nothing sent"):
        d.wait_for_power(PowerState.ON, timeout=60.0, deadline=Deadline.after(1.2, clock=d.clock))
    took = d.clock() - begun
    print(
        f"wait with a 1.2 s deadline took {took:.3f} s, {starved.seconds:.3f} s waiting for a CPU"
    )
    assert took <= 1.2 + SLACK + starved.seconds
