"""A firmware update through the real RedfishDriver on hwlab's Redfish BMCs
(issue 51): SimpleUpdate taken, its task followed to its end, the BMC waited
for through a reboot, the version read back -- and each update effect ending
typed: ``task_hang`` TaskStuck, ``update_rejected`` RequestRejected,
``version_unchanged`` and ``update_reboot`` with the old version
SettingsNotApplied, ``update_reboot`` with the new one fine. The Dell shapes
answer with a job in iDRAC's queue instead of a task; the effects end the
same there."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.machine import FakeMachine
from bmaas.faults import (
    BMCNotBack,
    BMCUnreachable,
    RequestRejected,
    SettingsNotApplied,
    TaskStuck,
)
from bmaas.hwlab.redfish import RedfishServer
from bmaas.retry import RetryingDriver, RetryLimits
from bmaas.updates import UpdateBounds
from tests.lab.redfish_support import HARDWARE, PASSWORD, USERNAME, driver_for

pytestmark = pytest.mark.lab

QUICK = dataclasses.replace(HARDWARE, firmware_update_time=0.3)
#: a healthy task's bound: generous, since a starved client on a loaded runner
#: (load 28: 17 burners beside the suite) once read a 0.3 s task past 2 s and
#: ended TaskStuck; only the ``task_hang`` row, which waits the bound out,
#: takes the short one (:data:`HANG`)
BOUNDS = UpdateBounds(task=20.0, poll=0.1, back=5.0, good=2, interval=0.3)
HANG = dataclasses.replace(BOUNDS, task=2.0)


@pytest.fixture(scope="module")
def server() -> Iterator[RedfishServer]:
    with RedfishServer() as s:
        yield s


def _update(
    server: RedfishServer, shape: str | None = None, bounds: UpdateBounds = BOUNDS, **rule: Any
) -> tuple[Any, list[str]]:
    machine = FakeMachine(f"fw-{shape or 'dmtf'}-{time.monotonic_ns()}", QUICK)
    port = server.add(machine, username=USERNAME, password=PASSWORD, shape=shape)
    driver = driver_for(server, port)
    lines: list[str] = []
    try:
        if rule:
            rule = {"operation": "firmware.update", "times": 1, **rule}
            machine.plan.add(FaultRule.from_dict(rule))
        retrying = RetryingDriver(driver, RetryLimits(bmc_timeout=5.0))
        after = retrying.update_firmware(
            "http://127.0.0.1:9/fw/bios-2.0.bin",
            targets=("BIOS",),
            deadline=Deadline.after(60.0),
            bounds=bounds,
            progress=lines.append,
        )
        return {c.id: c.version for c in after}, lines
    finally:
        driver.close()


#: what SimpleUpdate's answer names: a DMTF task, or (Dell) iDRAC's job
TASK = "task: /redfish/v1/TaskService/Tasks/1"
JOB = "job: /redfish/v1/Managers/iDRAC.Embedded.1/Oem/Dell/Jobs/JID_100000000001"
#: the default service, a task shape and the job shape each effect runs on
EFFECT_SHAPES = [None, "idrac9"]


@pytest.mark.parametrize(
    ("shape", "taken"),
    [
        (None, TASK),
        ("idrac9", JOB),
        ("idrac10", JOB),
        ("ilo5", TASK),
        ("xcc", TASK),
        ("openbmc", TASK),
    ],
)
def test_an_update_is_followed_to_its_end_and_verified(
    server: RedfishServer, shape: Any, taken: str
) -> None:
    versions, lines = _update(server, shape)
    assert versions["BIOS"] == "bios-2.0.bin"
    assert lines[0] == f"update taken ({taken})"
    assert lines[-1] == "task Completed 100%"


@pytest.mark.parametrize("shape", EFFECT_SHAPES)
def test_a_short_bmc_reboot_is_ridden_out_by_the_reads_retry(
    server: RedfishServer, shape: Any
) -> None:
    versions, lines = _update(server, shape, effect="update_reboot", duration=1.0)
    assert versions["BIOS"] == "bios-2.0.bin"
    assert not any("waiting for it" in line for line in lines), lines


@pytest.mark.parametrize("shape", EFFECT_SHAPES)
def test_a_bmc_away_past_the_reads_retry_is_waited_for(server: RedfishServer, shape: Any) -> None:
    """3 s down: longer than the task read's brief retries (3 attempts 1 s
    apart), so the update waits for 2 answers in a row."""
    versions, lines = _update(server, shape, BOUNDS, effect="update_reboot", duration=3.0)
    assert versions["BIOS"] == "bios-2.0.bin"
    assert "BMC not answering (rebooting?): waiting for it" in lines, lines
    assert "BMC answers (2 of 2)" in lines
    assert lines[-1] == "task Completed 100%"


@pytest.mark.parametrize("shape", EFFECT_SHAPES)
def test_a_bmc_away_past_its_bound_is_not_back(server: RedfishServer, shape: Any) -> None:
    bounds = dataclasses.replace(BOUNDS, back=1.0)
    with pytest.raises(BMCNotBack) as info:
        _update(server, shape, bounds, effect="update_reboot", duration=4.0)
    assert isinstance(info.value.__cause__, BMCUnreachable)


@pytest.mark.parametrize("shape", EFFECT_SHAPES)
@pytest.mark.parametrize(
    ("rule", "fault"),
    [
        ({"effect": "task_hang"}, TaskStuck),
        ({"effect": "update_rejected"}, RequestRejected),
        ({"effect": "version_unchanged"}, SettingsNotApplied),
        ({"effect": "update_reboot", "duration": 1.0, "version": "old"}, SettingsNotApplied),
    ],
)
def test_each_update_effect_ends_typed(
    server: RedfishServer, rule: dict[str, Any], fault: type[Exception], shape: Any
) -> None:
    with pytest.raises(fault) as info:
        _update(server, shape, HANG if fault is TaskStuck else BOUNDS, **rule)
    if fault is RequestRejected:  # the Update registry's id, or iDRAC's
        said = "RED007: Unable to verify" if shape == "idrac9" else "VerificationFailed"
        assert said in str(info.value)
    if fault is SettingsNotApplied:
        assert "BIOS still reads 'fake-bios-1.0'" in str(info.value)
