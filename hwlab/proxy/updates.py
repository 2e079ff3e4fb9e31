"""Firmware updates a Redfish proxy answers in the BMC's place (issue 51).

A proxy cannot make a real BMC's update hang, fail verification or land
nothing, so it carries out the update effects as it carries out
``power_stuck`` (:data:`bmaas.hwlab.proxy.effects.ACKNOWLEDGED`): the
``SimpleUpdate`` POST is answered 202 with ``Location`` a Task the proxy
serves itself (``/redfish/v1/TaskService/Tasks/hwlab-proxy-<n>``, the
document hwlab's engine serves: :func:`bmaas.hwlab.redfish.tasks.task`) and
is never relayed, so the BMC's inventory keeps reading what it read (what
each effect then shows: docs/lab.md, "Proxy"). ``update_reboot`` with
``version=new`` is relayed: the update is the BMC's own.

Stock sushy-tools (2.2) has no task of its own to hang: its libvirt driver
bumps the System's ``BiosVersion`` at once and answers 204 naming a stub
task that always reads Completed; its fake driver answers 500.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from bmaas.fakes.effects import Effect
from bmaas.fakes.faults import Firing
from bmaas.fakes.firmware import FirmwareUpdate, image_version, shaped
from bmaas.hwlab.http import Request, Response
from bmaas.hwlab.redfish import tasks

__all__ = ["EFFECTS", "UPDATE_TIME", "Updates", "reboot_after", "relayed"]

#: the update effects a Redfish proxy carries out
EFFECTS = frozenset(
    {Effect.TASK_HANG, Effect.UPDATE_REJECTED, Effect.VERSION_UNCHANGED, Effect.UPDATE_REBOOT}
)

#: seconds from the POST until a proxy's task ends (unless it hangs)
UPDATE_TIME = 0.5

_TASKS = "/redfish/v1/TaskService/Tasks/hwlab-proxy-"
_HEADERS = [("Content-Type", "application/json"), ("OData-Version", "4.0")]


def relayed(firing: Firing) -> bool:
    """Whether the BMC takes the update itself (``update_reboot``, new version)."""
    return firing.effect is Effect.UPDATE_REBOOT and firing.params.get("version") != "old"


class Updates:
    """The updates one proxy answered, on its clock (``clock()``, seconds)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._taken: list[FirmwareUpdate] = []

    def take(self, firing: Firing, request: Request) -> Response | None:
        """The 202 for a ``SimpleUpdate`` POST shaped by ``firing``; None:
        relay it (see :func:`relayed`, or a body with no ``ImageURI``: the
        BMC says what is wrong with it)."""
        try:
            body = json.loads(request.body or b"{}")
        except ValueError:
            body = None
        image = body.get("ImageURI") if isinstance(body, dict) else None
        if relayed(firing) or not isinstance(image, str):
            return None
        targets = body.get("Targets") if isinstance(body, dict) else None
        target = str(targets[0]).rstrip("/").rsplit("/", 1)[-1] if targets else "the BMC's choice"
        now = self._clock()
        lands = now if firing.effect is Effect.UPDATE_REBOOT else now + UPDATE_TIME
        update = FirmwareUpdate(
            len(self._taken) + 1, target, image, image_version(image, None), now, lands
        )
        update = shaped(update, {str(firing.effect): dict(firing.params)})
        self._taken.append(update)
        path = f"{_TASKS}{update.number}"
        document = tasks.task(path, update, now)
        return Response(202, [("Location", path), *_HEADERS], json.dumps(document).encode())

    def answer(self, request: Request) -> Response | None:
        """A GET of one of this proxy's tasks; None: not one of them."""
        path = request.path.rstrip("/")
        if request.method != "GET" or not path.startswith(_TASKS):
            return None
        number = path[len(_TASKS) :]
        if not number.isdigit() or not 0 < int(number) <= len(self._taken):
            return None
        update = self._taken[int(number) - 1]
        document = tasks.task(path, update, self._clock())
        return Response(200, list(_HEADERS), json.dumps(document).encode())


def reboot_after(firing: Firing | None, sent: Response | None) -> float | None:
    """Seconds the BMC goes down for once ``sent`` (the answer to a request
    ``firing`` fired on) is on its way: ``update_reboot``'s ``duration``,
    when the update was taken (a BMC that refuses it does not reboot)."""
    if firing is None or firing.effect is not Effect.UPDATE_REBOOT:
        return None
    if sent is None or sent.status >= 300:
        return None
    return float(firing.params["duration"])
