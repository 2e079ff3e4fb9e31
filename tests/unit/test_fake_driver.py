"""Each of the fault effects, through FakeDriver, as a real driver would fail."""

from __future__ import annotations

from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import BootDevice, PowerAction, PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.faults import Effect
from bmaas.fakes.fleet import FakeFleet
from bmaas.fakes.machine import Hardware
from bmaas.faults import (
    BmaasError,
    BMCAuthError,
    BMCBusy,
    BMCInternalError,
    BMCNotBack,
    BMCProtocolError,
    BMCTimeout,
    BMCUnreachable,
    BootFailure,
    PowerFailure,
    RequestRejected,
    SettingsNotApplied,
    TaskStuck,
    UnsupportedOperation,
)
from bmaas.updates import UpdateBounds
from tests.budgets import ask, no_budget, per_call

DEADLINE = 5.0
HW = Hardware(power_on_time=2, power_off_time=1, soft_off_time=5, os_boot_time=10)


def _make(
    *rules: dict[str, Any], power: PowerState = PowerState.OFF
) -> tuple[FakeDriver, FakeClock]:
    fleet = FakeFleet(clock=FakeClock(), seed=3)
    fleet.add("n1", hardware=HW, rules=rules, power=power)
    return FakeDriver("n1", fleet=fleet, bmc_timeout=DEADLINE), fleet.clock


def _driver(*rules: dict[str, Any], power: PowerState = PowerState.OFF) -> FakeDriver:
    return _make(*rules, power=power)[0]


def test_healthy_power_cycle_converges_on_the_fake_clock() -> None:
    d = _driver()
    assert (
        d.set_power_state(PowerAction.ON, wait=True, timeout=10, deadline=no_budget(d))
        is PowerState.ON
    )
    assert d.get_power_state(deadline=per_call(d)) is PowerState.ON
    assert d.machine.boots == 1


def test_hang_times_out_after_the_deadline_without_sleeping() -> None:
    d, clock = _make({"effect": "hang", "operation": "power.get"})
    with pytest.raises(BMCTimeout) as info:
        d.get_power_state(deadline=Deadline.after(2.5, clock=clock.monotonic))
    assert info.value.elapsed == pytest.approx(2.5)
    assert info.value.operation == "power.get"
    assert clock.sleeps == [2.5]


def test_drop_all_is_a_timeout_and_drop_none_succeeds() -> None:
    with pytest.raises(BMCTimeout):
        ask(_driver({"effect": "drop", "rate": 1.0}).get_power_state)
    assert ask(_driver({"effect": "drop", "rate": 0.0}).get_power_state) is PowerState.OFF


def test_drop_rate_is_a_share_of_calls_and_replays() -> None:
    def outcomes() -> list[bool]:
        d = _driver({"effect": "drop", "rate": 0.3})
        seen = []
        for _ in range(200):
            try:
                d.get_power_state(deadline=per_call(d))
                seen.append(True)
            except BMCTimeout:
                seen.append(False)
        return seen

    first = outcomes()
    assert first == outcomes()
    assert 30 < first.count(False) < 90


def test_delay_below_deadline_succeeds_late_and_above_times_out() -> None:
    d, clock = _make({"effect": "delay", "seconds": 1.5})
    assert d.get_power_state(deadline=per_call(d)) is PowerState.OFF
    assert clock.sleeps == [1.5]
    with pytest.raises(BMCTimeout):
        ask(_driver({"effect": "delay", "seconds": 9}).get_power_state)


def test_trickle_is_as_late_as_the_whole_answer_takes_to_dribble_in() -> None:
    # A 2 KiB answer at 512 bytes every 0.5 s arrives whole after 2 s.
    d, clock = _make({"effect": "trickle", "bytes": 512, "every": 0.5})
    assert d.get_power_state(deadline=per_call(d)) is PowerState.OFF
    assert clock.sleeps == [2.0]
    # One byte every 0.3 s: never whole within the 5 s deadline.
    d, clock = _make({"effect": "trickle", "operation": "power.get"})
    with pytest.raises(BMCTimeout):
        d.get_power_state(deadline=per_call(d))
    assert clock.sleeps == [DEADLINE]


def test_busy_carries_retry_after() -> None:
    with pytest.raises(BMCBusy) as info:
        ask(_driver({"effect": "busy", "retry_after": 3}).get_power_state)
    assert info.value.retry_after == 3.0


@pytest.mark.parametrize(
    ("effect", "cls"),
    [
        ("auth_fail", BMCAuthError),
        ("internal_error", BMCInternalError),
        ("malformed_reply", BMCProtocolError),
        ("unsupported", UnsupportedOperation),
    ],
)
def test_bmc_effects_map_to_their_fault(effect: str, cls: type[BmaasError]) -> None:
    with pytest.raises(cls) as info:
        ask(_driver({"effect": effect}).probe)
    assert info.value.node == "n1"
    assert info.value.operation == "probe"


def test_internal_error_has_message_id() -> None:
    with pytest.raises(BMCInternalError) as info:
        ask(_driver({"effect": "internal_error", "message_id": "Oem.1.0.Broken"}).probe)
    assert info.value.message_id == "Oem.1.0.Broken"


def test_bmc_reboot_is_unreachable_for_the_window_then_recovers() -> None:
    d, clock = _make({"effect": "bmc_reboot", "duration": 20, "times": 1})
    with pytest.raises(BMCUnreachable):
        d.get_power_state(deadline=per_call(d))
    with pytest.raises(BMCUnreachable):
        d.get_power_state(deadline=per_call(d))
    clock.advance(20)
    assert d.get_power_state(deadline=per_call(d)) is PowerState.OFF


def test_power_stuck_is_a_power_failure_when_waiting() -> None:
    d = _driver({"effect": "power_stuck", "operation": "power.set"})
    with pytest.raises(PowerFailure) as info:
        d.set_power_state(PowerAction.ON, wait=True, timeout=10, deadline=no_budget(d))
    assert info.value.elapsed == pytest.approx(10)
    assert d.get_power_state(deadline=per_call(d)) is PowerState.OFF


def test_power_lost_turns_the_node_off() -> None:
    d = _driver({"effect": "power_lost", "operation": "power.get", "nth": 2}, power=PowerState.ON)
    assert d.get_power_state(deadline=per_call(d)) is PowerState.ON
    assert d.get_power_state(deadline=per_call(d)) is PowerState.OFF
    assert d.machine.power_fault


def test_slow_power_beats_a_short_wait_and_lands_later() -> None:
    d, clock = _make({"effect": "slow_power", "seconds": 30})
    with pytest.raises(PowerFailure):
        d.set_power_state(PowerAction.ON, wait=True, timeout=10, deadline=no_budget(d))
    clock.advance(25)
    assert d.get_power_state(deadline=per_call(d)) is PowerState.ON


def test_boot_not_persisted_is_a_boot_failure() -> None:
    d = _driver({"effect": "boot_not_persisted"})
    with pytest.raises(BootFailure, match="reads back disk"):
        d.set_boot_device(BootDevice.PXE, persistent=True, deadline=per_call(d))


def test_boot_once_persistent_is_a_quirk_not_a_boot_failure() -> None:
    """The one-time boot kept as persistent (stock sushy-tools, several real
    BMCs): the override is applied, read back Continuous, and recorded as a
    quirk of the BMC, never a fault."""
    d = _driver({"effect": "boot_once_persistent"})
    d.set_boot_device(BootDevice.PXE, persistent=False, deadline=per_call(d))
    setting = d.get_boot_device(deadline=per_call(d))
    assert (setting.device, setting.persistent) == (BootDevice.PXE, True)
    assert [str(q) for q in d.quirks] == ["boot_once_kept_persistent"]


def test_boot_crash_powers_on_then_falls_off() -> None:
    d, clock = _make({"effect": "boot_crash", "up_for": 4, "operation": "power.set"})
    assert (
        d.set_power_state(PowerAction.ON, wait=True, timeout=10, deadline=no_budget(d))
        is PowerState.ON
    )
    clock.advance(5)
    assert d.get_power_state(deadline=per_call(d)) is PowerState.OFF


def test_duplicate_reaches_the_bmc_twice_and_answers_once() -> None:
    d = _driver({"effect": "duplicate", "operation": "power.set"}, power=PowerState.ON)
    d.request_power(PowerAction.REBOOT, deadline=per_call(d))
    assert d.wire_calls == ["power.set", "power.set"]
    assert d.get_power_state(deadline=per_call(d)) is PowerState.POWERING_OFF


def test_wire_calls_are_counted() -> None:
    d = _driver()
    d.get_power_state(deadline=per_call(d))
    d.set_boot_device(BootDevice.PXE, deadline=per_call(d))
    assert d.wire_calls == ["power.get", "boot.set"]


def test_session_limit_needs_a_server_that_counts_sessions() -> None:
    """It triggers on the BMC's sessions at a login; the in-process fake keeps
    no sessions another client could fill, so it never fires here (hwlab's
    emulators: tests/lab/test_session_limit.py)."""
    d = _driver({"effect": "session_limit", "sessions": 0, "operation": "login"})
    assert ask(d.get_power_state) is PowerState.OFF
    assert d.machine.plan.rules[0].effect is Effect.SESSION_LIMIT


def test_overload_silences_the_bmc_for_its_duration() -> None:
    d, clock = _make({"effect": "overload", "max_rate": 0, "duration": 30, "times": 1})
    with pytest.raises(BMCTimeout):
        d.get_power_state(deadline=Deadline.after(1.0, clock=clock.monotonic))
    with pytest.raises(BMCTimeout):  # still down: lost, no new trigger
        d.get_power_state(deadline=Deadline.after(1.0, clock=clock.monotonic))
    clock.advance(30)
    assert ask(d.get_power_state) is PowerState.OFF


def test_every_effect_is_covered_here() -> None:
    import inspect
    import sys

    source = inspect.getsource(sys.modules[__name__])
    for effect in Effect:
        assert f'"{effect.value}"' in source, effect


def test_delay_past_the_deadline_still_acts_outcome_unknown() -> None:
    d = _driver({"effect": "delay", "seconds": 30, "operation": "power.set"}, power=PowerState.ON)
    with pytest.raises(BMCTimeout):
        d.set_power_state(PowerAction.REBOOT, deadline=per_call(d))
    # the BMC carried the reboot out; only the answer was lost
    assert d.machine.power_state() is PowerState.POWERING_OFF


def test_incident_window_after_power_off_then_it_passes() -> None:
    """iDRAC10's conflict: busy while the node has been off < window, then on."""
    d, clock = _make({"effect": "incident", "incident": "idrac10-power-on-conflict", "within": 5})
    with pytest.raises(BMCBusy, match="ActionParameterValueConflict"):
        ask(d.set_power_state, PowerAction.ON)
    clock.advance(6)  # the window closed
    ask(d.set_power_state, PowerAction.ON)
    clock.advance(3)
    assert ask(d.get_power_state) is PowerState.ON


def test_incident_licence_is_unsupported_and_already_on_succeeds() -> None:
    with pytest.raises(UnsupportedOperation, match="LIC501"):
        ask(_driver({"effect": "incident", "incident": "idrac-licence"}).insert_virtual_media, "x")
    d, clock = _make({"effect": "incident", "incident": "idrac-already-on"})
    ask(d.set_power_state, PowerAction.ON)  # the BMC acted and said "already on"
    clock.advance(3)
    assert ask(d.get_power_state) is PowerState.ON


@pytest.mark.parametrize(
    ("effect", "left"),
    [
        ("bios_pending", {"ProcTurboMode", "ProcHyperthreading"}),
        ("bios_partial", {"ProcTurboMode"}),
    ],
)
def test_a_bios_change_the_next_boot_does_not_apply_is_settings_not_applied(
    effect: str, left: set[str]
) -> None:
    d, clock = _make({"effect": effect, "operation": "bios.set"})
    wanted = {"ProcTurboMode": "Disabled", "ProcHyperthreading": "Disabled"}
    d.set_bios(wanted, deadline=per_call(d))
    d.set_power_state(PowerAction.ON, deadline=per_call(d))
    clock.advance(30)
    with pytest.raises(SettingsNotApplied) as info:
        d.verify_bios(wanted, deadline=per_call(d))
    assert set(info.value.attributes) == left


@pytest.mark.parametrize(
    ("rule", "fault"),
    [
        ({"effect": "task_hang"}, TaskStuck),
        ({"effect": "update_rejected"}, RequestRejected),
        ({"effect": "version_unchanged"}, SettingsNotApplied),
        ({"effect": "update_reboot", "version": "old"}, SettingsNotApplied),
        ({"effect": "update_reboot", "duration": 60.0}, BMCNotBack),
    ],
)
def test_each_update_effect_ends_typed(rule: dict[str, Any], fault: type[BmaasError]) -> None:
    d, _clock = _make({"operation": "firmware.update", **rule})
    with pytest.raises(fault):
        d.update_firmware(
            "http://img/bios-2.bin", targets=("BIOS",), deadline=no_budget(d), bounds=_BOUNDS
        )


def test_update_reboot_with_the_new_version_succeeds() -> None:
    d, _clock = _make({"effect": "update_reboot", "operation": "firmware.update"})
    after = d.update_firmware("http://img/bios-2.bin", deadline=no_budget(d), bounds=_BOUNDS)
    assert {c.id: c.version for c in after}["BIOS"] == "bios-2.bin"


_BOUNDS = UpdateBounds(task=10.0, poll=1.0, back=30.0, good=3, interval=5.0)
