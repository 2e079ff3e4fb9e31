"""Recorded Redfish trees of real servers, served as captured, with live state.

``tests/fixtures/redfish-trees/<tree>/`` holds one JSON body per resource at
``<URI below /redfish/v1>/index.json`` (the DMTF mockup layout) and a
``SOURCE.md`` naming where it was recorded and under which licence. A
:class:`TreeServer` serves one tree on 127.0.0.1 (a free port) the way a
plain mockup server would -- GET returns the recorded body, unchanged -- and
keeps the state a client changes: ``InsertMedia``/``EjectMedia`` and a PATCH
change a slot, a PATCH of ``Boot`` changes the override (checked against the
tree's ``@Redfish.AllowableValues``), ``ComputerSystem.Reset`` checks its
``ResetType``; a PATCH of a BIOS settings object stages attributes, which a
reset that leaves the system on applies (all, partly or never:
:attr:`Quirks.bios_applies`); an update request (``SimpleUpdate``, or a POST
to the ``MultipartHttpPushUri``) is answered 202 with the ``Location`` of
the task or job a test names (:attr:`Quirks.update_answer`: the answer is
not in the recordings, the task or job it points at is). A tree whose
service matches paths case-insensitively (:data:`IGNORES_CASE`) answers its
own lower-case links to resources recorded in mixed case. Per-tree quirks
(:class:`Quirks`) stand for what vendors do on the wire that a recorded body
cannot show. Every request is recorded, so a
test can count wire calls.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.httpserve import send_json, serving_handler

TREES = Path(__file__).resolve().parents[1] / "fixtures" / "redfish-trees"
ROOT = "/redfish/v1"
#: services that match a path case-insensitively: iLO 5 links its BIOS and
#: registry store in lower case (``/redfish/v1/systems/1/bios/settings/``)
#: while the capture's folders are ``Systems/1/bios`` and ``RegistryStore``
IGNORES_CASE = frozenset({"hpe-dl325-gen10plus"})


@dataclasses.dataclass
class Quirks:
    """What a vendor's service does that its recorded bodies cannot show."""

    #: an ``ETag`` header on every GET (else only a body's ``@odata.etag``)
    etag_header: bool = False
    #: a PATCH without ``If-Match`` answers 428
    require_if_match: bool = False
    #: the next N PATCHes answer 412 (someone else wrote the resource)
    stale_patches: int = 0
    #: slots whose InsertMedia (or PATCH) answers 405 (Cisco C845A)
    refuse_insert: frozenset[str] = frozenset()
    #: slots that answer "in use" (iDRAC RAC0904) to an insert
    in_use: frozenset[str] = frozenset()
    #: GETs of a slot that still read empty after an insert (iDRAC10)
    hidden_reads: int = 0
    #: GETs of a slot that still read inserted after an eject (iDRAC)
    sticky_reads: int = 0
    #: InsertMedia without ``TransferProtocolType`` answers 400 (iDRAC)
    require_protocol: bool = False
    #: ``If-Match`` compared strongly (RFC 9110): a weak ETag never matches
    strong_etags: bool = False
    #: a one-time override reads back ``Enabled=Disabled`` with its target
    #: kept (Supermicro H13)
    once_reads_disabled: bool = False
    #: every PATCH of a system answers this (status, MessageId): a service
    #: that has no such property, or will not have it written (issue 47)
    refuse_system_patch: tuple[int, str] | None = None
    #: the ResetTypes the service takes, whatever the tree lists (None: as
    #: listed); another is answered 400 ActionParameterValueNotInList
    takes_resets: frozenset[str] | None = None
    #: GETs of a system that still read ``On`` after a ForceOff (a node
    #: slow to power down)
    off_lag_reads: int = 0
    #: how much of the BIOS settings object a reset applies: "all", "partly"
    #: (the attributes in ``bios_sticky`` stay pending) or "never"
    bios_applies: str = "all"
    bios_sticky: frozenset[str] = frozenset()
    #: the task or job (a path in the tree) an update request is answered
    #: with (202, ``Location``); None: 204, nothing to follow
    update_answer: str | None = None


def load(name: str) -> dict[str, dict[str, Any]]:
    """The tree ``name``: URI -> recorded body."""
    base = TREES / name
    tree: dict[str, dict[str, Any]] = {}
    for file in sorted(base.rglob("index.json")):
        rel = file.parent.relative_to(base).as_posix()
        uri = ROOT if rel == "." else f"{ROOT}/{rel}"
        tree[uri] = json.loads(file.read_text())
    return tree


def _error(status: int, message_id: str, message: str) -> tuple[int, dict[str, Any]]:
    return status, {
        "error": {
            "code": message_id,
            "message": message,
            "@Message.ExtendedInfo": [{"MessageId": message_id, "Message": message}],
        }
    }


class TreeState:
    """One tree's resources and what clients did to them."""

    def __init__(self, name: str, quirks: Quirks | None = None) -> None:
        self.name = name
        self.quirks = quirks or Quirks()
        self.resources = load(name)
        self.recorded = copy.deepcopy(self.resources)
        self.generation = dict.fromkeys(self.resources, 1)
        self.lock = threading.Lock()
        #: (method, path, body) of every request, in order
        self.requests: list[tuple[str, str, Any]] = []
        #: (method, path, If-Match header) of every request
        self.if_matches: list[tuple[str, str, str | None]] = []
        self._hidden: dict[str, int] = {}
        self._sticky: dict[str, dict[str, Any]] = {}
        self._off_lag: dict[str, int] = {}
        self._folded = {uri.lower(): uri for uri in self.resources}

    # -- what tests look at ------------------------------------------------------------

    def calls(self, method: str | None = None) -> list[tuple[str, str, Any]]:
        return [r for r in self.requests if method is None or r[0] == method]

    def writes(self) -> list[tuple[str, str, Any]]:
        return [r for r in self.requests if r[0] != "GET"]

    def system(self) -> str:
        members = self.resources[f"{ROOT}/Systems"]["Members"]
        assert len(members) == 1
        return str(members[0]["@odata.id"])

    def add(self, uri: str, body: dict[str, Any]) -> None:
        """Serve ``body`` at ``uri`` as if it had been recorded."""
        self.resources[uri] = body
        self.recorded[uri] = copy.deepcopy(body)
        self.generation[uri] = 1
        self._folded[uri.lower()] = uri

    def path_of(self, path: str) -> str:
        """The recorded URI ``path`` names (case-folded where the service does)."""
        if path in self.resources or self.name not in IGNORES_CASE:
            return path
        return self._folded.get(path.lower(), path)

    def etag(self, uri: str) -> str:
        """The resource's ETag: as recorded until it changes, then one per change."""
        recorded = self.recorded[uri].get("@odata.etag")
        if self.generation[uri] == 1 and isinstance(recorded, str):
            return recorded
        return f'W/"{self.name}-{self.generation[uri]}"'

    # -- the service ------------------------------------------------------------------

    def answer(
        self, method: str, path: str, headers: dict[str, str], body: Any
    ) -> tuple[int, dict[str, Any] | None, dict[str, str]]:
        path = self.path_of(path.partition("?")[0].rstrip("/") or "/")
        with self.lock:
            self.requests.append((method, path, body))
            self.if_matches.append((method, path, headers.get("if-match")))
            if method == "GET":
                return self._get(path)
            extra: dict[str, str] = {}
            if method == "POST":
                status, reply = self._post(path, body)
                if status == 202 and self.quirks.update_answer is not None:
                    extra["Location"] = self.quirks.update_answer
            elif method == "PATCH":
                status, reply = self._patch(path, headers, body)
            else:
                status, reply = _error(405, "Base.1.8.OperationNotAllowed", method)
            return status, reply, extra

    def _get(self, path: str) -> tuple[int, dict[str, Any] | None, dict[str, str]]:
        resource = self.resources.get(path)
        if resource is None:
            status, reply = _error(404, "Base.1.8.ResourceMissingAtURI", path)
            return status, reply, {}
        view = copy.deepcopy(resource)
        if self._hidden.get(path, 0) > 0:
            self._hidden[path] -= 1
            view.update(Inserted=False, Image=None, ImageName=None)
        elif path in self._sticky:
            left = self._sticky[path]
            left["reads"] -= 1
            view.update(Inserted=True, Image=left["image"])
            if left["reads"] <= 0:
                del self._sticky[path]
        if self._off_lag.get(path, 0) > 0:
            self._off_lag[path] -= 1
            view["PowerState"] = "On"
        headers = {"ETag": self.etag(path)} if self.quirks.etag_header else {}
        return 200, view, headers

    def _changed(self, uri: str) -> None:
        self.generation[uri] += 1
        if "@odata.etag" in self.resources[uri]:
            self.resources[uri]["@odata.etag"] = self.etag(uri)

    def _post(self, path: str, body: Any) -> tuple[int, dict[str, Any] | None]:
        push = (self.resources.get(f"{ROOT}/UpdateService") or {}).get("MultipartHttpPushUri")
        if path == push:
            return self._update()
        owner, _, action = path.partition("/Actions/")
        resource = self.resources.get(owner)
        actions = (resource or {}).get("Actions") or {}
        if resource is None or f"#{action}" not in actions:
            return _error(404, "Base.1.8.ResourceMissingAtURI", path)
        body = body if isinstance(body, dict) else {}
        if action == "VirtualMedia.InsertMedia":
            return self._insert(owner, resource, body)
        if action == "VirtualMedia.EjectMedia":
            self._eject(owner, resource)
            return 204, None
        if action == "UpdateService.SimpleUpdate":
            return self._update()
        if action == "ComputerSystem.Reset":
            allowed = actions[f"#{action}"].get("ResetType@Redfish.AllowableValues")
            reset = body.get("ResetType")
            # Supermicro X13 lists GracefulShutdown and GracefulRestart fused
            # into one value and takes each of them
            if allowed is not None and not any(str(reset) in value for value in allowed):
                return _error(400, "Base.1.8.ActionParameterValueNotInList", str(reset))
            takes = self.quirks.takes_resets
            if takes is not None and reset not in takes:
                return _error(400, "Base.1.8.ActionParameterValueNotInList", str(reset))
            if reset == "PushPowerButton":  # a momentary press toggles
                off = resource.get("PowerState") == "On"
            else:
                off = reset in ("ForceOff", "GracefulShutdown")
            if off and self.quirks.off_lag_reads and resource.get("PowerState") == "On":
                self._off_lag[owner] = self.quirks.off_lag_reads
            resource["PowerState"] = "Off" if off else "On"
            self._changed(owner)
            if not off:
                self._apply_bios(resource)
            return 204, None
        return _error(400, "Base.1.8.ActionNotSupported", action)

    def _update(self) -> tuple[int, dict[str, Any] | None]:
        """Taken: 202 with the task or job to follow (``Location``, set by
        :meth:`answer`), or 204 when the test names none."""
        return (204 if self.quirks.update_answer is None else 202), None

    def _apply_bios(self, system: dict[str, Any]) -> None:
        """The system boots: its BIOS applies the settings object (as
        ``bios_applies`` says); what is not applied stays staged."""
        bios_path = (system.get("Bios") or {}).get("@odata.id")
        bios = self.resources.get(bios_path) if bios_path else None
        if bios is None or self.quirks.bios_applies == "never":
            return
        target = ((bios.get("@Redfish.Settings") or {}).get("SettingsObject") or {}).get(
            "@odata.id"
        )
        staged = (self.resources.get(target) or {}).get("Attributes") or {}
        for name, value in staged.items():
            partly = self.quirks.bios_applies == "partly"
            if not (partly and name in self.quirks.bios_sticky):
                bios["Attributes"][name] = value
        self._changed(bios_path)

    def _insert(
        self, slot: str, resource: dict[str, Any], body: dict[str, Any]
    ) -> tuple[int, dict[str, Any] | None]:
        refused = self._refused(slot)
        if refused is not None:
            return refused
        if self.quirks.require_protocol and "TransferProtocolType" not in body:
            return _error(
                400,
                "Base.1.8.ActionParameterMissing",
                "The action requires the parameter TransferProtocolType.",
            )
        self._load(slot, resource, body.get("Image"), body)
        return 204, None

    def _refused(self, slot: str) -> tuple[int, dict[str, Any]] | None:
        if slot in self.quirks.refuse_insert:
            return _error(405, "Base.1.8.OperationNotAllowed", f"insert on {slot}")
        if slot in self.quirks.in_use:
            return _error(400, "IDRAC.2.9.RAC0904", "Virtual Media is detached or already in use.")
        return None

    def _load(self, slot: str, resource: dict[str, Any], image: Any, body: dict[str, Any]) -> None:
        resource.update(
            Image=image,
            ImageName=str(image).rsplit("/", 1)[-1],
            Inserted=True,
            ConnectedVia="URI",
            WriteProtected=body.get("WriteProtected", True),
        )
        if "TransferProtocolType" in body:
            resource["TransferProtocolType"] = body["TransferProtocolType"]
        self._sticky.pop(slot, None)
        if self.quirks.hidden_reads:
            self._hidden[slot] = self.quirks.hidden_reads
        self._changed(slot)

    def _eject(self, slot: str, resource: dict[str, Any]) -> None:
        image = resource.get("Image")
        resource.update(Image=None, ImageName=None, Inserted=False, ConnectedVia="NotConnected")
        self._hidden.pop(slot, None)
        if self.quirks.sticky_reads and image:
            self._sticky[slot] = {"reads": self.quirks.sticky_reads, "image": image}
        self._changed(slot)

    def _patch(
        self, path: str, headers: dict[str, str], body: Any
    ) -> tuple[int, dict[str, Any] | None]:
        resource = self.resources.get(path)
        if resource is None:
            return _error(404, "Base.1.8.ResourceMissingAtURI", path)
        match = headers.get("if-match")
        if match is None and self.quirks.require_if_match:
            return _error(428, "Base.1.8.PreconditionRequired", "If-Match is required")
        if self.quirks.stale_patches > 0:
            self.quirks.stale_patches -= 1
            self._changed(path)  # someone else wrote it
            return _error(412, "Base.1.8.PreconditionFailed", "ETag does not match")
        current = self.etag(path)
        if self.quirks.strong_etags and match is not None:
            current = current.removeprefix("W/")  # a weak one sent never matches
        if match is not None and match not in ("*", current):
            return _error(412, "Base.1.8.PreconditionFailed", "ETag does not match")
        body = body if isinstance(body, dict) else {}
        kind = str(resource.get("@odata.type", ""))
        refusal = self.quirks.refuse_system_patch
        if refusal is not None and "ComputerSystem" in kind:
            return _error(refusal[0], refusal[1], ", ".join(body))
        if "VirtualMedia" in kind:
            if ("Image" in body and body["Image"] is None) or body.get("Inserted") is False:
                self._eject(path, resource)
                return 204, None
            refused = self._refused(path)
            if refused is not None:
                return refused
            self._load(path, resource, body.get("Image"), body)
            return 204, None
        if "Boot" in body and "Boot" in resource:
            return self._boot(path, resource["Boot"], body["Boot"])
        if "#Bios." in kind and isinstance(body.get("Attributes"), dict):
            resource.setdefault("Attributes", {}).update(body["Attributes"])
            self._changed(path)
            return 204, None
        return _error(400, "Base.1.8.PropertyNotWritable", ", ".join(body))

    def _boot(
        self, path: str, boot: dict[str, Any], change: dict[str, Any]
    ) -> tuple[int, dict[str, Any] | None]:
        for key, value in change.items():
            allowed = boot.get(f"{key}@Redfish.AllowableValues")
            if allowed is not None and value not in allowed:
                return _error(400, "Base.1.8.PropertyValueNotInList", f"{value} for {key}")
        boot.update(change)
        if self.quirks.once_reads_disabled and boot.get("BootSourceOverrideEnabled") == "Once":
            boot["BootSourceOverrideEnabled"] = "Disabled"  # the target stays
        self._changed(path)
        return 204, None


def _handler(state: TreeState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _serve(self, method: str) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(size) if size else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:  # a multipart image push: kept as sent
                body = raw
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, reply, extra = state.answer(method, self.path, headers, body)
            send_json(self, status, reply, {**extra, "OData-Version": "4.0"})

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

    return Handler


@contextlib.contextmanager
def serving(state: TreeState) -> Iterator[str]:
    """Serve ``state`` on 127.0.0.1 (a free port); the base URL."""
    with serving_handler(_handler(state)) as url:
        yield url
