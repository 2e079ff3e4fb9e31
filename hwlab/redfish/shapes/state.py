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

hwlab's own shape (``override_kept`` False) shows the machine itself: the
target of the device it holds, ``Once`` or ``Continuous`` by its
persistence, ``Disabled``/``None`` once cleared while the machine still
holds what clearing left, ``UefiHttp`` while it holds the network boot
that set.
"""

from __future__ import annotations

import dataclasses
import threading

from bmaas.driver import BootDevice, BootSetting
from bmaas.fakes.faults import Effect, Firing
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
        # what a clear (or a UefiHttp override) left the machine holding:
        # how a shape that shows the machine tells them apart (override_kept False)
        self._cleared: BootSetting | None = None
        self._http: BootSetting | None = None
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
        if not self.shape.override_kept:
            return self._shown(now)
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

    def _shown(self, now: BootSetting) -> Override:
        """The override of a shape that shows the machine."""
        if self._cleared == now:
            return Override("Disabled", "None")
        device = BootDevice(now.device)
        target = self.cd_target() if device is BootDevice.CDROM else _NAMES[device]
        if self._http == now:
            target = "UefiHttp"
        return Override("Continuous" if now.persistent else "Once", target)

    def cleared(self) -> bool:
        """No override is set (a lone ``Once``/``Continuous`` has no target)."""
        return self.override().target == "None"

    def set_boot(self, enabled: str | None, target: str | None, firings: list[Firing]) -> None:
        """Apply a PATCH's ``BootSourceOverrideEnabled``/``Target`` (checked
        against the shape; at least one given)."""
        now = self.override()
        if self.shape.override_kept:
            target = target or now.target
            if enabled is None:
                enabled = now.enabled if now.enabled != "Disabled" else "Once"
            if target == "None":
                enabled = "Disabled"
            self.set_override(Override(enabled, target), firings)
            return
        machine = self.machine
        if enabled == "Disabled" or target == "None":
            machine.set_boot_device(BootDevice.DISK, persistent=True, firings=firings)
            if not any(f.effect is Effect.BOOT_NOT_PERSISTED for f in firings):
                self._cleared = machine.boot_device()
            return
        held = machine.boot_device()
        http = target == "UefiHttp" or (target is None and now.target == "UefiHttp")
        if http:
            device = BootDevice.PXE  # a network boot, to the machine
        else:
            device = DEVICES[target] if target is not None else BootDevice(held.device)
        if enabled is not None:
            persistent = enabled == "Continuous"
        else:
            persistent = held.persistent and now.target != "None"
        machine.set_boot_device(device, persistent=persistent, firings=firings)
        after = machine.boot_device()
        self._cleared = None
        self._http = after if http and after.device is BootDevice.PXE else None

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
