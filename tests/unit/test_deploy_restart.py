"""Deploy onto a node that is already on: the reboot's target (on) is where
the node already is, so the power step waits on evidence of the restart, not
on the first read (issue 14). Fake time, no real sleeps."""

from __future__ import annotations

from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.deploy import DeploySettings, deploy_node
from bmaas.driver import Capability, Operation, PowerAction, PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.faults import SlotTimeout
from bmaas.retry import RetryLimits

HW = Hardware(power_on_time=2, power_off_time=1, soft_off_time=3, os_boot_time=4, reset_time=0.5)
SETTINGS = DeploySettings(
    power_timeout=30, settle=5, boot_timeout=30, poll_interval=1, deadline_s=120, restart_grace=5
)


class IpmiLike(FakeDriver):
    """What an IPMI BMC shows: chassis status is on or off, never "powering",
    and there is no BootProgress. ``hard_reset``: REBOOT is chassis control
    0x03 on a real BMC (reads on all through); else the lab's old model, a
    cycle that reads on, then off for seconds, then on."""

    capabilities = frozenset(Capability) - {Capability.BOOT_PROGRESS}

    def __init__(self, *args: Any, hard_reset: bool, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.hard_reset = hard_reset

    def get_power_state(self, *, deadline: Deadline) -> PowerState:
        return self._call(Operation.POWER_GET, deadline, lambda hw: self.machine.settled_power)

    def request_power(self, action: PowerAction, *, deadline: Deadline) -> None:
        if action is PowerAction.REBOOT and self.hard_reset:
            self._call(Operation.POWER_SET, deadline, lambda hw: self.machine.reset(hw))
        else:
            super().request_power(action, deadline=deadline)


def rig(driver_cls: type[FakeDriver], **kw: Any) -> tuple[FakeDriver, FakeMachine, FakeClock]:
    clock = FakeClock(start=0.0)
    machine = FakeMachine("n1", HW, clock=clock, power=PowerState.ON)
    clock.advance(60)  # the old OS has been running a while
    driver = driver_cls("n1", machine=machine, clock=clock, sleep=clock.sleep, **kw)
    return driver, machine, clock


def deploy(driver: FakeDriver, clock: FakeClock) -> dict[str, float]:
    policy = RetryLimits(sleep=clock.sleep, clock=clock)
    deadline = Deadline.after(SETTINGS.deadline_s, clock=clock)
    return deploy_node(driver, settings=SETTINGS, limits=policy, deadline=deadline).steps


@pytest.mark.parametrize("hard_reset", [True, False], ids=["hard-reset", "old-cycle-model"])
def test_deploy_onto_an_ipmi_node_that_is_on(hard_reset: bool) -> None:
    driver, machine, clock = rig(IpmiLike, hard_reset=hard_reset)
    steps = deploy(driver, clock)
    assert machine.boots == 1  # restarted exactly once
    assert machine.power_state() is PowerState.ON
    if hard_reset:
        # nothing to see on IPMI: the documented minimum, restart_grace
        assert steps["power"] == pytest.approx(SETTINGS.restart_grace, abs=1)
    else:
        # the off phase was seen and waited through: no early settle
        assert steps["power"] == pytest.approx(HW.power_off_time + HW.power_on_time, abs=1)
    assert steps["settle"] >= SETTINGS.settle


def test_a_bmc_that_shows_the_transition_needs_no_grace() -> None:
    """Redfish-like (PoweringOff/PoweringOn, BootProgress): evidence comes at once."""
    driver, machine, clock = rig(FakeDriver)
    steps = deploy(driver, clock)
    assert machine.boots == 1
    assert steps["power"] < SETTINGS.restart_grace


def test_a_node_that_does_not_come_back_is_a_power_failure() -> None:
    from bmaas.faults import PowerFailure

    driver, machine, clock = rig(IpmiLike, hard_reset=False)
    original = machine.set_power

    def cycle_then_stay_off(action: PowerAction, firings: Any = ()) -> None:
        original(PowerAction.OFF if action is PowerAction.REBOOT else action, firings)

    machine.set_power = cycle_then_stay_off  # type: ignore[method-assign]
    with pytest.raises(PowerFailure, match="not on"):
        deploy(driver, clock)


def test_a_deploy_whose_budget_went_before_its_turn_is_bmaas_own_wait() -> None:
    """A request whose deadline was spent before this node's deploy began
    (an earlier candidate, bmaas's own spacing): ``SlotTimeout``, never
    counted, and nothing asked of the BMC. It was a ``BootFailure``
    ("deploy deadline of 0s exceeded before check"), a fault counted
    against a node that was never asked (issue 50: seen at load 25-46)."""
    driver, machine, clock = rig(IpmiLike, hard_reset=True)
    deadline = Deadline.after(5, clock=clock)
    clock.advance(5)
    with pytest.raises(SlotTimeout, match="before this node's turn") as raised:
        deploy_node(driver, settings=SETTINGS, deadline=deadline)
    assert raised.value.node == "n1"
    assert driver.wire_calls == []
    assert machine.boots == 0


def test_a_budget_the_steps_before_spent_is_bmaas_own_wait_too() -> None:
    """The check answered, but only as the request's deadline ran out (a slow
    BMC, a loaded client): the next step has no time, nothing is asked of
    the node for it, and the deploy ends ``SlotTimeout``, never counted.
    It was a ``BootFailure`` ("exceeded before boot_device") counted
    against a node that had answered everything it was asked."""
    driver, machine, clock = rig(FakeDriver)
    deadline = Deadline.after(30, clock=clock)
    probe = driver.probe

    def slow_probe(*, deadline: Deadline) -> Any:
        info = probe(deadline=deadline)
        clock.advance(30)  # answered at the very end of the budget
        return info

    driver.probe = slow_probe  # type: ignore[method-assign]
    limits = RetryLimits(sleep=clock.sleep, clock=clock)
    with pytest.raises(SlotTimeout, match="boot_device step") as raised:
        deploy_node(driver, settings=SETTINGS, limits=limits, deadline=deadline)
    assert raised.value.operation == "deploy.boot_device"
    assert driver.wire_calls == ["probe"]  # the check; nothing for the boot device
    assert machine.boots == 0
