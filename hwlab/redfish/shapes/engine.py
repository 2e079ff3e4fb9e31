"""Serve a shape from live state: one function per request, the one
Redfish engine of hwlab, for the default shape (:mod:`.hwlab`) as for the
vendors'.

:func:`serve` answers every request the EventService and the lifecycle
resources (:mod:`bmaas.hwlab.redfish.lifecycle`) leave: the service root,
Systems, Managers, Chassis and what lies under them, the SessionService,
``/redfish``, ``$metadata`` and the OData document (:mod:`.service`), a 404
for the rest. The HTTP layer (:mod:`bmaas.hwlab.redfish.answer`) has
already counted the request, evaluated the fault plan for its operation
and carried out wire and BMC effects; ``hardware`` effects (power never
lands, boot not persisted...) are handed to the machine.

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
from bmaas.hwlab.http import Request, error_body
from bmaas.hwlab.redfish import standard
from bmaas.hwlab.redfish.bmc import RESET_ACTIONS, Bmc, Rendered
from bmaas.hwlab.redfish.shapes import documents, media, service
from bmaas.hwlab.redfish.shapes.model import Shape
from bmaas.hwlab.redfish.shapes.state import ShapeState

__all__ = ["serve"]

#: an answer before headers: status, JSON body (None: no body), Allow
_Answer = standard.Answer


def serve(bmc: Bmc, state: ShapeState, request: Request, hardware: list[Firing]) -> Rendered:
    """The answer to ``request``."""
    path = urllib.parse.unquote(request.path).rstrip("/") or "/"
    if path == "/redfish/v1/$metadata" and request.method in ("GET", "HEAD"):
        xml = b"" if request.method == "HEAD" else standard.METADATA.encode()
        headers = [("Content-Type", "application/xml"), ("Allow", "GET")]
        return 200, [*headers, ("Cache-Control", "no-cache"), ("OData-Version", "4.0")], xml
    login = service.login(bmc.peers[0], request.method, path, _json(request.body))
    if login is not None:
        bmc.machine.apply(hardware)
        return login
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
    answered = service.route(bmc.peers[0], method, path)
    if answered is not None:
        return answered
    shapes = [peer.shape.shape for peer in bmc.peers if peer.shape is not None]
    gets: dict[str, Callable[[], dict[str, Any]]] = {
        "/redfish/v1": lambda: documents.root(bmc, shape),
        "/redfish/v1/Systems": lambda: standard.collection(
            "/redfish/v1/Systems", "ComputerSystem", [s.system_path for s in shapes]
        ),
        "/redfish/v1/Managers": lambda: standard.collection(
            "/redfish/v1/Managers", "Manager", [s.manager_path for s in shapes]
        ),
        "/redfish/v1/Chassis": lambda: standard.collection(
            "/redfish/v1/Chassis",
            "Chassis",
            [f"/redfish/v1/Chassis/{s.chassis_id}" for s in shapes],
        ),
        shape.manager_path: lambda: documents.manager(bmc, shape),
        f"/redfish/v1/Chassis/{shape.chassis_id}": lambda: documents.chassis(bmc, shape),
    }
    if not shape.boot_override:  # its BootOptions, read-only
        options = f"{shape.system_path}/BootOptions"
        gets[options] = lambda: standard.collection(
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
    if path == f"{shape.manager_path}/Actions/Manager.Reset":
        if method != "POST":
            return _error(405, "Base.1.8.OperationNotAllowed", method, ("POST",))
        return _reset_manager(bmc, shape, body, take)
    base = shape.vmedia_path
    if base is not None and (path == base or path.startswith(base + "/")):
        return media.answer(state, method, base, path[len(base) :], body)
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


def _reset_manager(bmc: Bmc, shape: Shape, body: Any, take: Callable[[], list[Firing]]) -> _Answer:
    """``Manager.Reset``: 204, then the BMC is away for the machine's
    ``bmc_reboot_time`` -- its port refuses, as after the ``bmc_reboot``
    effect (the server's sweep follows the machine) -- and comes back."""
    reset = body.get("ResetType") if isinstance(body, dict) else None
    if reset not in shape.manager_resets:
        offered = ", ".join(shape.manager_resets)
        return _error(
            400, "Base.1.8.ActionParameterValueNotInList", f"ResetType {reset!r} not in {offered}"
        )
    machine = bmc.machine
    machine.apply(take())
    machine.reboot_bmc(machine.hardware.bmc_reboot_time)
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
    if not isinstance(body, dict) or not body:
        return _error(400, "Base.1.8.MalformedJSON", "the body is not a JSON object to apply")
    boot = body.get("Boot", {})
    if not shape.boot_override and isinstance(boot, dict) and boot:
        # BootOrder only: the Base registry's answer to the rest
        unknown = ", ".join(f"Boot/{name}" for name in boot)
        return _error(
            400,
            "Base.1.8.PropertyUnknown",
            f"The property {unknown} is not in the list of valid properties for the resource.",
        )
    problems = _boot_problems(state, body, boot)
    if problems:
        return standard.problems(problems)
    if _MODE in boot:
        state.boot_mode = boot[_MODE]
    if _URI in boot:
        state.http_boot_uri = boot[_URI]
    if _ENABLED in boot or _TARGET in boot:
        state.set_boot(boot.get(_ENABLED), boot.get(_TARGET), take())
    return 204, None, ()


def _boot_problems(state: ShapeState, body: dict[str, Any], boot: Any) -> list[tuple[str, str]]:
    """Every problem of a system PATCH, each with its Base MessageId."""
    shape = state.shape
    problems = [
        ("Base.1.8.PropertyNotWritable", f"{name} cannot be changed here")
        for name in body
        if name != "Boot"
    ]
    if not isinstance(boot, dict):
        return [*problems, ("Base.1.8.PropertyValueTypeError", "Boot must be an object")]
    allowed = {_ENABLED: shape.enabled_values, _TARGET: shape.boot_targets, _MODE: shape.boot_modes}
    takes_uri = _HTTP in shape.boot_targets
    problems += [
        ("Base.1.8.PropertyUnknown", f"Boot/{name} is not a property this service takes")
        for name in boot
        if name not in allowed and not (name == _URI and takes_uri)
    ]
    problems += [
        (
            "Base.1.8.PropertyValueNotInList",
            f"Boot/{name} {boot[name]!r} is not one of {', '.join(values)}",
        )
        for name, values in allowed.items()
        if name in boot and boot[name] not in values
    ]
    uri = boot.get(_URI)
    if takes_uri and uri is not None and (not isinstance(uri, str) or not uri):
        problems.append(
            ("Base.1.8.PropertyValueTypeError", f"Boot/{_URI} {uri!r} is not a URI or null")
        )
    enabled = boot.get(_ENABLED)
    if _TARGET not in boot and enabled in ("Once", "Continuous") and state.cleared():
        problems.append(
            (
                "Base.1.8.PropertyMissing",
                f"Boot/{_ENABLED} {enabled} needs a {_TARGET}: no override is set",
            )
        )
    if "Boot" in body and not boot and not problems:
        problems.append(("Base.1.8.PropertyMissing", "Boot names no property to change"))
    return problems
