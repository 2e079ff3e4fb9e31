"""``bmaas`` bios interface (``bmaas-redfish``): BIOS settings applied and
verified after the reboot that applies them, typed when they did not apply.

``apply_configuration`` (a clean, service or deploy step, no ramdisk needed,
as stock's) runs to its end inside the step, each part through the node's
bmaas driver (:mod:`bmaas.drivers.ironic.lifecycle`):

1. read the BIOS with its registry; each setting's value is typed by it
   (``"7"`` an ``Integer``, ``"true"`` a ``Boolean``) and checked (an
   unknown, read-only, out-of-range or not-allowed value: every problem at
   once, ``[bmaas input_error retry=never]``, ``InvalidParameterValue``,
   nothing sent). Settings that already read as asked, with no other value
   pending, are done: no reboot (stock does the same);
2. stage them (``@Redfish.Settings``, ``OnReset``) and read back that the
   BMC shows them pending;
3. reboot the node through Ironic (``node_power_action``: the node's power
   interface, bmaas's, and Ironic's record of the power state);
4. wait, within ``[bmaas]lifecycle_deadline``, until the settings object no
   longer holds them (the firmware took them at POST) or the system reports
   ``BootProgress`` past POST (``OSBootStarted``, ``OSRunning``, read a poll
   after the reboot: a boot that did not take them will not); then read the
   BIOS back. An attribute that
   does not read as asked fails the step ``[bmaas settings_not_applied
   retry=other_node]``, naming it, what it reads and whether it is still
   pending -- never success.

Stock ``redfish`` does 3 and 4 asynchronously (``CLEANWAIT``/``SERVICEWAIT``
and a periodic task); a setting that never applies keeps it polling until
Ironic's step timeout ends it with an untyped timeout. Here the step holds
its conductor worker (and the node's lock, so the power sync leaves the node
alone) until the end, bounded by ``lifecycle_deadline``.

``factory_reset`` is not a step here: bmaas's driver contract has no BIOS
reset (Redfish ``Bios.ResetBios``) yet, so Ironic refuses the step by name
rather than the BMC failing it later. ``cache_bios_settings`` stores the
attributes with the registry's fields in Ironic's BIOS settings table, as
stock does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from ironic import objects
from ironic.common import states
from ironic.conductor import utils as manager_utils
from ironic.drivers import base

from bmaas.clock import sleep as real_sleep
from bmaas.deadline import Deadline
from bmaas.driver import Capability
from bmaas.driver import Operation as Op
from bmaas.drivers.ironic import lifecycle
from bmaas.hardware import AttributeInfo, BiosSettings, coerce_value

__all__ = ["BOOTED", "POLL", "BmaasBIOS", "registry_fields"]

LOG = logging.getLogger(__name__)

#: seconds between two reads while the node boots to apply the settings
POLL: Final = 5.0
#: BootProgress states past POST: a boot that did not apply the settings
#: by now will not (stock's ``BIOS_REBOOT_STATES``)
BOOTED: Final = frozenset({"OSBootStarted", "OSRunning"})

_ARGSINFO: Final = {
    "settings": {"description": "A list of BIOS settings to be applied", "required": True}
}


def registry_fields(entry: AttributeInfo | None) -> dict[str, Any]:
    """An attribute's registry entry in Ironic's BIOS setting fields."""
    if entry is None:
        return {}
    return {
        "attribute_type": entry.type,
        "allowable_values": list(entry.allowed) if entry.allowed is not None else None,
        "lower_bound": entry.lower,
        "upper_bound": entry.upper,
        "max_length": entry.max_length,
        "read_only": entry.read_only,
    }


class BmaasBIOS(base.BIOSInterface):
    """BIOS settings through bmaas's Redfish driver (see the module docstring)."""

    #: how the step waits between reads (tests put a fake here)
    sleep: Callable[[float], None] = staticmethod(real_sleep)

    def get_properties(self) -> dict[str, str]:
        return lifecycle.properties()

    def validate(self, task: Any) -> None:
        lifecycle.validate(task)

    @base.service_step(priority=0, argsinfo=_ARGSINFO, requires_ramdisk=False)  # type: ignore[untyped-decorator]
    @base.clean_step(priority=0, argsinfo=_ARGSINFO, requires_ramdisk=False)  # type: ignore[untyped-decorator]
    @base.deploy_step(priority=0, argsinfo=_ARGSINFO)  # type: ignore[untyped-decorator]
    @base.cache_bios_settings  # type: ignore[untyped-decorator]
    def apply_configuration(self, task: Any, settings: list[dict[str, Any]]) -> None:
        """Stage ``settings``, reboot, and verify them (module docstring).
        The BMC is let go while Ironic reboots the node (its power interface
        takes the node's BMC itself); one deadline bounds it all."""
        since = time.monotonic()
        deadline = Deadline.after(lifecycle.lifecycle_seconds())
        with lifecycle.operate(task, "BIOS apply", deadline) as op:
            before = op.driver.get_bios(deadline=deadline)
            changes = _typed(settings, before)
            if _already(changes, before):
                LOG.info("bmaas: %s: BIOS settings already applied, no reboot", task.node.uuid)
                return
            op.driver.set_bios(changes, deadline=deadline)
        self.reboot(task)
        with lifecycle.operate(task, "BIOS apply", deadline, since=since) as op:
            self._await_post(op, changes)
            op.driver.verify_bios(changes, deadline=deadline)
        LOG.info("bmaas: %s: BIOS settings applied: %s", task.node.uuid, ", ".join(changes))

    def factory_reset(self, task: Any) -> None:
        """Not a step (module docstring): a direct call is refused."""
        with lifecycle.operate(task, "BIOS factory reset") as op:
            raise op.driver.driver.unsupported(Op.BIOS_SET, "BIOS factory reset")

    def cache_bios_settings(self, task: Any) -> None:
        """Store the BIOS attributes and their registry fields on the node."""
        with lifecycle.operate(task, "BIOS read") as op:
            found = op.driver.get_bios(deadline=op.deadline)
        registry = found.registry or {}
        rows = [
            {"name": name, "value": value, **registry_fields(registry.get(name))}
            for name, value in found.current.items()
        ]
        node_id = task.node.id
        create, update, delete, _same = objects.BIOSSettingList.sync_node_setting(
            task.context, node_id, rows
        )
        if create:
            objects.BIOSSettingList.create(task.context, node_id, create)
        if update:
            objects.BIOSSettingList.save(task.context, node_id, update)
        if delete:
            objects.BIOSSettingList.delete(task.context, node_id, [d["name"] for d in delete])

    def reboot(self, task: Any) -> None:
        """The reboot that applies the settings: Ironic's, through the node's
        power interface, so Ironic records the power state it leaves."""
        manager_utils.node_power_action(task, states.REBOOT)

    def _await_post(self, op: lifecycle.Operation, changes: Mapping[str, Any]) -> None:
        """Until the settings object no longer holds ``changes`` or the boot
        is past POST, within the step's deadline less one read. The first
        read's ``BootProgress`` is not trusted: right after the power action
        a BMC may still show the last boot's ``OSRunning``."""
        drv = op.driver
        progress = drv.driver.supports(Capability.BOOT_PROGRESS)
        wait = op.deadline.share(max(0.0, op.deadline.left() - (drv.limits.bmc_timeout or 0.0)))
        first = True
        while True:
            pending = drv.get_bios(deadline=op.deadline).pending
            if not any(name in pending for name in changes):
                return
            if progress and not first and drv.get_boot_progress(deadline=op.deadline) in BOOTED:
                return
            if wait.expired:
                return  # read back now: what still is pending is named
            wait.sleep(POLL, self.sleep)
            first = False


def _typed(settings: list[dict[str, Any]], before: BiosSettings) -> dict[str, Any]:
    """Ironic's ``[{"name", "value"}]`` as attribute values typed by the
    registry (or the current value's type); the driver checks them."""
    registry = before.registry or {}
    out: dict[str, Any] = {}
    for s in settings:
        name, value = s["name"], s["value"]
        if isinstance(value, str):
            value = coerce_value(value, registry.get(name), before.current.get(name))
        out[name] = value
    return out


def _already(changes: Mapping[str, Any], before: BiosSettings) -> bool:
    return all(
        before.current.get(name) == value and before.pending.get(name, value) == value
        for name, value in changes.items()
    )
