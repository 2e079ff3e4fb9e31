"""``bmaas`` firmware interface (``bmaas-redfish``): firmware updates followed
to their end through a rebooting BMC, typed where they end otherwise.

The ``update`` step (clean or service, no ramdisk needed) takes Ironic's
settings -- ``[{"component": "bios", "url": "https://..."}, ...]`` -- and
updates each component in turn with bmaas's ``update_firmware``
(:mod:`bmaas.updates`): ``SimpleUpdate`` or ``MultipartHttpPushUri``,
whichever the BMC offers, the image's POST never sent twice; the BMC's task
or job followed to its end; a BMC that reboots into its new firmware waited
for (3 answers 30 s apart within 300 s, Ironic's own bound); the version read
back. Each component within ``[bmaas]lifecycle_deadline``. How each ends:

=====================================  ======================================
the BMC...                              the step
=====================================  ======================================
finishes, the version changed           goes on; done after the last one
rejects the image                       ``[bmaas request_rejected retry=never]``
keeps the task running                  ``[bmaas task_stuck retry=other_node]``
is not back after its reboot            ``[bmaas bmc_not_back retry=other_node]``
reports done, the version unchanged     ``[bmaas settings_not_applied ...]``
=====================================  ======================================

A component is Ironic's name (``bios``, ``bmc``; ``nic:ID``) or the id the
BMC's ``FirmwareInventory`` gives it (any case); one the BMC does not list
is refused before anything is sent, every bad entry named at once
(``[bmaas input_error retry=never]``). Stock ``redfish`` follows the update
asynchronously (``CLEANWAIT``, a periodic task); this step holds its
conductor worker and the node's lock until the end, so Ironic's power sync
does not touch the node while the BMC is away. Unlike stock, it does not
reboot the host after a BIOS image: the BMC's task says when it is done.

``cache_firmware_components`` stores what the BMC's ``FirmwareInventory``
reports in Ironic's firmware components table (``bios`` and ``bmc`` under
Ironic's names, every other component under its id).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from typing import Any, Final

from ironic import objects
from ironic.drivers import base

from bmaas.deadline import Deadline
from bmaas.drivers.ironic import lifecycle
from bmaas.faults import InputError
from bmaas.hardware import FirmwareComponent
from bmaas.updates import UpdateBounds

__all__ = ["IRONIC_NAMES", "BmaasFirmware", "targets"]

LOG = logging.getLogger(__name__)

#: components Ironic names by role (``redfish_utils.BIOS``/``BMC``)
IRONIC_NAMES: Final = ("bios", "bmc")

_ARGSINFO: Final = {
    "settings": {
        "description": "A list of dicts with firmware components to be updated",
        "required": True,
    }
}
#: out of band, as the service step of stock's (its clean step needs a ramdisk)
_STEP: Final[dict[str, Any]] = {
    "priority": 0,
    "abortable": False,
    "argsinfo": _ARGSINFO,
    "requires_ramdisk": False,
}


def _component_name(c: FirmwareComponent) -> str:
    return c.id.lower() if c.id.lower() in IRONIC_NAMES else c.id


def targets(
    settings: Any, have: Sequence[FirmwareComponent], *, node: str
) -> list[tuple[str, str]]:
    """``(image URL, component id)`` for each of Ironic's settings, in order;
    ``InputError`` naming every bad entry at once, one a line."""
    ids = {c.id.lower(): c.id for c in have}
    problems: list[str] = []
    out: list[tuple[str, str]] = []
    if not isinstance(settings, list) or not settings:
        settings, problems = [], ["settings: a non-empty list of {component, url} is required"]
    for n, entry in enumerate(settings):
        where = f"settings[{n}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: must be a dict with component and url")
            continue
        component, url = entry.get("component"), entry.get("url")
        if not isinstance(url, str) or not url:
            problems.append(f"{where}.url: is required")
        name = str(component or "").lower().removeprefix("nic:")
        if not component:
            problems.append(f"{where}.component: is required")
        elif name not in ids:
            problems.append(
                f"{where}.component: {component!r} is not one the BMC lists "
                f"({', '.join(sorted(ids.values()))})"
            )
        elif isinstance(url, str) and url:
            out.append((url, ids[name]))
    if problems:
        raise InputError("\n".join(problems), node=node, field="settings")
    return out


class BmaasFirmware(base.FirmwareInterface):
    """Firmware through bmaas's Redfish driver (see the module docstring)."""

    #: how each update is bounded (tests make the waits short)
    bounds: UpdateBounds = UpdateBounds()

    def get_properties(self) -> dict[str, str]:
        return lifecycle.properties()

    def validate(self, task: Any) -> None:
        lifecycle.validate(task)

    @base.clean_step(**_STEP)  # type: ignore[untyped-decorator]
    @base.service_step(**_STEP)  # type: ignore[untyped-decorator]
    def update(self, task: Any, settings: list[dict[str, Any]]) -> None:
        """Update each component in turn (module docstring)."""
        since = time.monotonic()
        node = str(task.node.uuid)
        with lifecycle.operate(task, "firmware update") as op:
            have = op.driver.get_firmware_inventory(deadline=op.deadline)
            work = targets(settings, have, node=node)
        for url, target in work:
            deadline = Deadline.after(lifecycle.lifecycle_seconds())
            bounds = dataclasses.replace(self.bounds, task=min(self.bounds.task, deadline.left()))

            def progress(line: str, target: str = target) -> None:
                LOG.info("bmaas: %s: firmware %s: %s", node, target, line)

            with lifecycle.operate(task, f"firmware update {target}", deadline, since=since) as op:
                op.driver.update_firmware(
                    url, targets=(target,), deadline=deadline, bounds=bounds, progress=progress
                )
        self.cache_firmware_components(task)

    def cache_firmware_components(self, task: Any) -> None:
        """Store the BMC's firmware components on the node (module docstring)."""
        with lifecycle.operate(task, "firmware inventory read") as op:
            found = op.driver.get_firmware_inventory(deadline=op.deadline)
        # component and version only: Ironic 35 has no vendor, model or serial
        rows = [
            {"component": _component_name(c), "current_version": c.version}
            for c in found
            if c.version
        ]
        if not rows:
            return
        node_id = task.node.id
        create, update, _same = objects.FirmwareComponentList.sync_firmware_components(
            task.context, node_id, rows
        )
        for row in create:
            objects.FirmwareComponent(task.context, node_id=node_id, **row).create()
        for row in update:
            kept = objects.FirmwareComponent.get(
                task.context, node_id=node_id, name=row["component"]
            )
            if kept.current_version != row["current_version"]:
                kept.last_version_flashed = row["current_version"]
                kept.current_version = row["current_version"]
                kept.save()
