"""``bmaas`` management interface: boot device and virtual media.

Boot devices are the four every bmaas driver offers (pxe, disk, cdrom, bios),
persistent or once. Virtual media is the CD slot, where the driver has one
(Redfish; IPMI has none and says so with ``UnsupportedDriverExtension``).
What bmaas does not offer (sensors, boot mode, NMI, indicators) raises
``UnsupportedDriverExtension``, which the conductor treats as "not here".

**Node health** (``get_node_health``, read by Ironic 34+ on every power-sync
pass, ``node.health``): ``bmaas-redfish`` answers the System's
``Status.Health`` from the power read the same sync pass made moments
before (one GET carries both: no request of its own), else from one lean
read; a failed read is typed (``[bmaas CODE ...]``, which Ironic logs and
skips). ``bmaas-ipmi`` raises ``UnsupportedDriverExtension``, as stock
``ipmitool`` does: IPMI has no overall health -- Get Chassis Status's fault
bits cover power, cooling and drives only, and a sensor or SEL sweep would be
a guess by bmaas, not the BMC's verdict -- so ``node.health`` stays empty
rather than claiming an ``OK`` nobody reported. When the pass's power
answer came from the node's event stream (:mod:`bmaas.drivers.ironic.streams`),
so does its health: the BMC's last read, updated by its
``ResourceStatusChanged`` events.
"""

from __future__ import annotations

import logging
from typing import Any, Final, Protocol, runtime_checkable

from ironic.common import boot_devices, exception
from ironic.drivers import base

from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver, BootDevice, Capability, Operation, OtherBootDevice
from bmaas.drivers.ironic import calls, host, info, rules
from bmaas.drivers.ironic.power import protocol_of

__all__ = [
    "HEALTH_FROM_POWER_READ",
    "BmaasManagement",
    "HealthReader",
    "VirtualMediaReader",
    "eject_cd",
    "insert_cd",
]

LOG = logging.getLogger(__name__)

#: seconds a power read's Status.Health answers a health read: Ironic reads
#: health right after the power read of the same sync pass
HEALTH_FROM_POWER_READ = 10.0


@runtime_checkable
class HealthReader(Protocol):
    """A bmaas driver that reads its system's overall health (Redfish)."""

    def get_health(self, *, deadline: Deadline, max_age: float = 0.0) -> str | None: ...


@runtime_checkable
class VirtualMediaReader(Protocol):
    """A bmaas driver that reads its CD slots back (Redfish)."""

    def get_virtual_media(self, *, deadline: Deadline) -> list[dict[str, Any]]: ...


_DEVICES: Final = {
    boot_devices.PXE: BootDevice.PXE,
    boot_devices.DISK: BootDevice.DISK,
    boot_devices.CDROM: BootDevice.CDROM,
    boot_devices.BIOS: BootDevice.BIOS,
}


class BmaasManagement(base.ManagementInterface):
    """Management through bmaas's IPMI or Redfish driver (by hardware type)."""

    def get_properties(self) -> dict[str, str]:
        return {**info.properties("ipmi"), **info.properties("redfish")}

    def validate(self, task: Any) -> None:
        """Check driver_info; no BMC call and no wait for a slot."""
        with calls.translated(task, "validate", calls.BmaasDriverError):
            calls.check(task, protocol_of(task))

    def get_supported_boot_devices(self, task: Any) -> list[str]:
        return list(_DEVICES)

    def set_boot_device(self, task: Any, device: str, persistent: bool = False) -> None:
        if device not in _DEVICES:
            raise exception.InvalidParameterValue(
                f"boot device {device!r} is not one of {', '.join(_DEVICES)}"
            )
        budget = calls.Budget.from_conf()
        deadline = Deadline.after(budget.operation)
        with (
            calls.translated(task, f"set boot device {device}", calls.BmaasDriverError),
            calls.session(task, protocol_of(task), budget, deadline, rt=host.runtime()) as drv,
        ):
            calls.call(
                deadline,
                budget,
                drv.set_boot_device,
                _DEVICES[device],
                persistent=bool(persistent),
            )

    def get_boot_device(self, task: Any) -> dict[str, Any]:
        """A read of the boot device: an operator's (the API's) or a deploy
        step's, so the action rule and ``operation_deadline``; on a shared
        lock (a periodic read) the sync's ``sync_deadline``."""
        budget = calls.Budget.from_conf()
        rule = rules.rule_of(task)
        seconds = budget.sync if rule is rules.Rule.SYNC else budget.operation
        deadline = Deadline.after(seconds)
        with (
            calls.translated(task, "boot device read", calls.BmaasDriverError),
            calls.session(task, protocol_of(task), budget, deadline, rt=host.runtime()) as drv,
        ):
            setting = calls.call(deadline, budget, drv.get_boot_device, rule=rule)
        if setting.device == "UefiHttp":
            # bmaas-https's override (Redfish UefiHttp): Ironic names it
            # (boot_devices.UEFIHTTP, Ironic 35 and 39 alike; stock's
            # redfish management reads it so), not "unknown" (issue 48)
            return {"boot_device": boot_devices.UEFIHTTP, "persistent": setting.persistent}
        if isinstance(setting.device, OtherBootDevice):
            # an override Ironic has no boot device for (Redfish Usb,
            # Utilities): Ironic's contract says None, "unknown"
            return {"boot_device": None, "persistent": setting.persistent}
        return {"boot_device": str(setting.device), "persistent": setting.persistent}

    def get_node_health(self, task: Any) -> Any:
        """The node's health for Ironic's health monitoring (see the module
        docstring): an ``ironic.common.health_states.HealthState``, or None
        when the BMC does not say. A periodic read: the sync rule, within
        ``[bmaas]sync_deadline``."""
        if protocol_of(task) != "redfish":
            raise exception.UnsupportedDriverExtension(
                driver=task.node.driver, extension="get_node_health"
            )
        from ironic.common import health_states  # Ironic 34+: only they ask

        def state(health: str | None) -> Any:
            try:
                return health_states.HealthState(health) if health is not None else None
            except ValueError:  # a value outside Redfish's OK/Warning/Critical
                return None

        budget = calls.Budget.from_conf()  # refused options: named before anything else
        uuid = str(task.node.uuid)
        rt = host.runtime()
        streams = host.streams(rt) if rules.rule_of(task) is rules.Rule.SYNC else None
        if streams is not None:
            found, cached = streams.health(uuid)
            if found:  # the power this pass came from the stream: so does the health
                LOG.debug("bmaas: %s: health %s from the event stream", host.label(task), cached)
                return state(cached)
        deadline = Deadline.after(budget.sync)
        with (
            calls.translated(task, "health read", calls.BmaasDriverError),
            calls.session(task, protocol_of(task), budget, deadline, read=True, rt=rt) as drv,
        ):
            if not isinstance(drv, HealthReader):
                raise exception.UnsupportedDriverExtension(
                    driver=task.node.driver, extension="get_node_health"
                )
            health = calls.call(
                deadline,
                budget,
                drv.get_health,
                max_age=HEALTH_FROM_POWER_READ,
                rule=rules.Rule.SYNC,
            )
        if streams is not None:
            streams.learned_health(uuid, health)
        return state(health)

    def get_sensors_data(self, task: Any) -> dict[str, Any]:
        raise exception.UnsupportedDriverExtension(driver=task.node.driver, extension="sensors")

    def get_virtual_media(self, task: Any) -> list[dict[str, Any]]:
        """The node vmedia API's read (``GET /v1/nodes/{node}/vmedia``): each
        CD slot's media types, whether it holds media and the image, as
        stock ``redfish`` answers. Under the lock's rule, as
        :meth:`get_boot_device`."""
        budget = calls.Budget.from_conf()
        rule = rules.rule_of(task)
        seconds = budget.sync if rule is rules.Rule.SYNC else budget.operation
        deadline = Deadline.after(seconds)
        with (
            calls.translated(task, "virtual media read", calls.BmaasDriverError),
            calls.session(task, protocol_of(task), budget, deadline, rt=host.runtime()) as drv,
        ):
            if not isinstance(drv, VirtualMediaReader) or not drv.supports(
                Capability.VIRTUAL_MEDIA
            ):
                raise exception.UnsupportedDriverExtension(
                    driver=task.node.driver, extension="get_virtual_media"
                )
            return calls.call(deadline, budget, drv.get_virtual_media, rule=rule)

    def attach_virtual_media(self, task: Any, device_type: str, image_url: str) -> None:
        """The node vmedia API's attach (``PUT /v1/nodes/{node}/vmedia``,
        API 1.89+): the CD only, through :func:`insert_cd`."""
        insert_cd(task, image_url, device_type)

    def detach_virtual_media(self, task: Any, device_types: list[str] | None = None) -> None:
        if device_types is not None and boot_devices.CDROM not in device_types:
            return  # bmaas drives the CD slot only; nothing else was attached by it
        eject_cd(task)


def insert_cd(task: Any, url: str, device_type: str = boot_devices.CDROM) -> None:
    """Put ``url`` in the node's CD slot: eject what it holds, insert, read
    it back until the image shows (:mod:`bmaas.drivers.redfish.vmedia`), under
    one ``[bmaas]operation_deadline`` and the action rule; a fault leaves as
    ``BmaasDriverError`` (``UnsupportedDriverExtension`` where the BMC has no
    CD slot) with ``[bmaas CODE retry=SCOPE]`` in its message."""
    budget = calls.Budget.from_conf()
    deadline = Deadline.after(budget.operation)
    with (
        calls.translated(task, "insert virtual media", calls.BmaasDriverError),
        calls.session(task, protocol_of(task), budget, deadline, rt=host.runtime()) as drv,
    ):
        _check_vmedia(drv, Operation.VMEDIA_INSERT, device_type)
        calls.call(deadline, budget, drv.insert_virtual_media, url)


def eject_cd(task: Any) -> None:
    """Eject the node's CD slots that hold media (as :func:`insert_cd`):
    every one, as Ironic asks (its insert was another call's session, so
    the driver holds no record of it: ``force``)."""
    budget = calls.Budget.from_conf()
    deadline = Deadline.after(budget.operation)
    with (
        calls.translated(task, "eject virtual media", calls.BmaasDriverError),
        calls.session(task, protocol_of(task), budget, deadline, rt=host.runtime()) as drv,
    ):
        _check_vmedia(drv, Operation.VMEDIA_EJECT, boot_devices.CDROM)
        calls.call(deadline, budget, drv.eject_virtual_media, force=True)


def _check_vmedia(drv: BMCDriver, op: Operation, device_type: str) -> None:
    if device_type != boot_devices.CDROM:
        raise drv.unsupported(op, f"virtual media {device_type!r}: bmaas drives the CD only")
    if not drv.supports(Capability.VIRTUAL_MEDIA):
        raise drv.unsupported(op)
