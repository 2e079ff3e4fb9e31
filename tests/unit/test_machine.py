"""FakeMachine power physics and boot device on an injected clock."""

from __future__ import annotations

import pytest

from bmaas.driver import BootDevice, BootSetting, PowerAction, PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.faults import Effect, FaultPlan, FaultRule
from bmaas.fakes.machine import FakeMachine, Hardware

HW = Hardware(power_on_time=2, power_off_time=1, soft_off_time=5, os_boot_time=10)


def _machine(power: PowerState = PowerState.OFF) -> tuple[FakeMachine, FakeClock]:
    clock = FakeClock()
    return FakeMachine("m1", HW, clock=clock.monotonic, power=power), clock


def _firings(*rules: FaultRule):
    plan = FaultPlan(rules, clock=FakeClock())
    return plan.evaluate("power.set")


def test_power_on_lands_after_transition_time() -> None:
    m, clock = _machine()
    m.set_power(PowerAction.ON)
    assert m.power_state() is PowerState.POWERING_ON
    assert m.settled_power is PowerState.OFF
    clock.advance(1.99)
    assert m.power_state() is PowerState.POWERING_ON
    clock.advance(0.01)
    assert m.power_state() is PowerState.ON
    assert m.boots == 1


def test_power_on_when_on_is_a_no_op() -> None:
    m, _clock = _machine(PowerState.ON)
    m.set_power(PowerAction.ON)
    assert m.power_state() is PowerState.ON
    assert m.boots == 0


def test_soft_off_takes_the_shutdown_time() -> None:
    m, clock = _machine(PowerState.ON)
    m.set_power(PowerAction.SOFT_OFF)
    clock.advance(4.9)
    assert m.power_state() is PowerState.POWERING_OFF
    clock.advance(0.1)
    assert m.power_state() is PowerState.OFF


def test_reboot_passes_through_off() -> None:
    m, clock = _machine(PowerState.ON)
    m.set_power(PowerAction.REBOOT)
    clock.advance(1.0)
    assert m.settled_power is PowerState.OFF
    clock.advance(2.0)
    assert m.power_state() is PowerState.ON
    assert m.boots == 1


def test_transitions_land_lazily_even_long_after() -> None:
    m, clock = _machine(PowerState.ON)
    m.set_power(PowerAction.REBOOT)
    clock.advance(100)
    assert m.power_state() is PowerState.ON
    assert m.boots == 1


def test_one_time_boot_device_is_consumed_by_next_power_on() -> None:
    m, clock = _machine()
    m.set_boot_device(BootDevice.PXE, persistent=False)
    assert m.boot_device() == BootSetting(BootDevice.PXE, persistent=False)
    m.set_power(PowerAction.ON)
    clock.advance(2)
    assert m.last_boot_device is BootDevice.PXE
    assert m.boot_device() == BootSetting(BootDevice.DISK, persistent=True)


def test_persistent_boot_device_survives_power_on() -> None:
    m, clock = _machine()
    m.set_boot_device(BootDevice.CDROM, persistent=True)
    m.set_power(PowerAction.ON)
    clock.advance(2)
    assert m.boot_device() == BootSetting(BootDevice.CDROM, persistent=True)


def test_boot_progress_follows_the_clock() -> None:
    m, clock = _machine()
    assert m.boot_progress() == "None"
    m.set_power(PowerAction.ON)
    clock.advance(3)
    assert m.boot_progress() == "OSBootStarted"
    clock.advance(10)
    assert m.boot_progress() == "OSRunning"


def test_power_stuck_slow_power_and_boot_crash() -> None:
    m, clock = _machine()
    m.set_power(PowerAction.ON, _firings(FaultRule(Effect.POWER_STUCK)))
    clock.advance(60)
    assert m.power_state() is PowerState.OFF
    m.set_power(PowerAction.ON, _firings(FaultRule(Effect.SLOW_POWER, params={"seconds": 30})))
    clock.advance(29)
    assert m.power_state() is PowerState.POWERING_ON
    clock.advance(1)
    assert m.power_state() is PowerState.ON
    m.force_power(PowerState.OFF)
    m.set_power(PowerAction.ON, _firings(FaultRule(Effect.BOOT_CRASH, params={"up_for": 4})))
    clock.advance(2)
    assert m.power_state() is PowerState.ON
    clock.advance(3.9)
    assert m.power_state() is PowerState.ON
    clock.advance(0.1)
    assert m.power_state() is PowerState.OFF


def test_power_lost_turns_off_and_latches_a_power_fault() -> None:
    m, clock = _machine(PowerState.ON)
    m.apply(FaultPlan([FaultRule(Effect.POWER_LOST)], clock=FakeClock()).evaluate("power.get"))
    assert m.power_state() is PowerState.OFF
    assert m.power_fault
    m.set_power(PowerAction.ON)
    clock.advance(2)
    assert m.power_state() is PowerState.ON
    assert not m.power_fault


def test_boot_not_persisted_accepts_and_forgets() -> None:
    m, _ = _machine()
    firings = FaultPlan([FaultRule(Effect.BOOT_NOT_PERSISTED)], clock=FakeClock()).evaluate("x")
    m.set_boot_device(BootDevice.PXE, persistent=True, firings=firings)
    assert m.boot_device().device is BootDevice.DISK


def test_force_power_acts_behind_the_bmcs_back() -> None:
    m, _ = _machine()
    m.force_power(PowerState.ON)
    assert m.power_state() is PowerState.ON


def test_bmc_reboot_window() -> None:
    m, clock = _machine()
    m.reboot_bmc(10)
    assert m.bmc_down()
    clock.advance(10)
    assert not m.bmc_down()


def test_a_hard_reset_reads_on_all_through_and_boots_again() -> None:
    """IPMI chassis control 0x03 on a real BMC: no off phase to see."""
    m, clock = _machine(PowerState.ON)
    m.set_boot_device(BootDevice.PXE, persistent=False)
    clock.advance(20)
    assert m.boot_progress() == "OSRunning"
    m.reset()
    for _ in range(10):
        assert m.power_state() is PowerState.ON
        assert m.settled_power is PowerState.ON
        clock.advance(0.1)
    assert m.boots == 1  # reset_time (0.5 s) passed: booted again
    assert m.last_boot_device is BootDevice.PXE  # the one-time device was used
    assert m.boot_progress() == "OSBootStarted"  # the OS starts over


def test_a_hard_reset_of_a_machine_that_is_off_powers_it_on() -> None:
    m, clock = _machine(PowerState.OFF)
    m.reset()
    assert m.power_state() is PowerState.POWERING_ON
    clock.advance(2.0)
    assert (m.power_state(), m.boots) == (PowerState.ON, 1)


def test_power_off_before_a_reset_lands_cancels_it() -> None:
    m, clock = _machine(PowerState.ON)
    m.reset()
    m.force_power(PowerState.OFF)
    clock.advance(5)
    assert (m.power_state(), m.boots) == (PowerState.OFF, 0)


def test_health_is_what_the_bmc_reports_and_only_redfish_values() -> None:
    m = FakeMachine("n1")
    assert m.health == "OK"
    m.set_health("Critical")
    assert m.health == "Critical"
    with pytest.raises(ValueError, match="OK, Warning, Critical"):
        m.set_health("Bad")
    assert m.health == "Critical"
