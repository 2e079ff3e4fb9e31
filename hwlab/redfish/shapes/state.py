"""The live state a vendor shape shows beside its machine's.

The machine (:class:`~bmaas.fakes.machine.FakeMachine`) holds power, the
boot device it will use and the CD image; a shape adds what its firmware
shows: the override's ``BootSourceOverrideEnabled`` and target as set (a
target the machine cannot boot, such as ``Utilities``, reads back as set),
the boot mode, every slot's image, and a slot still reading empty after an
insert. The firmware **consumes a one-time boot**: once the machine has
booted since a ``Once`` override was set, the override reads ``Disabled``
(with its target kept, as iDRAC, iLO and Supermicro show it).

Whatever changed the machine behind the shape's back (IPMI on the same
machine, the ``boot_once_persistent`` or ``boot_not_persisted`` effects)
is read from the machine, so fault effects show on every shape.
"""

from __future__ import annotations

import dataclasses
import threading

from bmaas.driver import BootDevice, BootSetting
from bmaas.fakes.faults import Firing
from bmaas.fakes.machine import FakeMachine
from bmaas.hwlab.redfish.shapes.model import Shape

__all__ = ["DEVICES", "Override", "ShapeState"]

#: a target -> the device the machine boots (others: the machine falls back
#: to its disk, the override still reads as set)
DEVICES: dict[str, BootDevice] = {
    "Pxe": BootDevice.PXE,
    "Hdd": BootDevice.DISK,
    "Cd": BootDevice.CDROM,
    "UsbCd": BootDevice.CDROM,
    "BiosSetup": BootDevice.BIOS,
}
_NAMES = {BootDevice.PXE: "Pxe", BootDevice.DISK: "Hdd", BootDevice.BIOS: "BiosSetup"}


@dataclasses.dataclass(frozen=True)
class Override:
    """``BootSourceOverrideEnabled`` and ``BootSourceOverrideTarget`` as read."""

    enabled: str
    target: str


@dataclasses.dataclass
class _Set:
    override: Override
    #: what the machine holds right after the set
    held: BootSetting
    #: the machine's boot count then
    boots: int


class ShapeState:
    """One emulated system's shape and the state it shows."""

    def __init__(self, shape: Shape, machine: FakeMachine) -> None:
        self.shape = shape
        self.machine = machine
        self.boot_mode = shape.boot_mode
        #: ``Boot/HttpBootUri`` (shapes that list ``UefiHttp``; None: DHCP's)
        self.http_boot_uri: str | None = None
        self._set: _Set | None = None
        #: image per slot id (the machine's CD mirrors the CD slot that holds one)
        self.images: dict[str, str] = {}
        #: slot id -> reads left that show it empty after an insert
        self.hidden: dict[str, int] = {}
        self.lock = threading.Lock()
        for slot in shape.slots:  # another tool's media, there before bmaas came
            if slot.held is not None:
                self.insert(slot.id, slot.held, slot.is_cd)
                self.hidden.pop(slot.id, None)

    # -- boot override -----------------------------------------------------------

    def cd_target(self) -> str:
        return "UsbCd" if "UsbCd" in self.shape.boot_targets else "Cd"

    def override(self) -> Override:
        """What the system's Boot object shows now."""
        machine = self.machine
        now = machine.boot_device()
        kept = self._set
        if kept is not None and now == kept.held:
            shown = kept.override
            if shown.enabled == "Once" and machine.boots > kept.boots:
                # a one-time override the machine has booted from: consumed
                kept.override = shown = Override("Disabled", shown.target)
            if shown.enabled == "Once" and self.shape.once_reads_disabled:
                return Override("Disabled", shown.target)  # Supermicro H13
            return shown
        if kept is not None and kept.override.enabled == "Once" and machine.boots > kept.boots:
            # booted from it: the machine is back on its own order
            self._set = _Set(Override("Disabled", kept.override.target), now, machine.boots)
            return self._set.override
        return self._derived(now)

    def _derived(self, now: BootSetting) -> Override:
        if now.device is BootDevice.DISK and now.persistent:
            return Override("Disabled", "None")  # no override: the boot order (disk)
        device = BootDevice(now.device)
        target = self.cd_target() if device is BootDevice.CDROM else _NAMES[device]
        return Override("Continuous" if now.persistent else "Once", target)

    def set_override(self, override: Override, firings: list[Firing]) -> None:
        """Apply a PATCH's override (already checked against the shape)."""
        machine = self.machine
        if override.enabled == "Disabled" or override.target == "None":
            device, persistent = BootDevice.DISK, True
        else:
            device = DEVICES.get(override.target, BootDevice.DISK)
            persistent = override.enabled == "Continuous" or device is BootDevice.DISK
            if override.target not in DEVICES:
                persistent = True  # a device the machine cannot boot: its order
        machine.set_boot_device(device, persistent=persistent, firings=firings)
        self._set = _Set(override, BootSetting(device, persistent=persistent), machine.boots)

    # -- virtual media -----------------------------------------------------------

    def insert(self, slot: str, image: str, cd: bool) -> None:
        self.images[slot] = image
        if cd:
            self.machine.insert_media(image)
        if self.shape.insert_hidden_reads:
            self.hidden[slot] = self.shape.insert_hidden_reads

    def eject(self, slot: str, cd: bool) -> None:
        self.images.pop(slot, None)
        self.hidden.pop(slot, None)
        if cd:
            others = [
                image
                for sid, image in self.images.items()
                if any(s.id == sid and s.is_cd for s in self.shape.slots)
            ]
            if others:
                self.machine.insert_media(others[0])
            else:
                self.machine.eject_media()

    def image_shown(self, slot: str, cd: bool) -> str | None:
        """The image a GET of the slot shows (one hidden read used up)."""
        left = self.hidden.get(slot, 0)
        if left > 0:
            self.hidden[slot] = left - 1
            return None
        image = self.images.get(slot)
        if cd and image is not None and self.machine.media != image:
            return self.machine.media  # ejected behind the slot's back (IPMI, control API)
        return image
