"""Operation-level retry on FakeDriver: sleep sequences, attempt counts,
deadlines, idempotency. Nothing sleeps for real."""

from __future__ import annotations

import importlib
import importlib.util
import os
import random
import warnings
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import BootDevice, PowerAction, PowerState, soft_reboot
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.fleet import FakeFleet
from bmaas.fakes.machine import Hardware
from bmaas.faults import (
    BmaasError,
    BMCAuthError,
    BMCBusy,
    BMCInternalError,
    BMCProtocolError,
    BMCTimeout,
    BMCUnreachable,
    PowerFailure,
    UnsupportedOperation,
)
from bmaas.retry import RetryingDriver, RetryLimits, call, reboot, retry_bmc
from tests.budgets import per_operation

HW = Hardware(power_on_time=2, power_off_time=1, soft_off_time=5, os_boot_time=10)


class Rig:
    """A fake node, its driver, the clock, and a policy on that clock."""

    def __init__(self, *rules: dict[str, Any], power: PowerState = PowerState.OFF, **policy: Any):
        self.fleet = FakeFleet(clock=FakeClock(start=0.0), seed=11)
        self.machine = self.fleet.add("n1", hardware=HW, rules=rules, power=power)
        self.driver: FakeDriver = FakeDriver("n1", fleet=self.fleet, bmc_timeout=5.0)
        self.clock = self.fleet.clock
        defaults: dict[str, Any] = {"jitter": 0.0, "rng": random.Random(0)}
        self.policy = RetryLimits(
            sleep=self.clock.sleep, clock=self.clock.monotonic, **{**defaults, **policy}
        )

    @property
    def calls(self) -> list[str]:
        return self.driver.wire_calls


def test_busy_backs_off_exponentially_then_succeeds() -> None:
    rig = Rig({"effect": "busy", "nth": [1, 2, 3]})
    assert (
        call(rig.policy, rig.driver.get_power_state, deadline=per_operation(rig.policy))
        is PowerState.OFF
    )
    assert rig.clock.sleeps == [0.5, 1.0, 2.0]
    assert rig.calls == ["power.get"] * 4


def test_busy_honours_retry_after_when_longer_than_backoff() -> None:
    rig = Rig({"effect": "busy", "retry_after": 3, "nth": [1, 2]})
    call(rig.policy, rig.driver.get_power_state, deadline=per_operation(rig.policy))
    assert rig.clock.sleeps == [3.0, 3.0]


def test_busy_forever_stops_after_max_attempts_and_reraises_the_fault() -> None:
    rig = Rig({"effect": "busy"}, total=600)
    with pytest.raises(BMCBusy):
        call(rig.policy, rig.driver.get_power_state, deadline=per_operation(rig.policy))
    assert rig.clock.sleeps == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0]
    assert len(rig.calls) == rig.policy.max_attempts == 10


def test_jitter_is_seeded_and_bounded() -> None:
    def sleeps(seed: int) -> list[float]:
        rig = Rig({"effect": "busy"}, total=600, jitter=0.25, rng=random.Random(seed))
        with pytest.raises(BMCBusy):
            call(rig.policy, rig.driver.get_power_state, deadline=per_operation(rig.policy))
        return rig.clock.sleeps

    a = sleeps(1)
    assert a == sleeps(1)
    assert a != sleeps(2)
    for got, base in zip(a, [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0], strict=True):
        assert base * 0.75 <= got <= base * 1.25


def test_the_deadline_is_never_overrun_sleep_included() -> None:
    rig = Rig({"effect": "busy"}, total=5.0, min_attempt=0.1)
    start = rig.clock.monotonic()
    with pytest.raises(BMCBusy):
        call(rig.policy, rig.driver.get_power_state, deadline=per_operation(rig.policy))
    # 0.5 + 1 + 2 = 3.5; the next 4 s wait would cross 5 s, so it stops there
    assert rig.clock.sleeps == [0.5, 1.0, 2.0]
    assert rig.clock.monotonic() - start <= 5.0


def test_each_attempt_deadline_is_clipped_to_the_time_left() -> None:
    rig = Rig({"effect": "hang"}, total=7.0, bmc_timeout=4.0, timeout_wait=0.5)
    start = rig.clock.monotonic()
    with pytest.raises(BMCTimeout):
        call(rig.policy, rig.driver.get_power_state, deadline=per_operation(rig.policy))
    # attempt 1 waits 4 s (its cap), sleeps 0.5, attempt 2 gets the 2.5 s left
    assert rig.clock.sleeps == [4.0, 0.5, 2.5]
    assert rig.clock.monotonic() - start == pytest.approx(7.0)


def test_unreachable_is_retried_briefly() -> None:
    rig = Rig({"effect": "bmc_reboot", "duration": 1.5, "times": 1})
    assert (
        call(rig.policy, rig.driver.get_power_state, deadline=per_operation(rig.policy))
        is PowerState.OFF
    )
    assert len(rig.calls) == 3
    assert [s for s in rig.clock.sleeps if s >= 0.5] == [1.0, 1.0]


def test_unreachable_gives_up_after_its_own_limit() -> None:
    rig = Rig({"effect": "bmc_reboot", "duration": 60, "times": 1})
    with pytest.raises(BMCUnreachable):
        call(rig.policy, rig.driver.get_power_state, deadline=per_operation(rig.policy))
    assert len(rig.calls) == rig.policy.unreachable_attempts == 3


def test_timeout_is_retried_for_idempotent_operations_only() -> None:
    rig = Rig({"effect": "hang", "operation": "power.set", "nth": 1})
    call(
        rig.policy,
        rig.driver.request_power,
        PowerAction.ON,
        idempotent=True,
        deadline=per_operation(rig.policy),
    )
    assert rig.calls == ["power.set", "power.set"]

    rig = Rig({"effect": "hang", "operation": "power.set", "nth": 1}, power=PowerState.ON)
    with pytest.raises(BMCTimeout):
        call(
            rig.policy,
            rig.driver.request_power,
            PowerAction.REBOOT,
            idempotent=False,
            deadline=per_operation(rig.policy),
        )
    assert rig.calls == ["power.set"]


@pytest.mark.parametrize(
    ("effect", "cls"),
    [
        ("auth_fail", BMCAuthError),
        ("unsupported", UnsupportedOperation),
        ("malformed_reply", BMCProtocolError),
    ],
)
def test_never_retried_here(effect: str, cls: type[BmaasError]) -> None:
    rig = Rig({"effect": effect})
    with pytest.raises(cls):
        call(rig.policy, rig.driver.get_power_state, deadline=per_operation(rig.policy))
    assert rig.calls == ["power.get"]
    assert rig.clock.sleeps == []


def test_input_errors_and_bugs_are_never_retried() -> None:
    rig = Rig()
    attempts = []

    def bad_input(*, deadline: Deadline) -> None:
        attempts.append(1)
        raise UnsupportedOperation("nope")

    def bug(*, deadline: Deadline) -> None:
        attempts.append(1)
        raise KeyError("not a fault")

    with pytest.raises(UnsupportedOperation):
        call(rig.policy, bad_input, deadline=per_operation(rig.policy))
    with pytest.raises(KeyError):
        call(rig.policy, bug, deadline=per_operation(rig.policy))
    assert len(attempts) == 2


def test_internal_error_is_retried_once_then_goes_elsewhere() -> None:
    rig = Rig({"effect": "internal_error"})
    with pytest.raises(BMCInternalError):
        call(rig.policy, rig.driver.get_power_state, deadline=per_operation(rig.policy))
    assert rig.calls == ["power.get", "power.get"]
    assert rig.clock.sleeps == [1.0]


def test_busy_backoff_counts_only_busy_answers() -> None:
    rig = Rig(
        {"effect": "busy", "nth": [1, 3]},
        {"effect": "hang", "nth": [2]},
        timeout_wait=0.25,
    )
    call(
        rig.policy,
        rig.driver.get_power_state,
        bmc_timeout=rig.driver.bmc_timeout,
        deadline=per_operation(rig.policy),
    )
    # busy(0.5) - hang(5 s call deadline, then 0.25) - busy again: 1.0, not 2.0
    assert rig.clock.sleeps == [0.5, 5.0, 0.25, 1.0]


def test_reboot_after_lost_answer_that_landed_does_not_reboot_again() -> None:
    # The BMC acts on the reboot but its answer comes too late (outcome unknown).
    rig = Rig(
        {"effect": "delay", "seconds": 30, "operation": "power.set", "nth": 1}, power=PowerState.ON
    )
    boots = rig.machine.boots
    assert (
        reboot(rig.driver, rig.policy, timeout=10, deadline=per_operation(rig.policy))
        is PowerState.ON
    )
    assert rig.machine.boots == boots + 1
    # one REBOOT request, one read, then an idempotent ON: no second reboot
    assert rig.calls[:3] == ["power.set", "power.get", "power.set"]
    assert rig.calls.count("power.set") == 2


def test_reboot_after_lost_request_finishes_with_off_then_on() -> None:
    # The request never reached the BMC: the node still reads on.
    rig = Rig({"effect": "hang", "operation": "power.set", "nth": 1}, power=PowerState.ON)
    boots = rig.machine.boots
    assert (
        reboot(rig.driver, rig.policy, timeout=10, deadline=per_operation(rig.policy))
        is PowerState.ON
    )
    assert rig.machine.boots == boots + 1
    assert rig.calls.count("power.set") == 3  # the lost REBOOT, then OFF, then ON


def test_reboot_with_unreadable_power_state_reraises_the_timeout() -> None:
    rig = Rig(
        {"effect": "hang", "operation": "power.set", "nth": 1},
        {"effect": "auth_fail", "operation": "power.get"},
        power=PowerState.ON,
    )
    with pytest.raises(BMCTimeout):
        reboot(rig.driver, rig.policy, timeout=10, deadline=per_operation(rig.policy))
    assert rig.calls == ["power.set", "power.get"]


def test_retrying_driver_waits_through_busy_reads_without_resending_reboot() -> None:
    rig = Rig({"effect": "busy", "operation": "power.get", "nth": [1, 2]}, power=PowerState.ON)
    rd = RetryingDriver(rig.driver, rig.policy)
    assert (
        rd.set_power_state(PowerAction.REBOOT, wait=True, timeout=30, deadline=per_operation(rd))
        is PowerState.ON
    )
    assert rig.calls.count("power.set") == 1


def test_retrying_driver_power_on_converges_and_power_stuck_fails() -> None:
    rig = Rig()
    rd = RetryingDriver(rig.driver, rig.policy)
    assert (
        rd.set_power_state(PowerAction.ON, wait=True, timeout=10, deadline=per_operation(rd))
        is PowerState.ON
    )
    rig = Rig({"effect": "power_stuck", "operation": "power.set"})
    rd = RetryingDriver(rig.driver, rig.policy)
    with pytest.raises(PowerFailure):
        rd.set_power_state(PowerAction.ON, wait=True, timeout=10, deadline=per_operation(rd))
    assert rig.calls.count("power.set") == 1  # a power failure is never retried here


def test_retrying_driver_boot_device_and_media() -> None:
    rig = Rig({"effect": "busy", "operation": "boot.set", "nth": 1})
    rd = RetryingDriver(rig.driver, rig.policy)
    rd.set_boot_device(BootDevice.PXE, persistent=False, deadline=per_operation(rd))
    assert rd.get_boot_device(deadline=per_operation(rd)).device is BootDevice.PXE
    rd.insert_virtual_media("http://x/y.iso", deadline=per_operation(rd))
    rd.eject_virtual_media(deadline=per_operation(rd))
    assert rig.calls.count("boot.set") == 2


def test_retry_bmc_decorates_any_callable_and_clips_its_deadline() -> None:
    rig = Rig(total=3.0)
    seen: list[float] = []
    outcomes = iter([BMCBusy("busy"), BMCBusy("busy"), "done"])

    @retry_bmc(rig.policy)
    def flaky(*, deadline: Deadline) -> str:
        seen.append(deadline.left())
        rig.clock.advance(0.25)
        item = next(outcomes)
        if isinstance(item, Exception):
            raise item
        return item

    assert flaky(deadline=per_operation(rig.policy)) == "done"
    assert seen == pytest.approx([3.0, 2.25, 1.0])
    assert rig.clock.sleeps == [0.5, 1.0]


def test_policy_no_retry_is_one_attempt() -> None:
    rig = Rig({"effect": "busy"})
    with pytest.raises(BMCBusy):
        call(
            RetryLimits.no_retry(sleep=rig.clock.sleep, clock=rig.clock.monotonic),
            rig.driver.get_power_state,
            deadline=per_operation(RetryLimits.no_retry(clock=rig.clock.monotonic)),
        )
    assert len(rig.calls) == 1


def test_soft_reboot_is_two_idempotent_steps() -> None:
    rig = Rig({"effect": "busy", "operation": "power.set", "nth": 2}, power=PowerState.ON)
    boots = rig.machine.boots
    rd = RetryingDriver(rig.driver, rig.policy)
    assert (
        rd.set_power_state(
            PowerAction.SOFT_REBOOT, wait=True, timeout=30, deadline=per_operation(rd)
        )
        is PowerState.ON
    )
    assert rig.machine.boots == boots + 1
    # SOFT_OFF, then ON answered busy and retried: never a resent restart
    assert rig.calls.count("power.set") == 3


@pytest.mark.parametrize("wait", [True, False])
def test_one_soft_reboot_a_soft_off_waited_for_then_on(wait: bool) -> None:
    """bmaas.driver.soft_reboot is the one order every layer uses (the IPMI
    driver, RetryingDriver, Ironic's power interface): the off is always
    waited for (an on sent to a node still shutting down is lost)."""
    steps: list[tuple[PowerAction, bool]] = []

    def step(action: PowerAction, waits: bool) -> PowerState:
        steps.append((action, waits))
        return action.target

    assert soft_reboot(step, wait=wait) is PowerState.ON
    assert steps == [(PowerAction.SOFT_OFF, True), (PowerAction.ON, wait)]


def test_the_soft_reboot_paths_all_go_through_soft_reboot() -> None:
    """No layer keeps its own copy: each module calls bmaas.driver's."""
    import bmaas.drivers.ipmi.driver as ipmi_driver
    import bmaas.retry as retry_module

    modules = [retry_module, ipmi_driver]
    if importlib.util.find_spec("ironic") is not None:
        modules.append(importlib.import_module("bmaas.drivers.ironic.power"))
    for module in modules:
        assert module.soft_reboot is soft_reboot, module.__name__


def test_limits_share_one_jitter_source_reseeded_in_a_forked_child() -> None:
    # a Random() per limits seeded itself from the OS on every call (~10 us,
    # each power read of a conductor's sync)
    assert RetryLimits().rng is RetryLimits().rng
    read, write = os.pipe()
    with warnings.catch_warnings():  # 3.12+: fork() in a threaded process warns
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: its next jitter, then gone
        os.write(write, repr(RetryLimits().rng.random()).encode())
        os._exit(0)
    os.close(write)
    try:
        child = float(os.read(read, 64))
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    # a copy of the parent's state would draw the parent's next number
    assert child != RetryLimits().rng.random()


def test_a_retry_refused_locally_reports_what_the_bmc_last_said() -> None:
    """A hung BMC's timeout, retried, whose next attempt is refused inside
    bmaas (no turn, no time: SlotTimeout) is still the BMC's timeout: the
    refusal says nothing about the node, so it must not hide a fault that
    does (issue 36 made the refusal uncounted; the timeout stays counted)."""
    from bmaas.faults import SlotTimeout

    clock = FakeClock(start=0.0)
    limits = RetryLimits(sleep=clock.sleep, clock=clock.monotonic, jitter=0.0, max_attempts=3)
    hung = BMCTimeout("no answer within 4s", node="n1", operation="power.get")
    attempts: list[BmaasError] = []

    def read(*, deadline: Deadline) -> PowerState:
        fault = hung if not attempts else SlotTimeout("nothing sent", node="n1")
        attempts.append(fault)
        raise fault

    with pytest.raises(BMCTimeout) as info:
        call(limits, read, deadline=Deadline.after(30, clock=clock.monotonic))
    assert info.value is hung
    assert [type(f) for f in attempts] == [BMCTimeout, SlotTimeout, SlotTimeout]
    assert isinstance(info.value.__context__, SlotTimeout)  # the refusal, for the record


def test_a_local_refusal_with_no_bmc_answer_before_it_stays_a_slot_timeout() -> None:
    from bmaas.faults import SlotTimeout

    clock = FakeClock(start=0.0)
    limits = RetryLimits(sleep=clock.sleep, clock=clock.monotonic, jitter=0.0, max_attempts=2)

    def read(*, deadline: Deadline) -> PowerState:
        raise SlotTimeout("next turn in 9.00s", node="n1")

    with pytest.raises(SlotTimeout):
        call(limits, read, deadline=Deadline.after(30, clock=clock.monotonic))
    assert clock.sleeps == [0.5]  # retried once with backoff: bmaas's own, never counted
