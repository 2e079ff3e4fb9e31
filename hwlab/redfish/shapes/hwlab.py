"""hwlab's own service, the default shape: sushy-tools' layout, read from the machine.

Source: openstack/sushy-tools (Apache License 2.0, NOTICE), whose emulator
hwlab served before one engine answered every shape: the system, its
Manager and its chassis named after the machine (``/redfish/v1/Systems/
<name>``, ``Managers/<name>``), virtual media under the System with slots
``Cd`` and ``Floppy`` taking both ``InsertMedia`` and a PATCH, the Manager
linking them. What the firmware shows is the machine's: the override reads
the boot device the machine holds (``override_kept`` False), a cleared
one ``Disabled``/``None`` while the machine still holds what clearing left.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from bmaas import __version__
from bmaas.hwlab.redfish.shapes.model import Shape, Slot

__all__ = ["HWLAB", "RESET_TYPES", "named"]

#: the reset types a system offers unless its lab says otherwise
RESET_TYPES = ("On", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart")

#: the default shape before :func:`named` gives it its machine's ids
HWLAB = Shape(
    name="hwlab",
    title="hwlab's own service (the default)",
    source="openstack/sushy-tools' emulator layout (Apache-2.0)",
    recording="https://opendev.org/openstack/sushy-tools",
    manufacturer="",  # the machine's hardware vendor and model
    model="",
    vendor="hwlab",
    product="hwlab",
    redfish_version="1.5.0",
    system_id="",
    manager_id="",
    chassis_id="",
    manager_model="hwlab BMC",
    firmware=__version__,
    vmedia_at="Systems",
    slots=(
        Slot("Cd", ("CD", "DVD"), takes="both", name="Virtual CD"),
        Slot(
            "Floppy",
            ("Floppy", "USBStick"),
            takes="both",
            name="Virtual Removable Media",
            write_protected=False,
        ),
    ),
    reset_types=RESET_TYPES,
    boot_targets=("None", "Pxe", "Hdd", "Cd", "BiosSetup", "UefiHttp"),
    override_kept=False,
    manager_vmedia=True,
)


def named(system_id: str, reset_types: Sequence[str]) -> Shape:
    """The default shape for one system: its ids, the reset types its lab allows."""
    return dataclasses.replace(
        HWLAB,
        system_id=system_id,
        manager_id=system_id,
        chassis_id=system_id,
        reset_types=tuple(reset_types),
    )
