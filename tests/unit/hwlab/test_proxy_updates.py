"""The firmware update effects on a Redfish proxy (issue 51): SimpleUpdate
answered 202 with a task the proxy serves itself, on its clock, as hwlab's
engine serves its own (one document, :func:`bmaas.hwlab.redfish.tasks.task`);
``update_reboot`` with the new version relayed; an IPMI proxy refuses them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bmaas.fakes.effects import Firing, decide
from bmaas.fakes.faults import Effect, FaultRule
from bmaas.faults import InputError
from bmaas.hwlab.http import Request, Response
from bmaas.hwlab.proxy import updates
from bmaas.hwlab.proxy.effects import ACKNOWLEDGED, check_rule

POST = "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate"
BODY = {"ImageURI": "http://127.0.0.1:9/fw/bios-2.0.bin", "Targets": ["/redfish/v1/Systems/n1"]}


def firing(effect: str, **params: Any) -> Firing:
    rule = FaultRule.from_dict({"effect": effect, "operation": "firmware.update", **params})
    return Firing(0.0, "n1", "redfish", "firmware.update", Effect(effect), "r", rule.params)


def request(method: str, path: str, body: dict[str, Any] | None = None) -> Request:
    data = json.dumps(body).encode() if body is not None else b""
    return Request(method, path, "HTTP/1.1", [("Host", "bmc")], data)


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def task_at(book: updates.Updates, clock: Clock, at: float, path: str) -> dict[str, Any]:
    clock.now = at
    answer = book.answer(request("GET", path))
    assert answer is not None
    assert answer.status == 200
    return dict(json.loads(answer.body))


def taken(effect: str, **params: Any) -> tuple[updates.Updates, Clock, Response]:
    clock = Clock()
    book = updates.Updates(clock)
    answer = book.take(firing(effect, **params), request("POST", POST, BODY))
    assert answer is not None
    return book, clock, answer


def test_a_hung_task_reads_running_for_ever() -> None:
    book, clock, answer = taken("task_hang")
    path = "/redfish/v1/TaskService/Tasks/hwlab-proxy-1"
    assert (answer.status, answer.header("Location")) == (202, path)
    assert json.loads(answer.body)["TaskState"] == "New"
    assert task_at(book, clock, 10_000.0, path)["TaskState"] == "Running"


def test_a_rejected_image_ends_exception_with_the_update_registry_message() -> None:
    book, clock, answer = taken("update_rejected")
    path = str(answer.header("Location"))
    assert task_at(book, clock, 100.2, path)["TaskState"] == "Running"
    task = task_at(book, clock, 100.0 + updates.UPDATE_TIME, path)
    assert (task["TaskState"], task["TaskStatus"]) == ("Exception", "Critical")
    assert task["Messages"][-1]["MessageId"] == "Update.1.0.VerificationFailed"
    assert "bios-2.0.bin" in task["Messages"][-1]["Message"]


def test_an_unchanged_version_completes_and_a_reboot_completes_once_back() -> None:
    book, clock, answer = taken("version_unchanged")
    task = task_at(book, clock, 100.0 + updates.UPDATE_TIME, str(answer.header("Location")))
    assert (task["TaskState"], task["TaskStatus"]) == ("Completed", "OK")
    rule = firing("update_reboot", duration=3.0, version="old")
    clock.now = 200.0  # taken now: it lands at once, the BMC down 3 s
    answer = book.take(rule, request("POST", POST, BODY))
    assert answer is not None
    path = str(answer.header("Location"))
    assert path.endswith("hwlab-proxy-2")
    assert task_at(book, clock, 202.9, path)["TaskState"] == "Running"
    assert task_at(book, clock, 203.0, path)["TaskState"] == "Completed"
    assert updates.reboot_after(rule, answer) == 3.0


def test_a_new_version_through_a_reboot_is_the_bmcs_own_update() -> None:
    rule = firing("update_reboot", duration=3.0)
    book = updates.Updates(Clock())
    assert book.take(rule, request("POST", POST, BODY)) is None  # relayed
    assert updates.reboot_after(rule, Response(204)) == 3.0
    assert updates.reboot_after(rule, Response(500)) is None  # refused: no reboot
    assert updates.reboot_after(firing("task_hang"), Response(202)) is None


def test_only_its_own_tasks_are_answered_and_a_post_without_an_image_is_relayed() -> None:
    book, _clock, _answer = taken("task_hang")
    assert book.answer(request("GET", "/redfish/v1/TaskService/Tasks/42")) is None
    assert book.answer(request("GET", "/redfish/v1/TaskService/Tasks/hwlab-proxy-2")) is None
    assert book.answer(request("DELETE", "/redfish/v1/TaskService/Tasks/hwlab-proxy-1")) is None
    assert book.take(firing("task_hang"), request("POST", POST, {"Targets": []})) is None


def test_the_redfish_proxy_takes_update_rules_and_the_ipmi_proxy_refuses_them() -> None:
    for effect in updates.EFFECTS:
        rule = FaultRule.from_dict({"effect": str(effect), "operation": "firmware.update"})
        check_rule(rule, "redfish", credentials=False, where="rules[0]")
        with pytest.raises(InputError, match="hardware"):
            check_rule(rule, "ipmi", credentials=True, where="rules[0]")
    action = decide(
        [firing("version_unchanged")], machine=False, acknowledge=ACKNOWLEDGED["redfish"]
    )
    assert action.answer is not None
    assert not action.skipped
