"""Virtual media wherever the Redfish service keeps it.

Real services put the CD/DVD slot in different places and take it in
different ways; this module reads what the service says and never assumes
one vendor. docs/vendors.md ("Quirks the driver handles") is the table of
what each service does and what bmaas does (the recorded trees in
``tests/fixtures/redfish-trees`` hold one of each shape). Two rules worth
the why here: an insert ejects first and never returns early on "already
inserted" (``Inserted`` stays true for a while after an eject: Ironic 38),
and a request answered "later" part way through an insert resumes from that
request when retried (:class:`Insertion`): a step the BMC answered is not
sent again.

Requests: finding the slots reads each Manager, each collection and each
slot once per driver (the paths are kept); an insert then reads the slot,
ejects if it holds media (1 request + 1 read), sends the insert (1) and
reads back until the image shows (1 or more); an eject reads each CD slot
and ejects those holding media.
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from collections.abc import Callable
from typing import Any

import sushy.exceptions as sushy_exc

from bmaas.deadline import Deadline
from bmaas.drivers.redfish.connector import BoundedConnector
from bmaas.drivers.redfish.faults import status_fault
from bmaas.drivers.redfish.power import UNREADABLE
from bmaas.drivers.redfish.preconditions import Resource, patch, read
from bmaas.faults import BMCBusy, BMCFault, UnsupportedOperation

__all__ = [
    "CD_TYPES",
    "NEXT_SLOT",
    "Insertion",
    "Slot",
    "VirtualMediaSlots",
    "find_cd_slots",
    "is_cd_slot",
    "managers_of",
]

#: a slot that takes an ISO image
CD_TYPES = frozenset({"CD", "DVD"})

#: answers after which the insert tries the next CD slot: the slot cannot
#: take the image (405: no InsertMedia there, Cisco C845A per Ironic) or is
#: held by someone else (iDRAC RAC0904/VRM0021 "Virtual Media is detached or
#: already in use"). With no slot left, the last answer's fault is raised.
NEXT_SLOT: tuple[str, ...] = ("RAC0904", "VRM0021")

#: builds a fault of a class with a message, naming node, operation, address
FaultBuilder = Callable[[type[BMCFault], str], BMCFault]


def _link(body: dict[str, Any], *keys: str) -> str | None:
    value: Any = body
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) and value else None


def find_cd_slots(
    conn: BoundedConnector,
    system: dict[str, Any],
    root: dict[str, Any] | None = None,
    *,
    answered: dict[str, Resource] | None = None,
) -> list[str]:
    """The CD/DVD slots of ``system`` (its JSON): those of every Manager of
    it (:func:`managers_of`) that links ``VirtualMedia``; where they have
    none, the System's own. ``root``: the service root's JSON, for a system
    that links no Manager.

    The System's collection is read only when the Managers have no CD slot:
    a service that links both (sushy-tools, so hwlab) shows the same slots
    twice, under two ids.

    ``answered``: the links read so far (kept by the caller across
    attempts): a search the BMC refused part way ("later") goes on from the
    refused read, never sending again a read it answered (issue 50)."""
    seen = answered if answered is not None else {}
    collections: list[str] = []
    for path in managers_of(conn, system, root, answered=seen):
        found = _link(_read(conn, path, seen).body, "VirtualMedia", "@odata.id")
        if found is not None:
            collections.append(found)
    slots = _cd_members(conn, collections, seen)
    own = _link(system, "VirtualMedia", "@odata.id")
    if not slots and own is not None and own not in collections:
        slots = _cd_members(conn, [own], seen)
    return slots


def _read(conn: BoundedConnector, path: str, answered: dict[str, Resource]) -> Resource:
    """``path`` as the BMC answered it in this search; read once."""
    if path not in answered:
        answered[path] = read(conn, path)
    return answered[path]


def _members(
    conn: BoundedConnector, collection: str | None, answered: dict[str, Resource]
) -> list[str]:
    if collection is None:
        return []
    listed = _read(conn, collection, answered).body.get("Members") or []
    found = (_link(m, "@odata.id") for m in listed)
    return [path for path in found if path is not None]


def managers_of(
    conn: BoundedConnector,
    system: dict[str, Any],
    root: dict[str, Any] | None = None,
    *,
    answered: dict[str, Resource] | None = None,
) -> list[str]:
    """The Managers of ``system``: its ``Links.ManagedBy``; else its
    ``Links.Managers`` (another vendor's name for the link); else, on a
    service with exactly one system, its only Manager (read from ``root``'s
    collections: 2 GETs). None otherwise: bmaas never guesses between two."""
    links = system.get("Links") or {}
    for key in ("ManagedBy", "Managers"):
        listed = links.get(key)
        paths = [_link(m, "@odata.id") for m in listed] if isinstance(listed, list) else []
        if any(paths):
            return [p for p in paths if p is not None]
    if root is None:
        return []
    seen = answered if answered is not None else {}
    if len(_members(conn, _link(root, "Systems", "@odata.id"), seen)) != 1:
        return []
    managers = _members(conn, _link(root, "Managers", "@odata.id"), seen)
    return managers if len(managers) == 1 else []


def _cd_members(
    conn: BoundedConnector, collections: list[str], answered: dict[str, Resource]
) -> list[str]:
    slots: list[str] = []
    for collection in collections:
        for path in _members(conn, collection, answered):
            if path not in slots and is_cd_slot(conn, _read(conn, path, answered).body):
                slots.append(path)
    return slots


#: words of a slot's Id or Name that make it a CD slot
_CD_WORDS = frozenset({"cd", "dvd", "cdrom", "dvdrom", "cddvd"})


def _names_cd(value: Any) -> bool:
    """Whether an Id or Name says CD/DVD (``CD1``, ``Virtual CD``, ``VirtualCD``,
    ``CD/DVD``, ``cdrom``); not ``Floppy1`` or ``RemovableDisk``."""
    if not isinstance(value, str):
        return False
    words = re.split(r"[^a-z]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", value).lower())
    return any(word in _CD_WORDS for word in words)


def is_cd_slot(conn: BoundedConnector, slot: dict[str, Any]) -> bool:
    """Whether ``slot`` (its JSON) takes a CD/DVD image: its ``MediaTypes``
    decide where it lists any; a slot without them (AMI-based services:
    ``Managers/Self/VirtualMedia/CD1``) is one when its Id or Name says CD
    or DVD, or its ``InsertMedia`` allows a CD/DVD ``MediaType`` (inline or
    in the action's ActionInfo: 1 GET; an unreadable one says no)."""
    types = slot.get("MediaTypes")
    if isinstance(types, list) and types:
        return bool(CD_TYPES & {str(t) for t in types})
    if _names_cd(slot.get("Id")) or _names_cd(slot.get("Name")):
        return True
    action = (slot.get("Actions") or {}).get("#VirtualMedia.InsertMedia")
    if not isinstance(action, dict):
        return False
    allowed = action.get("MediaType@Redfish.AllowableValues")
    info = _link(action, "@Redfish.ActionInfo")
    if not isinstance(allowed, list) and info is not None:
        try:
            parameters = read(conn, info).body.get("Parameters") or []
        except UNREADABLE as exc:
            if not _says_no(exc):
                raise  # busy, failing or refusing us: a fault, not an answer
            return False
        allowed = next(
            (
                p.get("AllowableValues")
                for p in parameters
                if isinstance(p, dict) and p.get("Name") == "MediaType"
            ),
            None,
        )
    return isinstance(allowed, list) and bool(CD_TYPES & {str(v) for v in allowed})


def _says_no(exc: Exception) -> bool:
    """Whether a failed ActionInfo read answers "this slot takes no CD": a
    broken document, or a status the driver's one status map
    (:func:`~bmaas.drivers.redfish.faults.status_fault`) calls unsupported
    (405, 501) or does not name (400, 404) does; busy (409, 429, 503), an
    auth refusal (401, 403), any other 5xx, or 408 (the service gave up
    waiting for our request) does not. Found once per driver, a "no" read
    from a busy BMC would refuse virtual media for the driver's life."""
    if not isinstance(exc, sushy_exc.HTTPError):
        return True  # malformed: the document is what it is
    if exc.status_code == 408:
        return False
    cls = status_fault(exc.status_code)
    return cls is None or cls is UnsupportedOperation


@dataclasses.dataclass(frozen=True)
class Slot:
    """One virtual media slot as just read."""

    resource: Resource

    @property
    def path(self) -> str:
        return self.resource.path

    @property
    def body(self) -> dict[str, Any]:
        return self.resource.body

    @property
    def shows_media(self) -> bool:
        """Whether the slot reads as holding an image (``Inserted`` true, or
        absent with an ``Image`` set)."""
        image = self.body.get("Image") or self.body.get("ImageName")
        return bool(image) and self.body.get("Inserted") is not False

    def holds(self, url: str) -> bool:
        """Whether the slot reads as holding the image at ``url``: its
        ``Image`` is that URL (credentials in it aside: a BMC may not show
        them), or, where it shows no ``Image``, its ``ImageName`` is the
        URL's file name."""
        if not self.shows_media:
            return False
        image = self.body.get("Image")
        if isinstance(image, str) and image:
            return _plain(image) == _plain(url)
        name = self.body.get("ImageName")
        return isinstance(name, str) and name == url.rstrip("/").rsplit("/", 1)[-1]

    def action(self, name: str) -> dict[str, Any] | None:
        found = (self.body.get("Actions") or {}).get(name)
        return found if isinstance(found, dict) and found.get("target") else None


def _plain(url: str) -> str:
    """``url`` without user information and a trailing slash."""
    parts = urllib.parse.urlsplit(url.strip())
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=host)).rstrip("/")


def _says(exc: sushy_exc.HTTPError, *texts: str) -> bool:
    info = exc.extended_info if isinstance(exc.extended_info, list) else []
    haystack = " ".join([str(exc.code or ""), str(exc.detail or ""), str(info)])
    return any(text in haystack for text in texts)


@dataclasses.dataclass
class Insertion:
    """How far one insert of ``url`` got. A step is marked done only once
    the BMC answered its request, so an insert run again after a request
    the BMC refused ("later": nothing done) sends that request again and
    none before it: no second eject, no second insert of an image the BMC
    took (issue 50). Each operation has its own: a new insert reads the slot
    and ejects first, whatever an earlier one left undone."""

    url: str
    #: the links read while finding the CD slots (a driver's first call):
    #: :func:`find_cd_slots`'s ``answered``
    found: dict[str, Resource] = dataclasses.field(default_factory=dict)
    #: the CD slots to try, in order, and the one being tried
    paths: list[str] = dataclasses.field(default_factory=list)
    at: int = 0
    #: the slot as last read (None: read it next), and whether its media was ejected
    slot: Slot | None = None
    ejected: bool = False
    #: the BMC took the image: only the read back is left
    sent: bool = False
    #: the last refusal that moved on to the next slot (raised when none is left)
    last: sushy_exc.HTTPError | None = None
    #: the insert's requests the BMC carried out so far
    steps: int = 0

    @property
    def answered(self) -> int:
        """Requests the BMC answered so far, the search for the slots
        included (:attr:`bmaas.faults.Resume.at`)."""
        return len(self.found) + self.steps

    def start(self, paths: list[str]) -> None:
        """From the first of ``paths``, nothing done."""
        self.paths, self.at, self.last, self.steps = list(paths), 0, None, 0
        self.slot, self.ejected, self.sent = None, False, False

    def next_slot(self, refusal: sushy_exc.HTTPError) -> None:
        """The slot refused the image (405, in use): on to the next one."""
        self.at, self.last, self.steps = self.at + 1, refusal, self.steps + 1
        self.slot, self.ejected, self.sent = None, False, False


@dataclasses.dataclass
class VirtualMediaSlots:
    """Insert and eject on one system's CD slots (found by :func:`find_cd_slots`)."""

    conn: BoundedConnector
    paths: list[str]
    #: makes a fault naming the node and the call's operation
    fault: FaultBuilder
    sleep: Callable[[float], None]
    #: seconds between read-backs of an insert that does not show yet
    poll_interval: float = 1.0
    #: seconds kept for the read after the wait (its turn at the BMC's gate
    #: and its answer): a read-back never starts a read the deadline cuts off
    reserve: float = 0.25
    #: read-backs the last insert took (1: shown at once)
    readbacks: int = 0

    def insert(self, url: str, deadline: Deadline, progress: Insertion | None = None) -> str:
        """Put ``url`` in the first CD slot that takes it; the slot's path.
        ``progress``: this insert so far (kept by the caller across attempts),
        which goes on from the first request not yet answered."""
        done = progress if progress is not None else Insertion(url)
        if done.paths != self.paths:  # its first run, or the slots found afresh
            done.start(self.paths)
        while done.at < len(done.paths):
            path = done.paths[done.at]
            if not done.sent:
                if done.slot is None:
                    done.slot = Slot(read(self.conn, path))
                    done.steps += 1
                if done.slot.shows_media and not done.ejected:
                    # Eject before insert (Ironic 38): iDRACs keep Inserted true
                    # for a while after an eject, and a slot holding another image
                    # refuses a new one.
                    self._eject(done.slot)
                    done.ejected, done.slot = True, None  # read again: its new ETag
                    done.steps += 1
                    continue
                try:
                    self._put(done.slot, url)
                except sushy_exc.HTTPError as exc:
                    if exc.status_code == 405 or _says(exc, *NEXT_SLOT):
                        done.next_slot(exc)
                        continue
                    raise
                done.sent = True
                done.steps += 1
            self._await_shown(path, deadline)
            return path
        assert done.last is not None  # there is at least one path
        raise done.last

    def describe(self) -> list[dict[str, Any]]:
        """Each CD slot as it reads now (1 GET a slot): its ``MediaTypes``,
        whether it holds media (:attr:`Slot.shows_media`) and its ``Image``
        -- the shape Ironic's node vmedia API answers with."""
        found = []
        for path in self.paths:
            slot = Slot(read(self.conn, path))
            types = slot.body.get("MediaTypes") or []
            found.append(
                {
                    "media_types": [str(t) for t in types] if isinstance(types, list) else [],
                    "inserted": slot.shows_media,
                    "image": slot.body.get("Image") or None,
                }
            )
        return found

    def eject(self, wanted: Callable[[Slot], bool] | None = None) -> tuple[list[str], list[Slot]]:
        """Eject the CD slots holding media that ``wanted`` picks (None:
        every one); the paths ejected, and the slots left holding media."""
        ejected: list[str] = []
        left: list[Slot] = []
        for path in self.paths:
            slot = Slot(read(self.conn, path))
            if not slot.shows_media:
                continue
            if wanted is None or wanted(slot):
                self._eject(slot)
                ejected.append(path)
            else:
                left.append(slot)
        return ejected, left

    def _put(self, slot: Slot, url: str) -> None:
        body: dict[str, Any] = {"Image": url, "Inserted": True, "WriteProtected": True}
        action = slot.action("#VirtualMedia.InsertMedia")
        if action is None:
            # DMTF reference, Lenovo XCC, iLO 5 1.x: the slot is PATCHed (no
            # Allow header needed: the standard makes Image writable)
            patch(self.conn, slot.resource, body)
            return
        protocol = url.partition(":")[0].upper()
        listed = action.get("TransferProtocolType@Redfish.AllowableValues")
        if isinstance(listed, list) and listed:
            if protocol not in listed:
                raise self.fault(
                    UnsupportedOperation,
                    f"slot {slot.path} takes {', '.join(map(str, listed))}, not {protocol}",
                )
            body["TransferProtocolType"] = protocol
        try:
            self.conn.post(action["target"], data=body)
        except sushy_exc.HTTPError as exc:
            # iDRAC may require it without listing it (sushy re-posts too)
            if "TransferProtocolType" in body or not _says(exc, "TransferProtocolType"):
                raise
            self.conn.post(action["target"], data={**body, "TransferProtocolType": protocol})

    def _eject(self, slot: Slot) -> None:
        action = slot.action("#VirtualMedia.EjectMedia")
        if action is None:
            patch(self.conn, slot.resource, {"Image": None, "Inserted": False})
        else:
            self.conn.post(action["target"], data={})

    def _await_shown(self, path: str, deadline: Deadline) -> None:
        """Read the slot back until the image shows (iDRAC10 reads empty for
        seconds after a 204), while the call's deadline leaves room."""
        self.readbacks = 0
        while True:
            self.readbacks += 1
            if Slot(read(self.conn, path)).shows_media:
                return
            if deadline.left() <= self.poll_interval + self.reserve:
                raise self.fault(
                    BMCBusy,
                    f"slot {path} accepted the image but still reads empty after "
                    f"{self.readbacks} read(s): not shown before the deadline",
                )
            self.sleep(self.poll_interval)
