"""Firmware updates and the BMC's own reset over Redfish (issue 51): which
request the service takes, and what its task says.

Which request the service takes (``SimpleUpdate``, else
``MultipartHttpPushUri``), the targets, what is followed (a Task, a Dell job,
a ``Location``) and how a task read is typed: docs/lifecycle.md, "Firmware
updates and BMC resets". The BMC's reset is ``#Manager.Reset`` on the
system's Manager (found as virtual media finds it), ``GracefulRestart`` where
allowed, else ``ForceRestart``.

Requests: an update reads the root's UpdateService (1 GET), the firmware
inventory collection (1 GET) when targets are named, then 1 POST; a task
read is 1 GET; a reset reads the Manager (1 GET) and POSTs once.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import requests
from sushy import exceptions as sushy_exc

from bmaas.drivers.redfish.lifecycle import SYSTEM_BIOS, Missing, system_bios
from bmaas.drivers.redfish.preconditions import Resource
from bmaas.faults import InputError
from bmaas.files import read_limited
from bmaas.hardware import TaskStatus, UpdateTask

__all__ = [
    "MAX_IMAGE_BYTES",
    "Missing",
    "Request",
    "manager_reset",
    "request_for",
    "task_of",
    "task_status",
]

Reader = Callable[[str], Resource]

#: the largest image a multipart push reads into memory (BMC images are tens
#: of MiB; a whole-disk image given by mistake is refused, never read)
MAX_IMAGE_BYTES = 512 * 1024 * 1024

#: a vendor job's state in Redfish TaskState's words (Dell iDRAC's JobState)
JOB_STATES = {
    "New": "New",
    "Scheduled": "Pending",
    "Scheduling": "Pending",
    "Waiting": "Pending",
    "Downloading": "Running",
    "Downloaded": "Running",
    "Running": "Running",
    "ReadyForExecution": "Running",
    "Completed": "Completed",
    "Failed": "Exception",
    "CompletedWithErrors": "Exception",
    "Paused": "Suspended",
}

#: the reset types tried for ``Manager.Reset``, gentlest first
RESET_TYPES = ("GracefulRestart", "ForceRestart")


def _action(body: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The resource's action ``name`` ({} when it lists none)."""
    actions = body.get("Actions")
    action = actions.get(name) if isinstance(actions, dict) else None
    return action if isinstance(action, dict) else {}


def _link(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    path = value.get("@odata.id") if isinstance(value, dict) else None
    return path if isinstance(path, str) and path else None


class Request:
    """One update request as the service takes it: ``send(post)`` makes the
    one POST through the caller's connector (``post(path, **kw)``)."""

    def __init__(self, path: str, **kw: Any) -> None:
        self.path = path
        self.kw = kw

    def send(self, post: Callable[..., requests.Response]) -> requests.Response:
        return post(self.path, **self.kw)


def _paths(
    read: Reader,
    service: Mapping[str, Any],
    targets: tuple[str, ...],
    system: Callable[[], Resource] | None,
) -> list[str]:
    """The inventory members' paths for component ids (every id checked)."""
    if not targets:
        return []
    inventory = _link(service, "FirmwareInventory")
    listed: dict[str, str] = {}
    try:
        members = read(inventory).body.get("Members") if inventory is not None else None
    except sushy_exc.ResourceNotFoundError:
        members = None  # linked, not served (sushy-tools)
    for member in members or []:
        path = member.get("@odata.id") if isinstance(member, dict) else None
        if isinstance(path, str):
            listed[path.rstrip("/").rsplit("/", 1)[-1]] = path
    bios = system_bios(system) if members is None else None
    if bios is not None:
        listed[SYSTEM_BIOS] = bios[0]
    unknown = [t for t in targets if t not in listed]
    if unknown:
        raise InputError(
            f"no firmware component {', '.join(map(repr, unknown))} (the BMC lists: "
            f"{', '.join(listed) or 'none'})",
            field="targets",
        )
    return [listed[t] for t in targets]


def _image_file(image: str) -> tuple[str, bytes]:
    parts = urllib.parse.urlsplit(image)
    if parts.scheme not in ("", "file"):
        raise InputError(
            "the BMC takes pushed images only (MultipartHttpPushUri, no SimpleUpdate): "
            "give a local file (file:// or a path)",
            field="image",
        )
    path = urllib.parse.unquote(parts.path) if parts.scheme == "file" else image
    try:
        return os.path.basename(path) or "image", read_limited(path, limit=MAX_IMAGE_BYTES)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the image {path!r}: {exc}", field="image") from exc


def request_for(
    read: Reader,
    root: Mapping[str, Any],
    image: str,
    targets: tuple[str, ...],
    system: Callable[[], Resource] | None = None,
) -> Request:
    """The update request this service takes for ``image`` (see the table);
    ``system`` reads the System (a service without an inventory)."""
    service_path = _link(root, "UpdateService")
    if service_path is None:
        raise Missing("the service has no UpdateService")
    service = read(service_path).body
    paths = _paths(read, service, targets, system)
    action = _action(service, "#UpdateService.SimpleUpdate")
    target = action.get("target")
    if isinstance(target, str) and target:
        body: dict[str, Any] = {"ImageURI": image}
        if paths:
            body["Targets"] = paths
        allowed = action.get("TransferProtocol@Redfish.AllowableValues")
        scheme = urllib.parse.urlsplit(image).scheme.upper()
        if isinstance(allowed, list) and scheme in allowed:
            body["TransferProtocol"] = scheme
        return Request(target, data=body)
    push = service.get("MultipartHttpPushUri")
    if isinstance(push, str) and push:
        name, data = _image_file(image)
        parameters = json.dumps({"Targets": paths, "@Redfish.OperationApplyTime": "Immediate"})
        files = {
            "UpdateParameters": (None, parameters, "application/json"),
            "UpdateFile": (name, data, "application/octet-stream"),
        }
        return Request(push, files=files)
    raise Missing("the UpdateService offers neither SimpleUpdate nor MultipartHttpPushUri")


def _body(response: requests.Response) -> dict[str, Any]:
    if response.status_code == 204 or not response.content:
        return {}
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def task_of(response: requests.Response, targets: tuple[str, ...]) -> UpdateTask:
    """What to follow after the service took the request (see the table)."""
    body = _body(response)
    path = body.get("@odata.id") if ("TaskState" in body or "JobState" in body) else None
    if not isinstance(path, str) or not path:
        location = response.headers.get("Location") or ""
        path = urllib.parse.urlsplit(location).path or None
    if path is None:
        return UpdateTask("none", None, targets)
    kind = "job" if "JobState" in body or "/Jobs/" in path else "task"
    return UpdateTask(kind, path, targets)


def task_status(response: requests.Response) -> tuple[TaskStatus, bool]:
    """A task read: its status, and whether it ended badly."""
    body = _body(response)
    if not body:  # a TaskMonitor past its task: 204, or the operation's empty answer
        return TaskStatus("Completed", 100), False
    state = body.get("TaskState")
    if not isinstance(state, str):
        job = body.get("JobState")
        state = JOB_STATES.get(job, "Running") if isinstance(job, str) else "Running"
    percent = body.get("PercentComplete")
    messages = [
        f"{m.get('MessageId')}: {m.get('Message')}"
        for m in body.get("Messages") or []
        if isinstance(m, dict)
    ]
    if "JobState" in body and body.get("MessageId"):
        messages.append(f"{body.get('MessageId')}: {body.get('Message')}")
    bad = state in ("Exception", "Killed", "Cancelled") or (
        state == "Completed" and body.get("TaskStatus") == "Critical"
    )
    whole = percent if isinstance(percent, int) and not isinstance(percent, bool) else None
    return TaskStatus(state, whole, tuple(messages)), bad


def manager_reset(manager: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The Manager's reset action and the body to send (see the table)."""
    action = _action(manager, "#Manager.Reset")
    target = action.get("target")
    if not isinstance(target, str) or not target:
        raise Missing("the Manager offers no Manager.Reset")
    allowed = action.get("ResetType@Redfish.AllowableValues")
    if not isinstance(allowed, list):
        return target, {"ResetType": RESET_TYPES[0]}
    chosen = next((t for t in RESET_TYPES if t in allowed), None)
    if chosen is None:
        raise Missing(f"Manager.Reset allows no restart ({', '.join(map(str, allowed))})")
    return target, {"ResetType": chosen}
