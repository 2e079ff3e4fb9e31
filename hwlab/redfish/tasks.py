"""A firmware update's DMTF Task document (issue 51), as it stands at an
instant: one function, for hwlab's Redfish engine (the machine's updates,
:mod:`bmaas.hwlab.redfish.lifecycle`) and for the Redfish proxy (the updates
it answers in a real BMC's place, :mod:`bmaas.hwlab.proxy.updates`), so an
emulated and a proxied update read alike.

``TaskState`` and ``PercentComplete`` come from the update's progress
(:meth:`bmaas.fakes.firmware.FirmwareUpdate.progress`); ``Messages`` from
the DMTF Task Event registry (``TaskStarted``, ``TaskCompletedOK``) and, for a
rejected image (``update_rejected``), the Update registry's
``VerificationFailed`` with ``TaskStatus: Critical``.
"""

from __future__ import annotations

from typing import Any

from bmaas.fakes.firmware import FirmwareUpdate

__all__ = ["task"]


def task(path: str, update: FirmwareUpdate, at: float) -> dict[str, Any]:
    """The Task at ``path`` of ``update`` at the instant ``at``."""
    number = update.number
    state, percent = update.progress(at)
    messages = [_message("TaskEvent.1.0.TaskStarted", f"The task {number} has started.", number)]
    if state == "Completed":
        done = f"The task {number} has completed: {update.target} reads {update.version}."
        messages.append(_message("TaskEvent.1.0.TaskCompletedOK", done, number))
    if state == "Exception":  # update_rejected: DMTF Update registry's refusal
        refused = f"Verification of image '{update.image}' at '{update.target}' failed."
        messages.append(_message("Update.1.0.VerificationFailed", refused, number, "Critical"))
    return {
        "@odata.type": "#Task.v1_4_3.Task",
        "@odata.id": path,
        "Id": path.rsplit("/", 1)[-1],
        "Name": f"Update {update.target} from {update.image}",
        "TaskState": state,
        "TaskStatus": "Critical" if state == "Exception" else "OK",
        "PercentComplete": percent,
        "Messages": messages,
    }


def _message(message_id: str, text: str, number: int, severity: str = "OK") -> dict[str, Any]:
    return {
        "MessageId": message_id,
        "Message": text,
        "MessageArgs": [str(number)],
        "MessageSeverity": severity,
    }
