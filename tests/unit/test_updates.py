"""A firmware update and a BMC reset followed to their end (bmaas.updates,
issue 51), on the fake clock: the exact sleeps, the BMC waited for through
its reboot, each end typed; and the Redfish side's pure parts (which request
the service takes, what its task or job says, how a failed task is typed)."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
import requests

from bmaas.deadline import Deadline
from bmaas.drivers.redfish import update as rf
from bmaas.drivers.redfish.faults import map_task
from bmaas.drivers.redfish.preconditions import Resource
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.fleet import FakeFleet
from bmaas.fakes.machine import Hardware
from bmaas.faults import (
    BMCFault,
    BMCInternalError,
    BMCNotBack,
    BMCTimeout,
    BMCUnreachable,
    InputError,
    RequestRejected,
    TaskStuck,
)
from bmaas.retry import RetryingDriver, RetryLimits
from bmaas.updates import UpdateBounds

HW = Hardware(firmware_update_time=2.0, bmc_reboot_time=12.0)
BOUNDS = UpdateBounds(task=10.0, poll=1.0, back=30.0, good=3, interval=5.0)
IMAGE = "http://img/bios-2.bin"


def _make(*rules: dict[str, Any]) -> tuple[FakeDriver, FakeClock]:
    fleet = FakeFleet(clock=FakeClock(), seed=3)
    fleet.add("n1", hardware=HW, rules=rules)
    return FakeDriver("n1", fleet=fleet, bmc_timeout=5.0), fleet.clock


def _deadline(clock: FakeClock, seconds: float = 600.0) -> Deadline:
    return Deadline.after(seconds, clock=clock.monotonic)


def test_a_healthy_update_polls_its_task_and_reads_the_new_version() -> None:
    d, clock = _make()
    lines: list[str] = []
    after = d.update_firmware(
        IMAGE, targets=("BIOS",), deadline=_deadline(clock), bounds=BOUNDS, progress=lines.append
    )
    assert {c.id: c.version for c in after}["BIOS"] == "bios-2.bin"
    assert clock.sleeps == [1.0, 1.0]
    assert lines == [
        "update taken (task: fake-task/1)",
        "task New 0%",
        "task Running 50%",
        "task Completed 100%",
    ]


def test_a_bmc_rebooting_mid_update_is_waited_for_three_good_answers() -> None:
    """The BMC goes down as the update lands (t=2) for 12 s: asked every 5 s
    from the failed read, back at 14, three answers in a row, then the task."""
    d, clock = _make({"effect": "update_reboot", "operation": "firmware.update", "duration": 12})
    lines: list[str] = []
    d.update_firmware(IMAGE, deadline=_deadline(clock), bounds=BOUNDS, progress=lines.append)
    # 0.01: a refused connection answers quickly (FakeDriver)
    assert clock.sleeps == [1.0, 1.0, 0.01, 5.0, 0.01, 5.0, 0.01, 5.0, 5.0, 5.0]
    assert lines[-5:] == [
        "BMC not answering (rebooting?): waiting for it",
        "BMC answers (1 of 3)",
        "BMC answers (2 of 3)",
        "BMC answers (3 of 3)",
        "task Completed 100%",
    ]


def test_a_bmc_away_past_its_bound_is_not_back_chained_from_the_last_refusal() -> None:
    d, clock = _make({"effect": "update_reboot", "operation": "firmware.update", "duration": 99})
    bounds = UpdateBounds(task=10.0, poll=1.0, back=12.0, good=3, interval=5.0)
    with pytest.raises(BMCNotBack) as info:
        d.update_firmware(IMAGE, deadline=_deadline(clock), bounds=bounds)
    assert isinstance(info.value.__cause__, BMCUnreachable)
    assert info.value.operation == "firmware.update"
    assert "0 of 3 answers in a row within 12s" in str(info.value)


def test_a_task_running_past_its_bound_is_stuck_and_left_alone() -> None:
    d, clock = _make({"effect": "task_hang", "operation": "firmware.update"})
    with pytest.raises(TaskStuck) as info:
        d.update_firmware(IMAGE, deadline=_deadline(clock), bounds=BOUNDS)
    assert "Running after 10.0s (its bound" in str(info.value)
    assert sum(clock.sleeps) == pytest.approx(10.0)
    assert len(d.machine.updates) == 1  # never restarted


def test_the_deadline_ends_a_long_task_as_stuck_never_later() -> None:
    d, clock = _make({"effect": "task_hang", "operation": "firmware.update"})
    start = clock.monotonic()
    with pytest.raises(TaskStuck, match="the deadline"):
        d.update_firmware(IMAGE, deadline=_deadline(clock, 3.5), bounds=BOUNDS)
    assert clock.monotonic() - start <= 3.5


def test_a_rejected_image_stops_at_once_through_the_retry() -> None:
    d, clock = _make({"effect": "update_rejected", "operation": "firmware.update"})
    retrying = RetryingDriver(d, RetryLimits(sleep=clock.sleep, clock=clock.monotonic))
    with pytest.raises(RequestRejected):
        retrying.update_firmware(IMAGE, deadline=_deadline(clock), bounds=BOUNDS)
    assert clock.sleeps == [1.0, 1.0]  # the polls; the rejection is never asked again


def test_an_image_post_that_timed_out_is_never_sent_again() -> None:
    d, clock = _make({"effect": "hang", "operation": "firmware.update"})
    retrying = RetryingDriver(d, RetryLimits(sleep=clock.sleep, clock=clock.monotonic))
    with pytest.raises(BMCTimeout):
        retrying.update_firmware(IMAGE, deadline=_deadline(clock), bounds=BOUNDS)
    assert d.machine.updates == []  # the hang answered nothing: nothing taken, nothing resent


def test_a_bmc_reset_waits_for_three_answers_in_a_row() -> None:
    d, clock = _make()
    lines: list[str] = []
    waited = d.reset_bmc(deadline=_deadline(clock), bounds=BOUNDS, progress=lines.append)
    # down 12 s: asked at 5 and 10 (refused), back at 15, 20, 25
    assert clock.sleeps == [5.0, 0.01, 5.0, 0.01, 5.0, 5.0, 5.0]
    assert waited == pytest.approx(25.02)
    assert lines[0] == "reset taken: waiting for the BMC"


def test_a_bmc_reset_past_the_bound_is_not_back() -> None:
    d, clock = _make()
    start = clock.monotonic()
    with pytest.raises(BMCNotBack):
        d.reset_bmc(deadline=_deadline(clock), bounds=UpdateBounds(back=11.0, good=3, interval=5.0))
    assert clock.monotonic() - start <= 11.0


# -- the Redfish side --------------------------------------------------------------------

ROOT = {"UpdateService": {"@odata.id": "/redfish/v1/UpdateService"}}
INVENTORY = {
    "Members": [
        {"@odata.id": "/redfish/v1/UpdateService/FirmwareInventory/BIOS"},
        {"@odata.id": "/redfish/v1/UpdateService/FirmwareInventory/BMC"},
    ]
}


def _reader(service: dict[str, Any]) -> Any:
    bodies = {
        "/redfish/v1/UpdateService": service,
        "/redfish/v1/UpdateService/FirmwareInventory": INVENTORY,
    }
    return lambda path: Resource(path, bodies[path])


SIMPLE = {
    "FirmwareInventory": {"@odata.id": "/redfish/v1/UpdateService/FirmwareInventory"},
    "Actions": {
        "#UpdateService.SimpleUpdate": {
            "target": "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
            "TransferProtocol@Redfish.AllowableValues": ["HTTP", "HTTPS"],
        }
    },
    "MultipartHttpPushUri": "/redfish/v1/UpdateService/upload",
}


def test_simple_update_is_preferred_with_targets_as_inventory_paths() -> None:
    request = rf.request_for(_reader(SIMPLE), ROOT, "https://img/bios.bin", ("BIOS",))
    assert request.path.endswith("UpdateService.SimpleUpdate")
    assert request.kw == {
        "data": {
            "ImageURI": "https://img/bios.bin",
            "Targets": ["/redfish/v1/UpdateService/FirmwareInventory/BIOS"],
            "TransferProtocol": "HTTPS",
        }
    }


def test_a_push_only_service_gets_the_local_image_as_multipart(tmp_path: Any) -> None:
    image = tmp_path / "bmc-2.0.tar"
    image.write_bytes(b"IMAGE")
    push_only = {k: v for k, v in SIMPLE.items() if k != "Actions"}
    request = rf.request_for(_reader(push_only), ROOT, f"file://{image}", ("BMC",))
    assert request.path == "/redfish/v1/UpdateService/upload"
    files = request.kw["files"]
    assert files["UpdateFile"] == ("bmc-2.0.tar", b"IMAGE", "application/octet-stream")
    assert json.loads(files["UpdateParameters"][1])["Targets"] == [
        "/redfish/v1/UpdateService/FirmwareInventory/BMC"
    ]
    with pytest.raises(InputError, match="pushed images only"):
        rf.request_for(_reader(push_only), ROOT, "http://img/bmc.tar", ())


def test_an_unknown_target_is_bad_input_naming_what_the_bmc_lists() -> None:
    with pytest.raises(InputError, match=r"'NIC9'.*BIOS, BMC"):
        rf.request_for(_reader(SIMPLE), ROOT, IMAGE, ("NIC9",))


def test_a_service_without_either_request_is_missing() -> None:
    with pytest.raises(rf.Missing):
        rf.request_for(_reader({}), ROOT, IMAGE, ())
    with pytest.raises(rf.Missing):
        rf.request_for(_reader({}), {}, IMAGE, ())


def _response(status: int, body: Any = None, location: str | None = None) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response._content = b"" if body is None else json.dumps(body).encode()
    if location:
        response.headers["Location"] = location
    return response


def test_what_to_follow_task_body_job_location_or_nothing() -> None:
    task = {"@odata.id": "/redfish/v1/TaskService/Tasks/3", "TaskState": "New"}
    assert rf.task_of(_response(202, task), ()).path == "/redfish/v1/TaskService/Tasks/3"
    job = rf.task_of(_response(202, None, "https://bmc/redfish/v1/Managers/iDRAC/Jobs/JID_1"), ())
    assert (job.kind, job.path) == ("job", "/redfish/v1/Managers/iDRAC/Jobs/JID_1")
    assert rf.task_of(_response(204), ("BIOS",)).kind == "none"


def test_task_and_job_states_in_redfish_words() -> None:
    running = {"TaskState": "Running", "PercentComplete": 40, "Messages": []}
    assert rf.task_status(_response(200, running))[0].percent == 40
    status, bad = rf.task_status(_response(200, {"JobState": "Scheduled"}))
    assert (status.state, bad) == ("Pending", False)
    failed = {"JobState": "Failed", "MessageId": "IDRAC.2.8.RED007", "Message": "bad image"}
    status, bad = rf.task_status(_response(200, failed))
    assert (status.state, bad, status.messages) == (
        "Exception",
        True,
        ("IDRAC.2.8.RED007: bad image",),
    )
    assert rf.task_status(_response(204)) == (rf.TaskStatus("Completed", 100), False)
    critical = {"TaskState": "Completed", "TaskStatus": "Critical"}
    assert rf.task_status(_response(200, critical))[1] is True


def _build(cls: type[BMCFault], message: str, **kw: Any) -> BMCFault:
    return cls(message, node="n1", **kw)


def test_a_failed_task_is_typed_by_its_message() -> None:
    refused = map_task("Exception", ["Update.1.0.VerificationFailed: bad signature"], _build)
    assert isinstance(refused, RequestRejected)
    other = map_task("Killed", ["Task.1.0.TaskAborted: aborted"], functools.partial(_build))
    assert type(other) is BMCInternalError


def test_manager_reset_prefers_a_graceful_restart() -> None:
    def manager(allowed: Any) -> dict[str, Any]:
        action: dict[str, Any] = {"target": "/m/Actions/Manager.Reset"}
        if allowed is not None:
            action["ResetType@Redfish.AllowableValues"] = allowed
        return {"Actions": {"#Manager.Reset": action}}

    assert rf.manager_reset(manager(None))[1] == {"ResetType": "GracefulRestart"}
    assert rf.manager_reset(manager(["ForceRestart"]))[1] == {"ResetType": "ForceRestart"}
    with pytest.raises(rf.Missing):
        rf.manager_reset(manager(["ResetAll"]))
    with pytest.raises(rf.Missing):
        rf.manager_reset({})


def test_a_hung_update_holds_up_no_later_one() -> None:
    """The matrix runs every update effect on one machine: after task_hang
    (a task that never ends) the next update still lands."""
    d, clock = _make({"effect": "task_hang", "operation": "firmware.update", "times": 1})
    with pytest.raises(TaskStuck):
        d.update_firmware(IMAGE, deadline=_deadline(clock), bounds=BOUNDS)
    after = d.update_firmware("http://img/bios-3.bin", deadline=_deadline(clock), bounds=BOUNDS)
    assert {c.id: c.version for c in after}["BIOS"] == "bios-3.bin"
