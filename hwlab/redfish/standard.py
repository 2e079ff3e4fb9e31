"""What the Redfish standard (DSP0266) asks of every service, on top of
sushy-tools' views.

* **One ``@odata.id`` per resource, equal to the URI it is served at.** A
  system is ``/redfish/v1/Systems/<id>`` only (a request naming it by UUID is
  redirected there, :func:`canonical`), its Manager
  ``/redfish/v1/Managers/<id>`` (:func:`manager_resource`), its virtual media
  under the system's id (``templates/virtual_media*.json``). Every system of
  a shared service has a Manager that answers.
* **Boot overrides as the schema has them** (:func:`patch_system`):
  ``BootSourceOverrideEnabled`` ``Once``/``Continuous``/``Disabled``,
  ``BootSourceOverrideTarget`` ``None`` (both clear the override),
  ``BootSourceOverrideMode`` ``UEFI``/``Legacy``, each read back; UEFI HTTP
  boot: target ``UefiHttp`` with ``HttpBootUri`` (a string, or null for the
  URI DHCP hands out), read back while the machine holds the network boot it
  set; a PATCH with a value the property does not list is 400, naming every
  bad property.
* **Virtual media by PATCH** (:func:`patch_vmedia`): ``Image``/``Inserted``
  on the slot, as services without ``InsertMedia`` take it.
* **Unauthenticated documents**: ``/redfish/v1/$metadata`` (CSDL references
  for every type served, :func:`metadata`) and ``/redfish/v1/odata`` (the
  OData service document); :data:`PUBLIC` lists what needs no login.
* **Headers** (:func:`finish`): ``OData-Version: 4.0`` and
  ``Cache-Control: no-cache`` on every answer (a request asking for another
  OData version is 412, :func:`odata_version_refused`); ``Link:
  rel=describedby`` (the JSON schema of the resource's type);
  ``ETag`` (and ``@odata.etag`` in the body) on a GET of a resource, a hash
  of what the resource shows, so it changes when the resource does;
  ``Allow`` (the methods the resource takes) on a GET and a 405;
  ``If-Match`` on a PATCH is checked against the resource's ETag now
  (:func:`precondition_failed`: 412 when it differs; ``*`` matches).
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

import flask
from werkzeug import exceptions as wz_exc

from bmaas import __version__
from bmaas.driver import BootDevice
from bmaas.fakes.faults import Effect
from bmaas.hwlab.http import Request, error_body
from bmaas.hwlab.redfish.app import APP, CURRENT
from bmaas.hwlab.redfish.bmc import BOOT_MODES, BOOT_TARGETS, HTTP_TARGET, Bmc, Rendered

__all__ = [
    "PUBLIC",
    "allowed_methods",
    "canonical",
    "etag",
    "finish",
    "odata_version_refused",
    "precondition_failed",
]

#: requests answered without credentials (path without trailing /): DSP0266
#: 13.3.4 "the service root, $metadata, the OData service document", and a
#: session login
PUBLIC = frozenset(
    {
        ("GET", "/redfish"),
        ("GET", "/redfish/v1"),
        ("GET", "/redfish/v1/$metadata"),
        ("GET", "/redfish/v1/odata"),
        ("POST", "/redfish/v1/SessionService/Sessions"),
        ("POST", "/redfish/v1/SessionService/Sessions/Members"),
    }
)
#: where the JSON schemas of ``@odata.type`` live (the ``Link: rel=describedby``)
_SCHEMA_BASE = "http://redfish.dmtf.org/schemas/v1/"

#: sushy-tools' Application (typed as the Flask it subclasses): its backends
SUSHY: Any = APP
#: methods an Allow header may list (HEAD and OPTIONS are werkzeug's, not ours)
_METHODS = ("GET", "POST", "PATCH", "PUT", "DELETE")
#: (view, method) sushy-tools routes that hwlab does not take
_REFUSED = frozenset(
    {
        ("chassis_resource", "PATCH"),  # indicator LEDs are not emulated
        ("manager_resource", "PATCH"),  # DateTime is the host's
    }
)

#: CSDL files and the namespaces of them that hwlab's answers use
#: (``@odata.type`` of every resource, the types they build on)
_SCHEMAS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("RedfishExtensions_v1", ("RedfishExtensions.v1_0_0",)),
    ("Resource_v1", ("Resource", "Resource.v1_0_0")),
    ("Message_v1", ("Message", "Message.v1_1_1")),
    ("ServiceRoot_v1", ("ServiceRoot", "ServiceRoot.v1_5_0")),
    ("ComputerSystemCollection_v1", ("ComputerSystemCollection",)),
    ("ComputerSystem_v1", ("ComputerSystem", "ComputerSystem.v1_13_0")),
    ("ManagerCollection_v1", ("ManagerCollection",)),
    ("Manager_v1", ("Manager", "Manager.v1_10_0")),
    ("ChassisCollection_v1", ("ChassisCollection",)),
    ("Chassis_v1", ("Chassis", "Chassis.v1_7_0")),
    ("VirtualMediaCollection_v1", ("VirtualMediaCollection",)),
    ("VirtualMedia_v1", ("VirtualMedia", "VirtualMedia.v1_4_0")),
    ("SessionService_v1", ("SessionService", "SessionService.v1_1_8")),
    ("SessionCollection_v1", ("SessionCollection",)),
    ("Session_v1", ("Session", "Session.v1_3_0")),
    # BIOS, registries, firmware and parts (bmaas.hwlab.redfish.lifecycle)
    ("Bios_v1", ("Bios", "Bios.v1_2_0")),
    ("Settings_v1", ("Settings", "Settings.v1_3_5")),
    ("MessageRegistryFileCollection_v1", ("MessageRegistryFileCollection",)),
    ("MessageRegistryFile_v1", ("MessageRegistryFile", "MessageRegistryFile.v1_1_0")),
    ("AttributeRegistry_v1", ("AttributeRegistry", "AttributeRegistry.v1_3_0")),
    ("UpdateService_v1", ("UpdateService", "UpdateService.v1_11_0")),
    ("SoftwareInventoryCollection_v1", ("SoftwareInventoryCollection",)),
    ("SoftwareInventory_v1", ("SoftwareInventory", "SoftwareInventory.v1_4_0")),
    ("ActionInfo_v1", ("ActionInfo", "ActionInfo.v1_1_2")),
    ("TaskService_v1", ("TaskService", "TaskService.v1_1_5")),
    ("TaskCollection_v1", ("TaskCollection",)),
    ("Task_v1", ("Task", "Task.v1_4_3")),
    ("ProcessorCollection_v1", ("ProcessorCollection",)),
    ("Processor_v1", ("Processor", "Processor.v1_0_0")),
    ("MemoryCollection_v1", ("MemoryCollection",)),
    ("Memory_v1", ("Memory", "Memory.v1_7_0")),
    ("EthernetInterfaceCollection_v1", ("EthernetInterfaceCollection",)),
    ("EthernetInterface_v1", ("EthernetInterface", "EthernetInterface.v1_4_0")),
    ("SimpleStorageCollection_v1", ("SimpleStorageCollection",)),
    ("SimpleStorage_v1", ("SimpleStorage", "SimpleStorage.v1_2_0")),
    # the EventService (bmaas.hwlab.redfish.events)
    ("EventService_v1", ("EventService", "EventService.v1_10_0")),
    ("EventDestinationCollection_v1", ("EventDestinationCollection",)),
    ("EventDestination_v1", ("EventDestination", "EventDestination.v1_13_0")),
    ("Event_v1", ("Event", "Event.v1_7_0")),
)


def _metadata_document() -> str:
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">',
    ]
    for name, namespaces in _SCHEMAS:
        lines.append(f'  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/{name}.xml">')
        for namespace in namespaces:
            alias = ' Alias="Redfish"' if namespace.startswith("RedfishExtensions") else ""
            lines.append(f'    <edmx:Include Namespace="{namespace}"{alias}/>')
        lines.append("  </edmx:Reference>")
    lines += [
        "  <edmx:DataServices>",
        '    <Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="Service">',
        '      <EntityContainer Name="Service" Extends="ServiceRoot.v1_5_0.ServiceContainer"/>',
        "    </Schema>",
        "  </edmx:DataServices>",
        "</edmx:Edmx>",
    ]
    return "\n".join(lines) + "\n"


METADATA = _metadata_document()

#: the OData service document: the service root's top-level resources
_ODATA = {
    "@odata.context": "/redfish/v1/$metadata",
    "value": [
        {"name": name, "kind": "Singleton", "url": url}
        for name, url in (
            ("Service", "/redfish/v1/"),
            ("Systems", "/redfish/v1/Systems"),
            ("Chassis", "/redfish/v1/Chassis"),
            ("Managers", "/redfish/v1/Managers"),
            ("SessionService", "/redfish/v1/SessionService"),
            ("Sessions", "/redfish/v1/SessionService/Sessions"),
            ("EventService", "/redfish/v1/EventService"),
        )
    ],
}


# -- headers ---------------------------------------------------------------------


def etag(document: dict[str, Any]) -> str:
    """A strong ETag of what a resource shows (its ``@odata.etag`` aside)."""
    shown = {k: v for k, v in document.items() if k != "@odata.etag"}
    digest = hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()
    return f'"{digest[:20]}"'


@functools.lru_cache(maxsize=4096)
def allowed_methods(path: str) -> tuple[str, ...]:
    """The methods the resource at ``path`` takes (empty: no such route)."""
    adapter = APP.url_map.bind("hwlab")
    allowed = []
    for method in _METHODS:
        try:
            endpoint, _args = adapter.match(path, method=method)
        except wz_exc.HTTPException:  # no such route or method (or a redirect)
            continue
        if (endpoint, method) not in _REFUSED:
            allowed.append(method)
    return tuple(allowed)


def finish(method: str, path: str, rendered: Rendered) -> Rendered:
    """The app's answer with the headers the standard asks for: ETag and
    ``@odata.etag`` on a resource's GET (the DMTF copyright annotation,
    meant for mockups, dropped), Allow on a GET and a 405, OData-Version."""
    code, headers, body = rendered
    headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
    read = method in ("GET", "HEAD") and code == 200
    if read and body.startswith(b"{"):
        document = json.loads(body)
        if isinstance(document, dict) and "@odata.id" in document:
            document.pop("@Redfish.Copyright", None)
            tag = etag(document)
            document["@odata.etag"] = tag
            headers.append(("ETag", tag))
            body = json.dumps(document, indent=4).encode()
            kind = str(document.get("@odata.type", "")).lstrip("#").rpartition(".")[0]
            if kind:
                headers.append(("Link", f"<{_SCHEMA_BASE}{kind}.json>; rel=describedby"))
    if read or code == 405:
        allowed = allowed_methods(path.rstrip("/") or "/")
        if allowed:
            headers.append(("Allow", ", ".join(allowed)))
    headers += [("Cache-Control", "no-cache"), ("OData-Version", "4.0")]
    return code, headers, body


#: a JSON answer before rendering: status, the document (None: no body), the
#: methods the resource takes (for Allow)
Answer = tuple[int, dict[str, Any] | None, tuple[str, ...]]


def render(answer: Answer) -> Rendered:
    """An answer built as a document (the shapes engine's, the lifecycle
    resources'), rendered with the headers :func:`finish` gives the
    sushy-tools app's: ETag and ``@odata.etag`` on a resource, its schema as
    ``Link: rel=describedby``, Allow on a 200 or 405, OData-Version."""
    code, body, allow = answer
    headers = [("Content-Type", "application/json")]
    if body is not None and code == 200 and "@odata.id" in body:
        tag = etag(body)
        body = {**body, "@odata.etag": tag}
        headers.append(("ETag", tag))
        kind = str(body.get("@odata.type", "")).lstrip("#").rpartition(".")[0]
        if kind:
            headers.append(("Link", f"<{_SCHEMA_BASE}{kind}.json>; rel=describedby"))
    if allow and code in (200, 405):
        headers.append(("Allow", ", ".join(allow)))
    headers += [("Cache-Control", "no-cache"), ("OData-Version", "4.0")]
    return code, headers, b"" if body is None else json.dumps(body, indent=4).encode()


def odata_version_refused(request: Request) -> Rendered | None:
    """A request asking for an OData version other than 4.0: the 412 to
    answer (DSP0266 "OData-Version": a service that cannot serve the
    version asked for fails the precondition). None: go ahead."""
    asked = request.header("odata-version")
    if asked is None or asked.strip() == "4.0":
        return None
    message = f"OData-Version {asked} is not supported: this service speaks 4.0"
    body = json.dumps(error_body("Base.1.8.PreconditionFailed", message)).encode()
    return 412, [("Content-Type", "application/json"), ("OData-Version", "4.0")], body


def precondition_failed(
    request: Request, current: Callable[[], Rendered]
) -> tuple[int, list[tuple[str, str]], bytes] | None:
    """A PATCH whose ``If-Match`` names none of the resource's current ETag:
    the 412 to answer (None: go ahead). ``current`` reads the resource."""
    wanted = request.header("if-match")
    if wanted is None or request.method != "PATCH":
        return None
    tags = [t.strip() for t in wanted.split(",") if t.strip()]
    code, headers, _body = current()
    if code != 200:
        return None  # nothing to compare: the PATCH answers for itself
    tag = next((v for k, v in headers if k.lower() == "etag"), None)
    if "*" in tags or (tag is not None and tag in tags):
        return None
    message = f"If-Match {wanted} does not match the resource's ETag {tag}"
    body = json.dumps(error_body("Base.1.8.PreconditionFailed", message)).encode()
    return (
        412,
        [("Content-Type", "application/json"), ("OData-Version", "4.0")],
        body,
    )


# -- one id per resource ---------------------------------------------------------------

_SYSTEM_PATH = re.compile(r"(/redfish/v1/(?:Systems|Managers)/)([^/?]+)(.*)", re.DOTALL)


def canonical(bmc: Bmc, target: str) -> str | None:
    """Where a request naming the system by UUID belongs (None: it names
    the system by its id, or no system at all)."""
    found = _SYSTEM_PATH.fullmatch(target)
    if found is None or found.group(2) != bmc.uuid or bmc.uuid == bmc.system_id:
        return None
    return f"{found.group(1)}{bmc.system_id}{found.group(3)}"


# -- views -------------------------------------------------------------------------------


def _bmc() -> Bmc:
    return CURRENT.get().bmc


def _json(document: Any, status: int = 200) -> flask.Response:
    return flask.Response(json.dumps(document), status=status, content_type="application/json")


def _error(status: int, message_id: str, message: str) -> flask.Response:
    return _json(error_body(message_id, message), status)


def _problems(problems: list[tuple[str, str]]) -> flask.Response:
    """One 400 naming every bad property (the first one's MessageId)."""
    body = error_body(problems[0][0], "; ".join(message for _id, message in problems))
    info = body["error"]["@Message.ExtendedInfo"]
    info[:] = [{**info[0], "MessageId": mid, "Message": message} for mid, message in problems]
    return _json(body, 400)


def _not_allowed() -> flask.Response:
    return _error(405, "Base.1.8.OperationNotAllowed", f"{flask.request.method} is not allowed")


def manager_resource(identity: str) -> flask.Response:
    """The system's BMC, ``/redfish/v1/Managers/<system id>``."""
    bmc = _bmc()
    if identity != bmc.system_id:
        return _error(404, "Base.1.8.ResourceMissingAtURI", f"no manager {identity}")
    if flask.request.method != "GET":
        return _not_allowed()
    chassis = SUSHY.managers.get_managed_chassis({"Id": identity})
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    return _json(
        {
            "@odata.type": "#Manager.v1_10_0.Manager",
            "Id": identity,
            "Name": f"{bmc.machine.name} BMC",
            "UUID": bmc.manager_uuid,
            "ServiceEntryPointUUID": bmc.service_uuid,
            "ManagerType": "BMC",
            "Model": "hwlab BMC",
            "FirmwareVersion": __version__,
            "DateTime": now.isoformat(),
            "DateTimeLocalOffset": "+00:00",
            "PowerState": "On",
            "Status": {"State": "Enabled", "Health": "OK"},
            "VirtualMedia": {"@odata.id": f"/redfish/v1/Systems/{identity}/VirtualMedia"},
            "Links": {
                "ManagerForServers": [{"@odata.id": f"/redfish/v1/Systems/{identity}"}],
                "ManagerForChassis": [{"@odata.id": f"/redfish/v1/Chassis/{c}"} for c in chassis],
            },
            "@odata.id": f"/redfish/v1/Managers/{identity}",
        }
    )


_BOOT = (
    "BootSourceOverrideEnabled",
    "BootSourceOverrideTarget",
    "BootSourceOverrideMode",
    "HttpBootUri",
)
_ENABLED = ("Once", "Continuous", "Disabled")


def _listed(boot: dict[str, Any], name: str, values: tuple[str, ...]) -> list[tuple[str, str]]:
    if name not in boot or boot[name] in values:
        return []
    return [
        (
            "Base.1.8.PropertyValueNotInList",
            f"Boot/{name} {boot[name]!r} is not one of {', '.join(values)}",
        )
    ]


def patch_system(identity: str) -> Any:
    """PATCH of a system: ``Boot`` (override target, enabled, mode)."""
    bmc = _bmc()
    if identity != bmc.system_id:
        return _error(404, "Base.1.8.ResourceMissingAtURI", f"no system {identity}")
    body = flask.request.get_json(silent=True)
    if not isinstance(body, dict) or not body:
        return _error(400, "Base.1.8.MalformedJSON", "the body is not a JSON object to apply")
    problems = [
        ("Base.1.8.PropertyNotWritable", f"{name} cannot be changed here")
        for name in body
        if name != "Boot"
    ]
    boot = body.get("Boot", {})
    if not isinstance(boot, dict):
        problems.append(("Base.1.8.PropertyValueTypeError", "Boot must be an object"))
        boot = {}
    problems += [
        ("Base.1.8.PropertyUnknown", f"Boot/{name} is not a property hwlab takes")
        for name in boot
        if name not in _BOOT
    ]
    problems += _listed(boot, "BootSourceOverrideEnabled", _ENABLED)
    problems += _listed(boot, "BootSourceOverrideTarget", bmc.boot_target_values)
    problems += _listed(boot, "BootSourceOverrideMode", BOOT_MODES)
    uri = boot.get("HttpBootUri")
    if uri is not None and (not isinstance(uri, str) or not uri):
        problems.append(
            ("Base.1.8.PropertyValueTypeError", f"Boot/HttpBootUri {uri!r} is not a URI or null")
        )
    enabled = boot.get("BootSourceOverrideEnabled")
    target = boot.get("BootSourceOverrideTarget")
    mode = boot.get("BootSourceOverrideMode")
    clear = enabled == "Disabled" or target == "None"
    if target is None and enabled in ("Once", "Continuous") and bmc.override_cleared:
        problems.append(
            (
                "Base.1.8.PropertyMissing",
                f"Boot/BootSourceOverrideEnabled {enabled} needs a BootSourceOverrideTarget:"
                " no override is set",
            )
        )
    if "Boot" in body and not boot and not problems:
        problems.append(("Base.1.8.PropertyMissing", "Boot names no property to change"))
    if problems:
        return _problems(problems)
    if mode is not None:
        bmc.boot_mode = mode
    if "HttpBootUri" in boot:
        bmc.http_boot_uri = uri
    machine = bmc.machine
    if clear:
        firings = CURRENT.get().take_firings()
        machine.set_boot_device(BootDevice.DISK, persistent=True, firings=firings)
        if not any(f.effect is Effect.BOOT_NOT_PERSISTED for f in firings):
            bmc.clear_boot_override()
    elif target is not None or enabled is not None:
        was_cleared = bmc.override_cleared
        http = target == HTTP_TARGET or (target is None and bmc.http_boot)
        now = machine.boot_device()
        if http:
            device = BootDevice.PXE  # a network boot, to the machine
        else:
            device = BOOT_TARGETS[target] if target is not None else BootDevice(now.device)
        if enabled is not None:
            persistent = enabled == "Continuous"
        else:
            persistent = False if was_cleared else now.persistent
        firings = CURRENT.get().take_firings()
        machine.set_boot_device(device, persistent=persistent, firings=firings)
        bmc.boot_override_set(http=http and machine.boot_device().device is BootDevice.PXE)
    return flask.Response(status=204)


_MEDIA = {
    "Image": (str, type(None)),
    "Inserted": (bool,),
    "WriteProtected": (bool,),
    "TransferProtocolType": (str,),
    "TransferMethod": (str,),
}


def patch_vmedia(identity: str, device: str) -> Any:
    """PATCH of a virtual media slot: ``Image`` (a URL inserts it, null
    ejects) and ``Inserted`` (false ejects), as services without
    ``InsertMedia`` take them."""
    vmedia = SUSHY.vmedia
    vmedia.get_device_name(identity, device)  # 404 for a slot that is not there
    body = flask.request.get_json(silent=True)
    if not isinstance(body, dict) or not body:
        return _error(400, "Base.1.8.MalformedJSON", "the body is not a JSON object to apply")
    problems = []
    for name, value in body.items():
        if name not in _MEDIA:
            problems.append(("Base.1.8.PropertyUnknown", f"{name} is not a property hwlab takes"))
        elif not isinstance(value, _MEDIA[name]):
            problems.append(("Base.1.8.PropertyValueTypeError", f"{name} {value!r}"))
    image, inserted = body.get("Image", ...), body.get("Inserted")
    eject = image is None or inserted is False
    if eject and isinstance(image, str):
        problems.append(
            ("Base.1.8.PropertyValueConflict", "Image given with Inserted false: nothing to do")
        )
    if image == "":
        problems.append(("Base.1.8.PropertyValueFormatError", "Image is empty"))
    if not eject and not isinstance(image, str) and not problems:
        problems.append(("Base.1.8.PropertyMissing", "Image (to insert) or Inserted false"))
    if problems:
        return _problems(problems)
    if eject:
        vmedia.eject_image(identity, device)
    else:
        vmedia.insert_image(identity, device, image)
    return flask.Response(status=204)


def versions() -> flask.Response:
    """``/redfish``: the protocol versions this service speaks."""
    return _json({"v1": "/redfish/v1/"})


def metadata() -> flask.Response:
    return flask.Response(METADATA, content_type="application/xml")


def odata() -> flask.Response:
    return _json(_ODATA)


def _install() -> None:
    views = APP.view_functions
    if getattr(views["manager_resource"], "hwlab", False):
        return
    views["manager_resource"] = manager_resource
    stock_system = views["system_resource"]

    def system_resource(identity: str) -> Any:
        if flask.request.method == "PATCH":
            return patch_system(identity)
        return stock_system(identity=identity)

    views["system_resource"] = system_resource
    views["VirtualMedia.virtual_media_patch"] = patch_vmedia
    APP.add_url_rule("/redfish/v1/$metadata", "hwlab_metadata", metadata, methods=["GET"])
    APP.add_url_rule("/redfish/v1/odata", "hwlab_odata", odata, methods=["GET"])
    APP.add_url_rule("/redfish", "hwlab_versions", versions, methods=["GET"])
    # a POST to a collection's Members is a POST to the collection (DSP0266)
    APP.add_url_rule(
        "/redfish/v1/SessionService/Sessions/Members",
        "hwlab_session_members",
        APP.view_functions["hwlab_sessions.session_create"],
        methods=["POST"],
    )
    manager_resource.hwlab = True  # type: ignore[attr-defined]


_install()
