"""Virtual media slots, as each shape's firmware takes an image.

A slot takes ``InsertMedia``/``EjectMedia`` (``action``), a PATCH of
``Image``/``Inserted`` (``patch``), both (``both``: hwlab's own), or HPE's OEM
actions (``oem-hpe``; ``hpe``: those, the standard actions and PATCH); what
it refuses is the vendor's answer (iDRAC's ``RAC0904`` for a slot the
virtual console holds, a missing ``TransferProtocolType`` where iDRAC 10
requires it). :func:`answer` serves the collection and every slot under the
shape's ``vmedia_path``.
"""

from __future__ import annotations

from typing import Any

from bmaas.fakes.incidents import dell_body
from bmaas.hwlab.http import error_body
from bmaas.hwlab.redfish import standard
from bmaas.hwlab.redfish.shapes import documents
from bmaas.hwlab.redfish.shapes.model import Slot
from bmaas.hwlab.redfish.shapes.state import ShapeState

__all__ = ["answer"]

_Answer = standard.Answer

#: iDRAC's answer to an insert into a slot the virtual console holds
_RAC0904 = dell_body(
    "IDRAC.2.9.RAC0904",
    "Virtual Media is detached or already in use.",
    "Make sure the Virtual Media is attached and not in use, and retry the operation.",
    "Warning",
)


def answer(state: ShapeState, method: str, base: str, rest: str, body: Any) -> _Answer:
    shape = state.shape
    if rest == "":
        if method != "GET":
            return _error(405, "Base.1.8.OperationNotAllowed", method, ("GET",))
        members = [f"{base}/{s.id}" for s in shape.slots]
        return 200, standard.collection(base, "VirtualMedia", members), ("GET",)
    slot_id, _, action = rest[1:].partition("/")
    found = next((s for s in shape.slots if s.id == slot_id), None)
    if found is None:
        return _missing(base + rest)
    allow = ("GET", "PATCH") if found.takes != "action" else ("GET",)
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
_ACTIONS = {
    "action": _STANDARD,
    "both": _STANDARD,
    "oem-hpe": _OEM_HPE,
    "hpe": _STANDARD + _OEM_HPE,
}
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


#: what a PATCH of a slot may name, and the types each takes
_MEDIA = {
    "Image": (str, type(None)),
    "Inserted": (bool,),
    "WriteProtected": (bool,),
    "TransferProtocolType": (str,),
    "TransferMethod": (str,),
    "UserName": (str,),
    "Password": (str,),
}


def _patch_slot(state: ShapeState, found: Slot, body: Any) -> _Answer:
    """``Image`` (a URL inserts it, null ejects) and ``Inserted`` (false
    ejects), as services without ``InsertMedia`` take them."""
    if not isinstance(body, dict) or not body:
        return _error(400, "Base.1.8.MalformedJSON", "the body is not a JSON object to apply")
    problems = []
    for name, value in body.items():
        if name not in _MEDIA:
            problems.append(
                ("Base.1.8.PropertyUnknown", f"{name} is not a property this slot takes")
            )
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
        return standard.problems(problems)
    if eject:
        state.eject(found.id, documents.is_cd(found))
        return 204, None, ()
    return _insert(state, found, {**body, "TransferProtocolType": body.get("TransferProtocolType")})


def _error(status: int, message_id: str, message: str, allow: tuple[str, ...] = ()) -> _Answer:
    return status, error_body(message_id, message), allow


def _missing(path: str) -> _Answer:
    return _error(404, "Base.1.8.ResourceMissingAtURI", f"no resource at {path}")
