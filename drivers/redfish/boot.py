"""Boot overrides as each Redfish service allows them.

Pure functions over a ComputerSystem's ``Boot`` object (the driver does the
requests). What each service shows and what bmaas makes of it (no
``Continuous``: a persistent request sent as ``Once`` before every power-on,
``Quirk.BOOT_NO_CONTINUOUS``; Supermicro's ``UsbCd``; a once override that
reads back ``Disabled``, ``Quirk.BOOT_ONCE_READS_DISABLED``; ``boot_mode`` as
``BootSourceOverrideMode``; an override bmaas has no device for, read as
:class:`~bmaas.driver.OtherBootDevice`; a ``Boot`` without
``BootSourceOverride*``, ``UnsupportedOperation`` before any PATCH) is
docs/vendors.md's quirk table; UEFI HTTP boot (:class:`HttpBoot`, the URI
read back) is docs/ironic.md's. The rule throughout: what the service lists
decides, and a value it does not list is ``UnsupportedOperation`` before
anything is sent.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bmaas.driver import BootDevice, BootSetting, OtherBootDevice

__all__ = [
    "CONTINUOUS",
    "DISABLED",
    "HTTP_URI",
    "MODES",
    "ONCE",
    "TARGETS",
    "UEFI_HTTP",
    "HttpBoot",
    "NotAllowed",
    "allows_continuous",
    "frequency",
    "mode_for",
    "mode_of",
    "offers_override",
    "override",
    "setting_of",
    "target_for",
]

ONCE, CONTINUOUS, DISABLED = "Once", "Continuous", "Disabled"

#: the Redfish target bmaas sends for each device
TARGETS: dict[BootDevice, str] = {
    BootDevice.PXE: "Pxe",
    BootDevice.DISK: "Hdd",
    BootDevice.CDROM: "Cd",
    BootDevice.BIOS: "BiosSetup",
}
#: UEFI HTTP boot (ComputerSystem 1.9+): the firmware fetches an image over
#: HTTP(S) from ``HttpBootUri`` (or the URI DHCP hands out when none is set)
UEFI_HTTP = "UefiHttp"
HTTP_URI = "HttpBootUri"


@dataclasses.dataclass(frozen=True)
class HttpBoot:
    """A UEFI HTTP boot override: boot from the image at ``uri`` (None: the
    URI the network's DHCP hands out; no ``HttpBootUri`` is sent). What
    Ironic's ``redfish-https`` boot interface asks of a BMC; only Redfish
    has it, so it is no :class:`~bmaas.driver.BootDevice`."""

    uri: str | None = None

    @property
    def device(self) -> OtherBootDevice:
        """What a read of the override shows: the BMC's name for the target."""
        return OtherBootDevice(UEFI_HTTP)


#: what a target reads as; ``UsbCd``: sushy asks SuperMicro X11/X12 for it
#: when told Cd (virtual media only boots from the "USB CD")
DEVICES: dict[str, BootDevice] = {
    **{target: device for device, target in TARGETS.items()},
    "UsbCd": BootDevice.CDROM,
}


def _allowed(boot: dict[str, Any], key: str) -> list[str] | None:
    values = boot.get(f"{key}@Redfish.AllowableValues")
    return [str(v) for v in values] if isinstance(values, list) else None


def allows_continuous(boot: dict[str, Any]) -> bool:
    """Whether the service takes a persistent override (no list: assume so)."""
    allowed = _allowed(boot, "BootSourceOverrideEnabled")
    return allowed is None or CONTINUOUS in allowed


def frequency(boot: dict[str, Any], persistent: bool) -> str:
    """The ``BootSourceOverrideEnabled`` to send: ``Continuous`` for a
    persistent request where allowed, else ``Once``."""
    return CONTINUOUS if persistent and allows_continuous(boot) else ONCE


def target_for(
    boot: dict[str, Any], device: BootDevice | HttpBoot, manufacturer: str | None
) -> str | None:
    """The target to send for ``device``; None when the service does not
    allow it (its ``AllowableValues`` lack it). ``UefiHttp`` only where
    the list names it: no list says nothing of a target since 1.9."""
    if isinstance(device, HttpBoot):
        allowed = _allowed(boot, "BootSourceOverrideTarget")
        return UEFI_HTTP if allowed is not None and UEFI_HTTP in allowed else None
    target = TARGETS[device]
    allowed = _allowed(boot, "BootSourceOverrideTarget")
    if (
        device is BootDevice.CDROM
        and (manufacturer or "").lower() == "supermicro"
        and allowed is not None
        and "UsbCd" in allowed
    ):
        return "UsbCd"
    if allowed is not None and target not in allowed:
        return None
    return target


#: a node's boot_mode (Ironic's names) -> BootSourceOverrideMode
MODES: dict[str, str] = {"uefi": "UEFI", "bios": "Legacy"}


def mode_for(boot: dict[str, Any], boot_mode: str | None) -> tuple[str | None, bool]:
    """The ``BootSourceOverrideMode`` to send for ``boot_mode`` (None: send
    none -- no mode asked, or the Boot object has no such property), and
    whether the service allows it."""
    if boot_mode is None:
        return None, True
    mode = MODES[boot_mode]
    allowed = _allowed(boot, "BootSourceOverrideMode")
    if allowed is None and "BootSourceOverrideMode" not in boot:
        return None, True
    return mode, allowed is None or mode in allowed


def offers_override(boot: dict[str, Any]) -> bool:
    """Whether ``boot`` may have a boot override: any ``BootSourceOverride*``
    property or its allowed values. A Boot that shows properties, none of them
    an override (``BootOrder``/``BootOptions`` only), has none: a PATCH of one
    would be refused (400 PropertyUnknown). An empty or absent Boot says
    nothing either way: the override is sent and the service's answer decides."""
    return not boot or any(key.startswith("BootSourceOverride") for key in boot)


class NotAllowed(Exception):
    """The system does not allow what was asked (the message says what)."""


def override(
    system: dict[str, Any], device: BootDevice | HttpBoot, persistent: bool, boot_mode: str | None
) -> dict[str, str]:
    """The ``Boot`` object to PATCH onto ``system`` (its JSON) for ``device``
    (an :class:`HttpBoot` adds its ``HttpBootUri``); :class:`NotAllowed` when
    its AllowableValues rule the target or mode out."""
    boot = system.get("Boot") or {}
    if not offers_override(boot):
        shown = ", ".join(sorted(k for k in boot if "@" not in k)) or "nothing"
        raise NotAllowed(
            f"the system offers no boot override (its Boot has {shown}; "
            "no BootSourceOverride properties)"
        )
    target = target_for(boot, device, system.get("Manufacturer"))
    if target is None:
        offered = _allowed(boot, "BootSourceOverrideTarget") or ["none listed"]
        name = UEFI_HTTP if isinstance(device, HttpBoot) else TARGETS[device]
        raise NotAllowed(
            f"boot override {name} is not one the system allows ({', '.join(offered)})"
        )
    body = {
        "BootSourceOverrideTarget": target,
        "BootSourceOverrideEnabled": frequency(boot, persistent),
    }
    if isinstance(device, HttpBoot) and device.uri is not None:
        body[HTTP_URI] = device.uri
    mode, allowed = mode_for(boot, boot_mode)
    if not allowed:
        raise NotAllowed(f"boot mode {mode} is not one the system allows")
    if mode is not None:
        body["BootSourceOverrideMode"] = mode
    return body


def mode_of(boot: dict[str, Any]) -> str | None:
    """The boot mode ``boot`` reads as (``uefi``/``bios``), None if it does not say."""
    found = boot.get("BootSourceOverrideMode")
    return next((name for name, mode in MODES.items() if mode == found), None)


def setting_of(boot: dict[str, Any], *, just_sent: str | None = None) -> BootSetting:
    """The boot setting ``boot`` reads as. ``just_sent``: the target of a
    PATCH this call made, so a read-back that keeps it with ``Disabled``
    reads as that target, once (Supermicro H13)."""
    enabled = boot.get("BootSourceOverrideEnabled")
    target = boot.get("BootSourceOverrideTarget")
    if just_sent is not None and enabled == DISABLED and target == just_sent:
        return BootSetting(_device(target), persistent=False)
    if enabled in (None, DISABLED) or target in (None, "None"):
        # No override: the node follows its own boot order, i.e. its disk.
        return BootSetting(BootDevice.DISK, persistent=True)
    return BootSetting(_device(str(target)), persistent=enabled == CONTINUOUS)


def _device(target: str) -> BootDevice | OtherBootDevice:
    return DEVICES.get(target) or OtherBootDevice(target)
