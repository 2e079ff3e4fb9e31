"""BIOS settings, the attribute registry, the firmware inventory and the
machine's parts, from the machine's live state (issue 51).

Served alike for the default service and every vendor shape (the HTTP
layer asks :func:`serve` first; None: not one of these resources); the
resources and what each serves are tabled in docs/lab.md ("BIOS, firmware
inventory and parts"). A password attribute reads ``null`` everywhere
(DSP0266). A PATCH is checked against the registry as bmaas checks it
(:func:`bmaas.hardware.check_bios_changes`), so the lab cannot take what
bmaas would refuse. The hardware effects that fired on the request
(``bios_pending``, ``bios_partial``) go to the machine after the request is
carried out; the update effects on a ``SimpleUpdate`` shape the update it
takes (:mod:`bmaas.fakes.firmware`). A Dell shape (``Shape.update_jobs``)
reports the update as a job in iDRAC's queue (:mod:`bmaas.hwlab.redfish.jobs`).
"""

from __future__ import annotations

import functools
import json
import re
import urllib.parse
from collections.abc import Callable
from typing import Any

from bmaas.fakes.faults import Firing
from bmaas.faults import InputError
from bmaas.hardware import APPLY_TIMES, FirmwareComponent, check_bios_changes
from bmaas.hwlab.http import Request, error_body
from bmaas.hwlab.redfish import jobs, standard, tasks
from bmaas.hwlab.redfish.bmc import Bmc, Rendered

__all__ = ["REGISTRY", "serve", "settings_path"]

#: the attribute registry's name (``Bios.AttributeRegistry``) and its file's id
REGISTRY = "BiosAttributeRegistryHwlab.1.0.0"
_REGISTRIES = "/redfish/v1/Registries"
_UPDATE = "/redfish/v1/UpdateService"
_INVENTORY = f"{_UPDATE}/FirmwareInventory"
_SIMPLE_UPDATE = f"{_UPDATE}/Actions/UpdateService.SimpleUpdate"
_ACTION_INFO = f"{_UPDATE}/SimpleUpdateActionInfo"
_TASK_SERVICE = "/redfish/v1/TaskService"
_TASKS = f"{_TASK_SERVICE}/Tasks"
#: the transfer protocols SimpleUpdate takes (the ImageURI's scheme)
PROTOCOLS = ("HTTP", "HTTPS")

#: an answer before headers: status, JSON body (None: no body), Allow
_Answer = standard.Answer
_OK = {"State": "Enabled", "Health": "OK"}


def system_path(bmc: Bmc) -> str:
    return bmc.shape.shape.system_path if bmc.shape is not None else bmc.system_path


def settings_path(bmc: Bmc) -> str:
    """The BIOS settings object: ``Bios/Settings`` (DMTF, Dell...), ``Bios/Pending`` (Lenovo)."""
    leaf = bmc.shape.shape.bios_settings if bmc.shape is not None else "Settings"
    return f"{system_path(bmc)}/Bios/{leaf}"


def serve(bmc: Bmc, request: Request, hardware: list[Firing]) -> Rendered | None:
    """The answer to ``request`` when it is one of these resources, else None."""
    path = urllib.parse.unquote(request.path).rstrip("/")
    system = system_path(bmc)
    if path == _SIMPLE_UPDATE:
        return _simple_update(bmc, request, hardware)
    bmc.machine.firmware_now()  # land every firmware update due by now
    route = _route(bmc, system, path)
    if route is None:
        return None
    bmc.machine.power_state()  # land every boot due by now: it applies what was pending
    method = "GET" if request.method == "HEAD" else request.method
    get, patch = route
    allow = ("GET", "PATCH") if patch is not None else ("GET",)
    if method == "GET":
        answer: _Answer = (200, get(), allow)
    elif method == "PATCH" and patch is not None:
        refused = standard.precondition_failed(
            request, lambda: standard.render((200, get(), allow))
        )
        answer = patch(request.body) if refused is None else (0, None, ())
        if refused is not None:
            bmc.machine.apply(hardware)
            return refused
    else:
        answer = _error(405, "Base.1.8.OperationNotAllowed", f"{method} on {path}", allow)
    bmc.machine.apply(hardware)
    code, headers, data = standard.render(answer)
    return code, headers, b"" if request.method == "HEAD" else data


_Route = tuple[Callable[[], dict[str, Any]], Callable[[bytes], _Answer] | None]


def _route(bmc: Bmc, system: str, path: str) -> _Route | None:
    machine = bmc.machine
    fixed: dict[str, _Route] = {
        f"{system}/Bios": (lambda: _bios(bmc), None),
        settings_path(bmc): (lambda: _settings(bmc), lambda raw: _patch(bmc, raw)),
        _REGISTRIES: (
            lambda: standard.collection(
                _REGISTRIES, "MessageRegistryFile", [f"{_REGISTRIES}/{REGISTRY}"]
            ),
            None,
        ),
        f"{_REGISTRIES}/{REGISTRY}": (_registry_file, None),
        f"{_REGISTRIES}/{REGISTRY}/Registry": (lambda: _registry(bmc), None),
        _UPDATE: (_update_service, None),
        _ACTION_INFO: (_action_info, None),
        _TASK_SERVICE: (_task_service, None),
        _TASKS: (
            lambda: standard.collection(
                _TASKS, "Task", [f"{_TASKS}/{u.number}" for u in machine.updates]
            ),
            None,
        ),
        _INVENTORY: (
            lambda: standard.collection(
                _INVENTORY, "SoftwareInventory", [f"{_INVENTORY}/{c.id}" for c in machine.firmware]
            ),
            None,
        ),
    }
    for component in machine.firmware:
        fixed[f"{_INVENTORY}/{component.id}"] = (functools.partial(_component, component), None)
    for update in machine.updates:
        fixed[f"{_TASKS}/{update.number}"] = (functools.partial(_task, bmc, update.number), None)
    queue = jobs.jobs_path(bmc)
    if queue is not None:  # iDRAC: the updates are the job queue's jobs, not tasks
        fixed[queue] = (functools.partial(jobs.collection, bmc, queue), None)
        for update in machine.updates:
            job = functools.partial(jobs.job, bmc, queue, update.number)
            fixed[jobs.job_path(queue, update.number)] = (job, None)
    for kind, members in _parts(bmc, system).items():
        base = f"{system}/{_PARTS[kind][0]}"
        fixed[base] = (functools.partial(standard.collection, base, kind, list(members)), None)
        for member, body in members.items():
            fixed[member] = (functools.partial(dict, body), None)
    return fixed.get(path)


def _error(status: int, message_id: str, message: str, allow: tuple[str, ...] = ()) -> _Answer:
    return status, error_body(message_id, message), allow


# -- BIOS ---------------------------------------------------------------------------------


def _shown(bmc: Bmc, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with every password attribute's value null."""
    registry = bmc.machine.bios.registry or {}
    return {
        name: None if (info := registry.get(name)) is not None and info.type == "Password" else v
        for name, v in values.items()
    }


def _bios(bmc: Bmc) -> dict[str, Any]:
    settings = bmc.machine.bios.settings()
    return {
        "@odata.type": "#Bios.v1_2_0.Bios",
        "@odata.id": f"{system_path(bmc)}/Bios",
        "Id": "Bios",
        "Name": "BIOS Configuration Current Settings",
        "AttributeRegistry": REGISTRY,
        "Attributes": _shown(bmc, settings.current),
        "@Redfish.Settings": {
            "@odata.type": "#Settings.v1_3_5.Settings",
            "SettingsObject": standard.link(settings_path(bmc)),
            "SupportedApplyTimes": list(settings.apply_times),
        },
    }


def _settings(bmc: Bmc) -> dict[str, Any]:
    settings = bmc.machine.bios.settings()
    return {
        "@odata.type": "#Bios.v1_2_0.Bios",
        "@odata.id": settings_path(bmc),
        "Id": settings_path(bmc).rsplit("/", 1)[-1],
        "Name": "BIOS Configuration Pending Settings",
        "AttributeRegistry": REGISTRY,
        "Attributes": _shown(bmc, settings.pending),
    }


def _patch(bmc: Bmc, raw: bytes) -> _Answer:
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        body = None
    changes = body.get("Attributes") if isinstance(body, dict) else None
    if not isinstance(changes, dict) or not changes:
        return _error(400, "Base.1.8.PropertyMissing", "Attributes names no attribute to change")
    when = body.get("@Redfish.SettingsApplyTime") or {}
    apply_time = when.get("ApplyTime", "OnReset") if isinstance(when, dict) else None
    offered = bmc.machine.bios.settings().apply_times
    problems = []
    if apply_time not in offered or apply_time not in APPLY_TIMES:
        problems.append(f"ApplyTime {apply_time!r} is not one of {', '.join(offered)}")
    try:
        check_bios_changes(changes, bmc.machine.bios.registry)
    except InputError as exc:
        problems += [str(p) for p in getattr(exc, "problems", ())] or [str(exc)]
    if problems:
        return _error(400, "Base.1.8.PropertyValueNotInList", "; ".join(problems))
    bmc.machine.bios.stage(changes, immediate=apply_time == "Immediate")
    return 204, None, ()


def _registry_file() -> dict[str, Any]:
    return {
        "@odata.type": "#MessageRegistryFile.v1_1_0.MessageRegistryFile",
        "@odata.id": f"{_REGISTRIES}/{REGISTRY}",
        "Id": REGISTRY,
        "Name": "hwlab BIOS Attribute Registry File",
        "Languages": ["en"],
        "Registry": REGISTRY,
        "Location": [{"Language": "en", "Uri": f"{_REGISTRIES}/{REGISTRY}/Registry"}],
    }


def _registry(bmc: Bmc) -> dict[str, Any]:
    """DSP2046's AttributeRegistry: one entry per attribute of the BIOS."""
    model = bmc.hardware.model
    entries = []
    for name, info in (bmc.machine.bios.registry or {}).items():
        entry: dict[str, Any] = {
            "AttributeName": name,
            "DisplayName": name,
            "HelpText": f"{name} ({info.type})",
            "Type": info.type,
            "ReadOnly": info.read_only,
        }
        if info.allowed:
            entry["Value"] = [{"ValueName": v, "ValueDisplayName": v} for v in info.allowed]
        if info.lower is not None:
            entry["LowerBound"] = info.lower
        if info.upper is not None:
            entry["UpperBound"] = info.upper
        if info.type == "Integer":
            entry["ScalarIncrement"] = 1
        if info.max_length is not None:
            entry["MaxLength"] = info.max_length
        entries.append(entry)
    return {
        "@odata.type": "#AttributeRegistry.v1_3_0.AttributeRegistry",
        "@odata.id": f"{_REGISTRIES}/{REGISTRY}/Registry",
        "Id": REGISTRY,
        "Name": "hwlab BIOS Attribute Registry",
        "Language": "en",
        "OwningEntity": "hwlab",
        "RegistryVersion": "1.0.0",
        # SystemId: letters and digits only (the schema's pattern)
        "SupportedSystems": [
            {"ProductName": model, "SystemId": re.sub("[^A-Za-z0-9]", "", model) or "hwlab"}
        ],
        "RegistryEntries": {"Attributes": entries},
    }


# -- firmware and parts -------------------------------------------------------------------


def _component(component: FirmwareComponent) -> dict[str, Any]:
    return {
        "@odata.type": "#SoftwareInventory.v1_4_0.SoftwareInventory",
        "@odata.id": f"{_INVENTORY}/{component.id}",
        "Id": component.id,
        "Name": component.name,
        "Version": component.version,
        "Updateable": component.updateable,
        "Status": dict(_OK),
    }


def _update_service() -> dict[str, Any]:
    return {
        "@odata.type": "#UpdateService.v1_11_0.UpdateService",
        "@odata.id": _UPDATE,
        "Id": "UpdateService",
        "Name": "Update Service",
        "ServiceEnabled": True,
        "Status": dict(_OK),
        "FirmwareInventory": standard.link(_INVENTORY),
        "Actions": {
            "#UpdateService.SimpleUpdate": {
                "target": _SIMPLE_UPDATE,
                "@Redfish.ActionInfo": _ACTION_INFO,
                "TransferProtocol@Redfish.AllowableValues": list(PROTOCOLS),
            }
        },
    }


def _action_info() -> dict[str, Any]:
    return {
        "@odata.type": "#ActionInfo.v1_1_2.ActionInfo",
        "@odata.id": _ACTION_INFO,
        "Id": "SimpleUpdateActionInfo",
        "Name": "SimpleUpdate Action Info",
        "Parameters": [
            {"Name": "ImageURI", "Required": True, "DataType": "String"},
            {
                "Name": "TransferProtocol",
                "Required": False,
                "DataType": "String",
                "AllowableValues": list(PROTOCOLS),
            },
            {"Name": "Targets", "Required": False, "DataType": "StringArray"},
        ],
    }


def _task_service() -> dict[str, Any]:
    return {
        "@odata.type": "#TaskService.v1_1_5.TaskService",
        "@odata.id": _TASK_SERVICE,
        "Id": "TaskService",
        "Name": "Task Service",
        "ServiceEnabled": True,
        "Status": dict(_OK),
        "Tasks": standard.link(_TASKS),
    }


def _task(bmc: Bmc, number: int, at: float | None = None) -> dict[str, Any]:
    """The task of the machine's update ``number`` as it stands now (or at ``at``)."""
    _components, updates, now = bmc.machine.firmware_now()
    return tasks.task(f"{_TASKS}/{number}", updates[number - 1], now if at is None else at)


def _simple_update(bmc: Bmc, request: Request, hardware: list[Firing]) -> Rendered:
    """POST SimpleUpdate: 202, ``Location`` the task (iDRAC: its job, and no
    body); 400 naming every problem."""
    location = None
    if request.method != "POST":
        answer = _error(
            405, "Base.1.8.OperationNotAllowed", f"{request.method} on an action", ("POST",)
        )
    else:
        answer, location = _take_update(bmc, request.body, hardware)
    bmc.machine.apply(hardware)
    code, headers, data = standard.render(answer)
    if location is not None:
        headers.insert(0, ("Location", location))
    return code, headers, data


def _image_target(image: object, components: dict[str, Any]) -> str:
    """The member an update without ``Targets`` is for: a BMC reads it from
    the package (stock Ironic names no target on a one-system BMC); here the
    one whose id the image's file name starts with (``bmc-2.0.bin``), else
    the BIOS."""
    leaf = urllib.parse.urlsplit(image).path.rpartition("/")[2] if isinstance(image, str) else ""
    found = [path for path, c in components.items() if leaf.lower().startswith(c.id.lower())]
    return max(found, key=len) if found else f"{_INVENTORY}/BIOS"


def _take_update(bmc: Bmc, raw: bytes, hardware: list[Firing]) -> tuple[_Answer, str | None]:
    """The answer to a SimpleUpdate POST and the ``Location`` it names."""
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        body = None
    if not isinstance(body, dict) or "ImageURI" not in body:
        return _error(400, "Base.1.8.ActionParameterMissing", "SimpleUpdate needs ImageURI"), None
    image, protocol = body["ImageURI"], body.get("TransferProtocol")
    components = {f"{_INVENTORY}/{c.id}": c for c in bmc.machine.firmware_now()[0]}
    targets = body.get("Targets", [_image_target(image, components)])
    formats, values = [], []
    scheme = urllib.parse.urlsplit(image).scheme if isinstance(image, str) else ""
    if scheme.upper() not in PROTOCOLS or not urllib.parse.urlsplit(image).netloc:
        formats.append(f"ImageURI {image!r} is not an http or https URI")
    if protocol is not None and protocol not in PROTOCOLS:
        values.append(f"TransferProtocol {protocol!r} is not one of {', '.join(PROTOCOLS)}")
    if not isinstance(targets, list) or len(targets) != 1:
        values.append(f"Targets {targets!r}: name one FirmwareInventory member")
    elif targets[0] not in components or not components[targets[0]].updateable:
        values.append(f"Targets {targets[0]!r} is not an updateable FirmwareInventory member")
    if formats:
        problems = "; ".join(formats + values)
        return _error(400, "Base.1.8.ActionParameterValueFormatError", problems), None
    if values:
        return _error(400, "Base.1.8.PropertyValueNotInList", "; ".join(values)), None
    # the update effects (task_hang, update_rejected, ...) shape the update
    update = bmc.machine.update_firmware(components[targets[0]].id, image, hardware)
    queue = jobs.jobs_path(bmc)
    if queue is not None:
        return (202, None, ()), jobs.job_path(queue, update.number)
    task = _task(bmc, update.number, at=update.start)  # as taken: New
    return (202, task, ()), task["@odata.id"]


#: kind -> (the system's link, the member's @odata.type)
_PARTS = {
    "Processor": ("Processors", "#Processor.v1_0_0.Processor"),
    "Memory": ("Memory", "#Memory.v1_7_0.Memory"),
    "EthernetInterface": ("EthernetInterfaces", "#EthernetInterface.v1_4_0.EthernetInterface"),
    "SimpleStorage": ("SimpleStorage", "#SimpleStorage.v1_2_0.SimpleStorage"),
}


def _parts(bmc: Bmc, system: str) -> dict[str, dict[str, dict[str, Any]]]:
    """Every part's resource by its path, per kind (the machine's ``parts()``)."""
    parts = bmc.machine.parts()

    def member(kind: str, id_: str, **rest: Any) -> tuple[str, dict[str, Any]]:
        link, odata_type = _PARTS[kind]
        path = f"{system}/{link}/{id_}"
        return path, {"@odata.type": odata_type, "@odata.id": path, "Id": id_, **rest}

    found: dict[str, dict[str, dict[str, Any]]] = {}
    found["Processor"] = dict(
        member(
            "Processor",
            p.id,
            Name=p.id,
            ProcessorType="CPU",
            ProcessorArchitecture="x86",
            InstructionSet="x86-64",
            Model=p.model,
            TotalCores=p.cores,
            TotalThreads=p.threads,
            Status=dict(_OK),
        )
        for p in parts["processors"]
    )
    found["Memory"] = dict(
        member(
            "Memory",
            d.id,
            Name=d.id,
            CapacityMiB=d.size_mb,
            MemoryDeviceType=d.kind,
            Status=dict(_OK),
        )
        for d in parts["dimms"]
    )
    found["EthernetInterface"] = dict(
        member(
            "EthernetInterface",
            n.id,
            Name=n.id,
            MACAddress=n.mac,
            PermanentMACAddress=n.mac,
            SpeedMbps=n.speed_mbps,
            LinkStatus=n.link,
            Status=dict(_OK),
        )
        for n in parts["nics"]
    )
    devices = [
        {"Name": d.name, "Model": d.model, "CapacityBytes": d.size_bytes, "Status": dict(_OK)}
        for d in parts["disks"]
    ]
    found["SimpleStorage"] = dict(
        [member("SimpleStorage", "1", Name="Simple Storage Controller", Devices=devices)]
    )
    return found


def links(system: str) -> dict[str, dict[str, str]]:
    """What a ComputerSystem links here: its BIOS and its parts' collections."""
    return {
        "Bios": standard.link(f"{system}/Bios"),
        **{link: standard.link(f"{system}/{link}") for link, _type in _PARTS.values()},
    }
