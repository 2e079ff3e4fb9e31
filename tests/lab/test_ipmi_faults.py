"""Every fault effect, served for real by hwlab's IPMI BMC, seen through IPMIDriver.

Each case checks the documented fault class, that the call ended within its
deadline (with a generous bound for a loaded CI box), and (through the ``lab``
fixture) that no thread or socket was left behind.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from bmaas.driver import BootDevice, PowerAction, PowerState
from bmaas.faults import (
    BMCAuthError,
    BMCBusy,
    BMCFault,
    BMCInternalError,
    BMCProtocolError,
    BMCTimeout,
    BMCUnreachable,
    BootFailure,
    PowerFailure,
    UnclassifiedFault,
    UnsupportedOperation,
)
from tests.budgets import CpuWait, no_budget, per_call
from tests.lab.conftest import Lab

pytestmark = pytest.mark.lab

DEADLINE = 1.0
#: how far past its deadline a call may end on a busy two-core machine; the
#: time the test's thread waited for a CPU meanwhile comes on top (CpuWait)
SLACK = 0.75

SILENT = [
    ("hang", {}),
    ("drop", {}),
    ("delay", {"seconds": 5.0}),
    # one datagram cannot dribble: it comes whole when its last byte would,
    # ~45 bytes at 4 bytes every 0.25 s: nearly 3 s, past the deadline
    ("trickle", {"bytes": 4, "every": 0.25}),
    ("bmc_reboot", {"duration": 30.0}),
]
ANSWERED = [
    ("busy", {}, BMCBusy),
    ("internal_error", {}, BMCInternalError),
    ("unsupported", {}, UnsupportedOperation),
    ("auth_fail", {}, BMCAuthError),
    ("malformed_reply", {}, BMCProtocolError),
]


def _fail(lab: Lab, effect: str, params: dict[str, Any], *, in_session: bool) -> BMCFault:
    """Arrange one rule, make one power read, return the fault it raised."""
    machine = lab.machine()
    driver = lab.driver(bmc_timeout=DEADLINE)
    if in_session:
        assert driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF  # logs in first
    lab.rule(machine, effect=effect, operation="power.get" if in_session else "login", **params)
    start = time.monotonic()
    with CpuWait() as starved, pytest.raises(BMCFault) as info:
        driver.get_power_state(deadline=per_call(driver))
    wall = time.monotonic() - start
    fault = info.value
    assert wall <= DEADLINE + SLACK + starved.seconds, (wall, starved.seconds)
    assert fault.elapsed is not None
    assert fault.elapsed <= DEADLINE + SLACK + starved.seconds
    assert (fault.node, fault.operation, fault.driver) == ("n1", "power.get", "ipmi")
    assert not isinstance(fault, UnclassifiedFault)
    return fault


@pytest.mark.parametrize(("effect", "params"), SILENT, ids=[e for e, _ in SILENT])
def test_silent_login_is_unreachable_at_the_deadline(
    lab: Lab, effect: str, params: dict[str, Any]
) -> None:
    fault = _fail(lab, effect, params, in_session=False)
    assert type(fault) is BMCUnreachable
    assert fault.elapsed is not None
    assert fault.elapsed >= DEADLINE - 0.05  # it waited for the answer, all of it


@pytest.mark.parametrize(("effect", "params"), SILENT, ids=[e for e, _ in SILENT])
def test_silence_in_a_live_session_is_a_timeout(
    lab: Lab, effect: str, params: dict[str, Any]
) -> None:
    fault = _fail(lab, effect, params, in_session=True)
    assert type(fault) is BMCTimeout
    assert "outcome unknown" in str(fault)


@pytest.mark.parametrize(("effect", "params", "expected"), ANSWERED, ids=[e for e, *_ in ANSWERED])
@pytest.mark.parametrize("in_session", [False, True], ids=["login", "session"])
def test_bmc_effects_are_classified_at_once(
    lab: Lab, effect: str, params: dict[str, Any], expected: type[BMCFault], in_session: bool
) -> None:
    fault = _fail(lab, effect, params, in_session=in_session)
    assert type(fault) is expected
    assert fault.elapsed is not None
    assert fault.elapsed < DEADLINE  # an answer, not the deadline (no tighter: CI is loaded)


def test_a_quick_trickle_answers_late_but_whole(lab: Lab) -> None:
    machine = lab.machine()
    driver = lab.driver(bmc_timeout=DEADLINE)
    assert driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF  # logs in first
    lab.rule(machine, effect="trickle", bytes=16, every=0.1, operation="power.get")
    start = time.monotonic()
    assert driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF
    assert time.monotonic() - start >= 0.25  # ceil(43 / 16) = 3 pieces, 0.1 s apart


def test_completion_codes_are_named_in_the_fault(lab: Lab) -> None:
    fault = _fail(lab, "busy", {}, in_session=True)
    assert fault.status == "0xC0"
    assert "[0xC0]" in str(fault)


def test_a_low_drop_rate_is_absorbed_by_retransmission(lab: Lab) -> None:
    machine = lab.machine()
    lab.rule(machine, effect="drop", rate=0.25, name="lossy")
    driver = lab.driver(bmc_timeout=3.0)
    states = [driver.get_power_state(deadline=per_call(driver)) for _ in range(8)]
    assert states == [PowerState.OFF] * 8
    assert machine.plan.counts()["lossy"] > 0  # packets were lost, and it still worked


def test_an_idempotent_request_is_retransmitted(lab: Lab) -> None:
    machine = lab.machine()
    driver = lab.driver(bmc_timeout=3.0)
    driver.get_power_state(deadline=per_call(driver))
    seen = lab.counter(machine, "power.get")
    lab.rule(machine, effect="drop", operation="power.get", nth=1)
    assert driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF
    assert machine.plan.counts()[seen] == 2  # the lost one, and its retransmission


def test_a_lost_reset_is_not_sent_twice(lab: Lab) -> None:
    machine = lab.machine(power=PowerState.ON)
    driver = lab.driver(bmc_timeout=DEADLINE)
    driver.get_power_state(deadline=per_call(driver))
    seen = lab.counter(machine, "power.set")
    lab.rule(machine, effect="drop", operation="power.set", nth=1)
    with pytest.raises(BMCTimeout):
        driver.set_power_state(PowerAction.REBOOT, deadline=per_call(driver))
    assert machine.plan.counts()[seen] == 1
    assert machine.boots == 0  # the dropped reset never ran, and nothing repeated it


def test_a_timed_out_session_is_never_reused(lab: Lab) -> None:
    machine = lab.machine()
    driver = lab.driver(bmc_timeout=DEADLINE)
    logins = lab.counter(machine, "login")
    driver.get_power_state(deadline=per_call(driver))
    # hang for exactly this call's deadline (one lost packet would be retransmitted)
    until = machine.plan.elapsed() + DEADLINE
    lab.rule(machine, effect="hang", operation="power.get", until=until)
    with pytest.raises(BMCTimeout):
        driver.get_power_state(deadline=per_call(driver))
    assert driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF
    assert machine.plan.counts()[logins] == 2


def test_bmc_reboot_window_then_a_fresh_session(lab: Lab) -> None:
    machine = lab.machine()
    driver = lab.driver(bmc_timeout=0.5)
    logins = lab.counter(machine, "login")
    driver.get_power_state(deadline=per_call(driver))
    lab.rule(machine, effect="bmc_reboot", operation="power.get", duration=1.2, times=1)
    with pytest.raises(BMCTimeout):
        driver.get_power_state(
            deadline=per_call(driver)
        )  # sent in the old session, the BMC went down
    with pytest.raises(BMCUnreachable):
        driver.get_power_state(
            deadline=per_call(driver)
        )  # still rebooting: the login gets no answer
    bmc = lab.server.bmc("n1")
    for _ in range(100):  # the window is 1.2 s; give up after 5
        if not machine.bmc_down():
            break
        time.sleep(0.05)
    assert driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF
    assert len(bmc.sessions) == 1  # the reboot forgot every session before it
    # the login sent while it rebooted never reached the BMC: two logins seen
    assert machine.plan.counts()[logins] == 2


# -- hardware effects ----------------------------------------------------------


def test_power_stuck_is_a_power_failure_before_the_timeout(lab: Lab) -> None:
    machine = lab.machine()
    lab.rule(machine, effect="power_stuck", operation="power.set", times=1)
    driver = lab.driver()
    start = time.monotonic()
    with pytest.raises(PowerFailure) as info:
        driver.set_power_state(PowerAction.ON, wait=True, timeout=3.0, deadline=no_budget(driver))
    assert "power control fault" in str(info.value)
    assert time.monotonic() - start < 3.0  # the BMC said so; no need to wait it out
    assert (
        driver.set_power_state(PowerAction.ON, wait=True, timeout=3.0, deadline=no_budget(driver))
        is PowerState.ON
    )


def test_power_lost_reads_as_a_power_fault_until_power_returns(lab: Lab) -> None:
    machine = lab.machine(power=PowerState.ON)
    driver = lab.driver()
    assert driver.get_power_state(deadline=per_call(driver)) is PowerState.ON
    lab.rule(machine, effect="power_lost", operation="power.get", times=1)
    with pytest.raises(PowerFailure) as info:
        driver.get_power_state(deadline=per_call(driver))
    assert "main power fault" in str(info.value)
    assert (
        driver.probe(deadline=per_call(driver)).extra["power_fault"] is True
    )  # probe reports, never refuses
    assert (
        driver.set_power_state(PowerAction.ON, wait=True, timeout=3.0, deadline=no_budget(driver))
        is PowerState.ON
    )


def test_slow_power_misses_the_wait_timeout(lab: Lab) -> None:
    machine = lab.machine()
    lab.rule(machine, effect="slow_power", operation="power.set", seconds=5.0)
    driver = lab.driver()
    with CpuWait() as starved, pytest.raises(PowerFailure) as info:
        driver.set_power_state(PowerAction.ON, wait=True, timeout=0.5, deadline=no_budget(driver))
    assert info.value.elapsed is not None
    assert 0.5 <= info.value.elapsed < 0.5 + SLACK + starved.seconds


def test_boot_device_not_persisted_is_a_boot_failure(lab: Lab) -> None:
    machine = lab.machine()
    lab.rule(machine, effect="boot_not_persisted", operation="boot.set")
    driver = lab.driver()
    with pytest.raises(BootFailure) as info:
        driver.set_boot_device(BootDevice.PXE, persistent=True, deadline=per_call(driver))
    assert "reads back disk" in str(info.value)


def test_boot_crash_powers_on_then_falls_off(lab: Lab) -> None:
    machine = lab.machine()
    lab.rule(machine, effect="boot_crash", operation="power.set", up_for=0.3)
    driver = lab.driver()
    assert (
        driver.set_power_state(PowerAction.ON, wait=True, timeout=3.0, deadline=no_budget(driver))
        is PowerState.ON
    )
    time.sleep(0.4)
    assert driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF
