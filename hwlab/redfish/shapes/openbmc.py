"""OpenBMC (bmcweb).

Source: openbmc/bmcweb (Apache License 2.0), the resource layout of its
``redfish-core/lib/systems.hpp``, ``managers.hpp`` and
``virtual_media.hpp`` (no capture copied): ``Systems/system``,
``Managers/bmc``, ``Chassis/chassis``, virtual media under ``Managers/bmc``
(``Slot_0``, CD and USBStick, ``InsertMedia``/``EjectMedia`` with
``TransferProtocolType``), the ResetType list of ``ComputerSystem.Reset``
and the BootSourceOverrideTarget list bmcweb serves.
"""

from __future__ import annotations

from bmaas.hwlab.redfish.shapes.model import Shape, Slot

SHAPES = (
    Shape(
        name="openbmc",
        title="OpenBMC (bmcweb)",
        source="openbmc/bmcweb resource layout (Apache-2.0)",
        manufacturer="OpenBMC",
        model="bmcweb",
        vendor="OpenBMC",
        product="",
        redfish_version="1.17.0",
        system_id="system",
        manager_id="bmc",
        chassis_id="chassis",
        manager_model="OpenBmc",
        firmware="2.16.0",
        vmedia_at="Managers",
        slots=(
            Slot(
                "Slot_0",
                ("CD", "USBStick"),
                transfer_protocols=("CIFS", "HTTPS"),
                name="Virtual Removable Media",
            ),
        ),
        reset_types=(
            "ForceOff",
            "ForceOn",
            "ForceRestart",
            "GracefulRestart",
            "GracefulShutdown",
            "PowerCycle",
            "Nmi",
            "On",
        ),
        boot_targets=("None", "Pxe", "Hdd", "Cd", "Diags", "BiosSetup", "Usb"),
        boot_modes=("Legacy", "UEFI"),
        boot_mode="UEFI",
    ),
)
