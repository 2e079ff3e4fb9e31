"""What the Redfish standard (DSP0266) asks of every service, whatever its
shape: the rules :mod:`bmaas.hwlab.redfish.shapes.engine` answers by.

* **One ``@odata.id`` per resource, equal to the URI it is served at.** A
  request naming a system (or its Manager) by UUID is redirected to its id
  (:func:`canonical`).
* **Unauthenticated documents**: ``/redfish``, ``/redfish/v1/$metadata``
  (CSDL references for every type served, :data:`METADATA`) and
  ``/redfish/v1/odata`` (the OData service document, :data:`ODATA`);
  :data:`PUBLIC` lists what needs no login.
* **Headers** (:func:`render`): ``OData-Version: 4.0`` and
  ``Cache-Control: no-cache`` on every answer (a request asking for another
  OData version is 412, :func:`odata_version_refused`); ``Link:
  rel=describedby`` (the JSON schema of the resource's type); ``ETag`` (and
  ``@odata.etag`` in the body) on a GET of a resource, a hash of what the
  resource shows, so it changes when the resource does; ``Allow`` (the
  methods the resource takes) on a GET and a 405; ``If-Match`` on a PATCH is
  checked against the resource's ETag now (:func:`precondition_failed`: 412
  when it differs; ``*`` matches).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from bmaas.hwlab.http import Request, error_body
from bmaas.hwlab.redfish.bmc import Bmc, Rendered

__all__ = [
    "METADATA",
    "ODATA",
    "PUBLIC",
    "Answer",
    "canonical",
    "collection",
    "etag",
    "link",
    "odata_version_refused",
    "precondition_failed",
    "problems",
    "render",
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
ODATA = {
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


def link(path: str) -> dict[str, str]:
    return {"@odata.id": path}


def collection(path: str, kind: str, members: list[str], name: str | None = None) -> dict[str, Any]:
    """A resource collection of ``kind`` (``Name``: "``kind`` Collection")."""
    return {
        "@odata.type": f"#{kind}Collection.{kind}Collection",
        "@odata.id": path,
        "Name": name or f"{kind} Collection",
        "Members": [link(m) for m in members],
        "Members@odata.count": len(members),
    }


def etag(document: dict[str, Any]) -> str:
    """A strong ETag of what a resource shows (its ``@odata.etag`` aside)."""
    shown = {k: v for k, v in document.items() if k != "@odata.etag"}
    digest = hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()
    return f'"{digest[:20]}"'


#: a JSON answer before rendering: status, the document (None: no body), the
#: methods the resource takes (for Allow)
Answer = tuple[int, dict[str, Any] | None, tuple[str, ...]]


def render(answer: Answer) -> Rendered:
    """An answer built as a document (the shapes engine's, the lifecycle
    resources'), rendered with the headers the standard asks for: ETag and
    ``@odata.etag`` on a resource, its schema as ``Link: rel=describedby``,
    Allow on a 200 or 405, OData-Version, Cache-Control."""
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
    # one line: json's C encoder (indent falls back to its pure-Python one,
    # 4x the CPU of a lab BMC's answer)
    return code, headers, b"" if body is None else json.dumps(body).encode()


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


def problems(found: list[tuple[str, str]]) -> Answer:
    """A 400 naming every problem of a request at once, each with its Base
    MessageId (the first one's in ``error.code``)."""
    body = error_body(found[0][0], "; ".join(message for _id, message in found))
    info = body["error"]["@Message.ExtendedInfo"]
    info[:] = [{**info[0], "MessageId": mid, "Message": message} for mid, message in found]
    return 400, body, ()
