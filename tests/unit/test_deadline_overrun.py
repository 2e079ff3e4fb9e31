"""A BMC that hangs at any point of a deploy, an undeploy or a move ends the
call by its deadline, on FakeClock (no real sleeps).

Issue 23 measured the bug this holds closed: ``deploy_node`` with
``Deadline.after(60)``, ``bmc_timeout=20`` and power reads hanging from
t=50 ended at t=108, because each step turned the Deadline back into
seconds and every read got a fresh budget. Now the Deadline is a required
argument all the way down, so whatever hangs (every BMC request, or only
power reads) from whatever moment, the call ends no later than
``OVERRUN`` seconds of fake time after its deadline, for budgets of 20, 30
and 60 s and BMC call bounds of 5, 10 and 20 s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.deploy import DeploySettings, deploy_node, undeploy_node
from bmaas.driver import PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.faults import BmaasError
from bmaas.provision import Request
from bmaas.retry import RetryLimits
from bmaas.store import Store
from tests.unit.test_provision import Rack

#: the most a call may end after its deadline, in seconds of fake time
OVERRUN = 0.1
BUDGETS = [20.0, 30.0, 60.0]
BMC_TIMEOUTS = [5.0, 10.0, 20.0]
#: which requests hang: every one, or only power reads (the issue's case)
HANGING = ["*", "power.get"]
#: seconds into the call at which the BMC starts hanging
HANG_FROM = [0.0, 0.5, 3.0, 8.0, 15.0, 25.0, 50.0]

HW = Hardware(power_on_time=2, power_off_time=1, soft_off_time=3, os_boot_time=4)
SETTINGS = DeploySettings(power_timeout=60, settle=10, boot_timeout=180, poll_interval=1)


def _hang(machine: FakeMachine, operation: str, after: float) -> None:
    """Hang ``operation`` from ``after`` seconds into the call on."""
    start = machine.plan.elapsed()
    machine.plan.add(
        FaultRule.from_dict({"effect": "hang", "operation": operation, "after": start + after})
    )


def _rig(bmc_timeout: float, power: PowerState) -> tuple[FakeDriver, FakeMachine, FakeClock]:
    clock = FakeClock(start=0.0)
    machine = FakeMachine("n1", HW, clock=clock, power=power)
    driver = FakeDriver(
        "n1", machine=machine, clock=clock, sleep=clock.sleep, bmc_timeout=bmc_timeout
    )
    return driver, machine, clock


def _policy(clock: FakeClock) -> RetryLimits:
    return RetryLimits(sleep=clock.sleep, clock=clock, jitter=0.0, rng=random.Random(0))


def _ends_in_time(clock: FakeClock, deadline: Deadline, run: Any) -> None:
    with contextlib.suppress(BmaasError):  # a typed fault is the expected end; what matters is when
        run()
    overrun = clock() - deadline.at
    assert overrun <= OVERRUN, f"ended {overrun:.3f}s after the deadline"


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("bmc_timeout", BMC_TIMEOUTS)
@pytest.mark.parametrize("operation", HANGING)
@pytest.mark.parametrize("after", HANG_FROM)
@pytest.mark.parametrize("power", [PowerState.OFF, PowerState.ON])
def test_deploy_ends_by_its_deadline(
    budget: float, bmc_timeout: float, operation: str, after: float, power: PowerState
) -> None:
    driver, machine, clock = _rig(bmc_timeout, power)
    _hang(machine, operation, after)
    deadline = Deadline.after(budget, clock=clock)
    _ends_in_time(
        clock,
        deadline,
        lambda: deploy_node(driver, settings=SETTINGS, limits=_policy(clock), deadline=deadline),
    )


def test_the_issue_case_now_ends_by_the_deadline() -> None:
    """Deadline.after(60), bmc_timeout=20, power reads hanging from t=50:
    ended at t=108 before; now by t=60 (+0.1)."""
    driver, machine, clock = _rig(20.0, PowerState.OFF)
    _hang(machine, "power.get", 50.0)
    deadline = Deadline.after(60, clock=clock)
    still_settling = dataclasses.replace(SETTINGS, settle=55)  # polling power at t=50
    with pytest.raises(BmaasError):
        deploy_node(driver, settings=still_settling, limits=_policy(clock), deadline=deadline)
    assert clock() <= 60.0 + OVERRUN


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("bmc_timeout", BMC_TIMEOUTS)
@pytest.mark.parametrize("operation", HANGING)
@pytest.mark.parametrize("after", [0.0, 0.5, 2.0, 5.0, 12.0])
def test_undeploy_ends_by_its_deadline(
    budget: float, bmc_timeout: float, operation: str, after: float
) -> None:
    driver, machine, clock = _rig(bmc_timeout, PowerState.ON)
    _hang(machine, operation, after)
    deadline = Deadline.after(budget, clock=clock)
    _ends_in_time(
        clock,
        deadline,
        lambda: undeploy_node(driver, limits=_policy(clock), power_timeout=60.0, deadline=deadline),
    )


class _Rack(Rack):
    """The provisioning rack with a chosen ``bmc_timeout`` per BMC call."""

    bmc_timeout = 5.0

    def factory(self, record: Any) -> Any:
        driver = FakeDriver(record.name, fleet=self.fleet, bmc_timeout=self.bmc_timeout)
        self.drivers.setdefault(record.name, []).append(driver)
        return driver


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("bmc_timeout", BMC_TIMEOUTS)
@pytest.mark.parametrize("node", ["n01", "n02"], ids=["source", "target"])
@pytest.mark.parametrize("after", [0.0, 3.0, 10.0, 18.0, 25.0])
def test_move_ends_by_its_deadline(
    store: Store, budget: float, bmc_timeout: float, node: str, after: float
) -> None:
    """The target's deploy and the source's power-off (the move's last step)
    both end by the move's deadline, whichever BMC hangs."""
    _Rack.bmc_timeout = bmc_timeout
    rack = _Rack(store, count=2)
    rack.provisioner.provision(Request("r1"), candidates=["n01"])
    clock = rack.fleet.clock
    _hang(rack.fleet.machine(node), "*", after)
    deadline = Deadline.after(budget, clock=clock.monotonic)
    _ends_in_time(clock, deadline, lambda: rack.provisioner.move("r1", deadline=deadline))
