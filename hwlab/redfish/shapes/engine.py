"""Serve a vendor shape from live state: one function per request.

:func:`serve` answers every request under ``/redfish/v1`` that is the
shape's (the service root, Systems, Managers, Chassis and what lies under
them); session, ``$metadata`` and OData requests fall through to the
default service (None), which serves them alike for every shape. The HTTP
layer (:mod:`bmaas.hwlab.redfish.answer`) has already counted the request,
evaluated the fault plan for its operation and carried out wire and BMC
effects; ``hardware`` effects (power never lands, boot not persisted...)
are handed to the machine exactly as the default service does.

Every answer has what the standard asks for: ``ETag`` and ``@odata.etag``
(a hash of what the resource shows, so it changes with it) on a GET, ``If-
Match`` on a PATCH checked against it (412), ``Allow`` on a GET and a 405,
``Link: rel=describedby``, ``OData-Version``, ``Cache-Control``.
"""

from __future__ import annotations

import functools
import json
import urllib.parse
from collections.abc import Callable
from typing import Any

from bmaas.driver import PowerAction, PowerState
from bmaas.fakes.faults import Firing
from bmaas.fakes.incidents import dell_body
from bmaas.hwlab.http import Request, error_body
from bmaas.hwlab.redfish import standard
from bmaas.hwlab.redfish.bmc import RESET_ACTIONS, Bmc, Rendered
from bmaas.hwlab.redfish.shapes import documents
from bmaas.hwlab.redfish.shapes.model import Shape, Slot
from bmaas.hwlab.redfish.shapes.state import Override, ShapeState

__all__ = ["serve"]

_ROOTS = ("/redfish/v1/Systems", "/redfish/v1/Managers", "/redfish/v1/Chassis")
#: iDRAC's answer to an insert into a slot the virtual console holds
_RAC0904 = dell_body(
    "IDRAC.2.9.RAC0904",
    "Virtual Media is detached or already in use.",
    "Make sure the Virtual Media is attached and not in use, and retry the operation.",
    "Warning",
)

#: an answer before headers: status, JSON body (None: no body), Allow
_Answer = standard.Answer


def serve(bmc: Bmc, state: ShapeState, request: Request, hardware: list[Firing]) -> Rendered | None:
    """The answer to ``request`` (None: not the shape's; the default service answers)."""
    path = urllib.parse.unquote(request.path).rstrip("/") or "/"
    if path != "/redfish/v1" and not path.startswith(_ROOTS):
        return None
    with state.lock:
        pending = list(hardware)

        def take() -> list[Firing]:
            taken = list(pending)
            pending.clear()
            return taken

        if request.method in ("GET", "HEAD") and pending:
            bmc.machine.apply(take())  # power_lost, seen by this very read
        if request.method == "PATCH":
            refused = standard.precondition_failed(
                request, lambda: standard.render(_route(bmc, state, "GET", path, None, take))
            )
            if refused is not None:
                bmc.machine.apply(take())
                return refused
        body = _json(request.body) if request.method in ("POST", "PATCH") else None
        method = "GET" if request.method == "HEAD" else request.method
        answer = _route(bmc, state, method, path, body, take)
        if pending:
            bmc.machine.apply(take())
    unsupported = _unsupported_query(state.shape, request.target)
    if unsupported and request.method in ("GET", "HEAD"):
        answer = _error(501, "Base.1.8.QueryNotSupported", f"{unsupported} is not supported")
    elif state.shape.select_query and request.method == "GET" and answer[0] == 200:
        answer = _selected(answer, request.target)
    code, headers, data = standard.render(answer)
    return code, headers, b"" if request.method == "HEAD" else data


#: what ``$select`` never leaves out (DSP0266 7.3: the resource's identity)
_ALWAYS = ("@odata.id", "@odata.type", "@odata.context", "@odata.etag")


def _unsupported_query(shape: Shape, target: str) -> str | None:
    """The first ``$`` query parameter the shape does not take (DSP0266 7.3:
    501), else None; ``$select`` where it advertises SelectQuery."""
    taken = ("$select",) if shape.select_query else ()
    query = urllib.parse.urlsplit(target).query
    for name, _value in urllib.parse.parse_qsl(query, keep_blank_values=True):
        if name.startswith("$") and name not in taken:
            return name
    return None


def _selected(answer: _Answer, target: str) -> _Answer:
    """``answer`` cut to the properties a ``$select`` names (top-level ones
    and ``Parent/Child`` paths), as DSP0266 7.3 asks; a name the resource
    does not have is left out (as the vendors' services do)."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query, keep_blank_values=True)
    wanted = query.get("$select")
    code, body, allow = answer
    if not wanted or body is None:
        return answer
    kept: dict[str, Any] = {k: body[k] for k in _ALWAYS if k in body}
    for name in (n.strip() for value in wanted for n in value.split(",")):
        head, _, rest = name.partition("/")
        if head not in body:
            continue
        if not rest:
            kept[head] = body[head]
        elif isinstance(body[head], dict) and rest in body[head]:
            kept.setdefault(head, {})[rest] = body[head][rest]
    return code, kept, allow


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw or b"{}")
    except ValueError:
        return None


def _error(status: int, message_id: str, message: str, allow: tuple[str, ...] = ()) -> _Answer:
    return status, error_body(message_id, message), allow


def _missing(path: str) -> _Answer:
    return _error(404, "Base.1.8.ResourceMissingAtURI", f"no resource at {path}")


def _route(
    bmc: Bmc,
    state: ShapeState,
    method: str,
    path: str,
    body: Any,
    take: Callable[[], list[Firing]],
) -> _Answer:
    shape = state.shape
    gets: dict[str, Callable[[], dict[str, Any]]] = {
        "/redfish/v1": lambda: documents.root(bmc, shape),
        "/redfish/v1/Systems": lambda: documents.collection(
            "/redfish/v1/Systems", "ComputerSystem", [shape.system_path]
        ),
        "/redfish/v1/Managers": lambda: documents.collection(
            "/redfish/v1/Managers", "Manager", [shape.manager_path]
        ),
        "/redfish/v1/Chassis": lambda: documents.collection(
            "/redfish/v1/Chassis", "Chassis", [f"/redfish/v1/Chassis/{shape.chassis_id}"]
        ),
        shape.manager_path: lambda: documents.manager(bmc, shape),
        f"/redfish/v1/Chassis/{shape.chassis_id}": lambda: documents.chassis(bmc, shape),
    }
    if not shape.boot_override:  # its BootOptions, read-only
        options = f"{shape.system_path}/BootOptions"
        gets[options] = lambda: documents.collection(
            options, "BootOption", [f"{options}/{r}" for r in documents.BOOT_OPTIONS]
        )
        for reference in documents.BOOT_OPTIONS:
            gets[f"{options}/{reference}"] = functools.partial(
                documents.boot_option, shape, reference
            )
    if shape.reset_action_info and not shape.action_info_missing:
        gets[f"{shape.system_path}/ResetActionInfo"] = lambda: documents.reset_info(shape)
    if path in gets:
        return _read_only(method, gets[path])
    if path == shape.system_path:
        if method == "GET":
            return 200, documents.system(bmc, state), ("GET", "PATCH")
        if method == "PATCH":
            return _patch_boot(state, body, take)
        return _error(405, "Base.1.8.OperationNotAllowed", method, ("GET", "PATCH"))
    if path == f"{shape.system_path}/Actions/ComputerSystem.Reset":
        if method != "POST":
            return _error(405, "Base.1.8.OperationNotAllowed", method, ("POST",))
        return _reset(bmc, shape, body, take)
    base = shape.vmedia_path
    if base is not None and (path == base or path.startswith(base + "/")):
        return _vmedia(state, method, base, path[len(base) :], body)
    return _missing(path)


def _read_only(method: str, render: Callable[[], dict[str, Any]]) -> _Answer:
    if method != "GET":
        return _error(405, "Base.1.8.OperationNotAllowed", method, ("GET",))
    return 200, render(), ("GET",)


def _reset(bmc: Bmc, shape: Shape, body: Any, take: Callable[[], list[Firing]]) -> _Answer:
    reset = body.get("ResetType") if isinstance(body, dict) else None
    # Supermicro X13 lists GracefulShutdown and GracefulRestart fused into one
    # value and takes each of them
    listed = isinstance(reset, str) and (
        reset in shape.reset_types
        or any(value not in _RESETS and reset in value for value in shape.reset_types)
    )
    if not listed or reset not in _RESETS:
        offered = ", ".join(shape.reset_types)
        return _error(
            400, "Base.1.8.ActionParameterValueNotInList", f"ResetType {reset!r} not in {offered}"
        )
    machine = bmc.machine
    if reset == "Nmi":
        machine.apply(take())
        return 204, None, ()
    if reset == "PushPowerButton":  # a momentary press: on when off, an ACPI shutdown when on
        on = machine.power_state() in (PowerState.ON, PowerState.POWERING_ON)
        action = PowerAction.SOFT_OFF if on else PowerAction.ON
    else:
        action = RESET_ACTIONS[reset]
    machine.set_power(action, take())
    return 204, None, ()


#: the ResetType values a shape may list and hwlab carries out
_RESETS = frozenset({*RESET_ACTIONS, "PushPowerButton", "Nmi"})

_ENABLED = "BootSourceOverrideEnabled"
_TARGET = "BootSourceOverrideTarget"
_MODE = "BootSourceOverrideMode"
#: UEFI HTTP boot's image, on a shape whose targets list UefiHttp
_URI = "HttpBootUri"
_HTTP = "UefiHttp"


def _patch_boot(state: ShapeState, body: Any, take: Callable[[], list[Firing]]) -> _Answer:
    shape = state.shape
    if not isinstance(body, dict) or not isinstance(body.get("Boot"), dict) or not body["Boot"]:
        return _error(400, "Base.1.8.PropertyMissing", "Boot names no property to change")
    boot: dict[str, Any] = body["Boot"]
    if not shape.boot_override:  # BootOrder only: the Base registry's answer to the rest
        unknown = ", ".join(f"Boot/{name}" for name in boot)
        return _error(
            400,
            "Base.1.8.PropertyUnknown",
            f"The property {unknown} is not in the list of valid properties for the resource.",
        )
    problems = [f"{name} is not writable here" for name in body if name != "Boot"]
    allowed = {_ENABLED: shape.enabled_values, _TARGET: shape.boot_targets, _MODE: shape.boot_modes}
    for name, value in boot.items():
        if name == _URI and _HTTP in shape.boot_targets:
            if value is not None and (not isinstance(value, str) or not value):
                problems.append(f"Boot/{name} {value!r} is not a URI or null")
        elif name not in allowed:
            problems.append(f"Boot/{name} is not a property this service takes")
        elif value not in allowed[name]:
            problems.append(f"Boot/{name} {value!r} is not one of {', '.join(allowed[name])}")
    if problems:
        return _error(400, "Base.1.8.PropertyValueNotInList", "; ".join(problems))
    if _MODE in boot:
        state.boot_mode = boot[_MODE]
    if _URI in boot:
        state.http_boot_uri = boot[_URI]
    if _ENABLED in boot or _TARGET in boot:
        now = state.override()
        target = boot.get(_TARGET, now.target)
        enabled = boot.get(_ENABLED)
        if enabled is None:
            enabled = now.enabled if now.enabled != "Disabled" else "Once"
        if target == "None" and enabled != "Disabled":
            enabled = "Disabled"
        state.set_override(Override(enabled, target), take())
    return 204, None, ()


def _vmedia(state: ShapeState, method: str, base: str, rest: str, body: Any) -> _Answer:
    shape = state.shape
    if rest == "":
        if method != "GET":
            return _error(405, "Base.1.8.OperationNotAllowed", method, ("GET",))
        members = [f"{base}/{s.id}" for s in shape.slots]
        return 200, documents.collection(base, "VirtualMedia", members), ("GET",)
    slot_id, _, action = rest[1:].partition("/")
    found = next((s for s in shape.slots if s.id == slot_id), None)
    if found is None:
        return _missing(base + rest)
    allow = ("GET", "PATCH") if found.takes in ("patch", "oem-hpe", "hpe") else ("GET",)
    if action == "":
        if method == "GET":
            return 200, documents.slot(state, base, found), allow
        if method == "PATCH" and "PATCH" in allow:
            return _patch_slot(state, found, body)
        return _error(405, "Base.1.8.OperationNotAllowed", f"{method} on a slot", allow)
    names = _ACTIONS.get(found.takes, ())
    if action not in names:
        return _missing(base + rest)
    if method != "POST":
        return _error(405, "Base.1.8.OperationNotAllowed", method, ("POST",))
    if action in _EJECTS:
        state.eject(found.id, documents.is_cd(found))
        return 204, None, ()
    return _insert(state, found, body if isinstance(body, dict) else {})


_STANDARD = ("Actions/VirtualMedia.InsertMedia", "Actions/VirtualMedia.EjectMedia")
_OEM_HPE = (
    "Actions/Oem/Hpe/HpeiLOVirtualMedia.InsertVirtualMedia",
    "Actions/Oem/Hpe/HpeiLOVirtualMedia.EjectVirtualMedia",
)
#: the action paths a slot takes, by how it takes an image
_ACTIONS = {"action": _STANDARD, "oem-hpe": _OEM_HPE, "hpe": _STANDARD + _OEM_HPE}
_EJECTS = frozenset({_STANDARD[1], _OEM_HPE[1]})


def _insert(state: ShapeState, found: Slot, body: dict[str, Any]) -> _Answer:
    if found.in_use:
        return 400, _RAC0904, ()
    image = body.get("Image")
    if not isinstance(image, str) or not image:
        return _error(400, "Base.1.8.ActionParameterMissing", "Image is required")
    protocol = body.get("TransferProtocolType")
    if protocol is None and found.require_protocol:
        return _error(
            400,
            "Base.1.8.ActionParameterMissing",
            "The action requires the parameter TransferProtocolType.",
        )
    if (
        found.transfer_protocols
        and protocol is not None
        and protocol not in found.transfer_protocols
    ):
        listed = ", ".join(found.transfer_protocols)
        return _error(
            400,
            "Base.1.8.ActionParameterValueNotInList",
            f"TransferProtocolType {protocol} not in {listed}",
        )
    held = state.images.get(found.id)
    if held is not None and held != image:
        return _error(409, "Base.1.8.ResourceInUse", f"slot {found.id} holds media: eject first")
    state.insert(found.id, image, documents.is_cd(found))
    return 204, None, ()


def _patch_slot(state: ShapeState, found: Slot, body: Any) -> _Answer:
    if not isinstance(body, dict) or not body:
        return _error(400, "Base.1.8.MalformedJSON", "the body is not a JSON object to apply")
    image, inserted = body.get("Image", ...), body.get("Inserted")
    if image is None or inserted is False:
        state.eject(found.id, documents.is_cd(found))
        return 204, None, ()
    return _insert(state, found, {**body, "TransferProtocolType": body.get("TransferProtocolType")})
