"""HPE iLO 5 (ProLiant Gen10, iLO 5 1.x firmware).

Sources: Cray-HPE/csm-redfish-interface-emulator, ``mockups/DL325`` at
commit ``4cb7a59e9c8100129ae056d73b983840826cf1a2`` (recorded in
``tests/fixtures/redfish-trees/hpe-dl325-gen10plus``), BSD 3-Clause licence,
Copyright 2022 Hewlett Packard Enterprise Development LP (NOTICE, text B):
the ids (``Systems/1``, ``Managers/1``), virtual media under ``Managers/1``
(slot ``1`` Floppy/USBStick, slot ``2`` CD/DVD), the OEM
``HpeiLOVirtualMedia.InsertVirtualMedia``/``EjectVirtualMedia`` actions and
the BootSourceOverrideTarget list. The iLO 5 1.x ResetType list (``On``,
``ForceOff``, ``ForceRestart``, ``Nmi``, ``PushPowerButton``: no
``GracefulShutdown``) and slots without the standard ``InsertMedia`` are as
openstack/proliantutils' iLO 5 samples and issue 34 describe them
(proliantutils: Apache License 2.0).
"""

from __future__ import annotations

from bmaas.hwlab.redfish.shapes.model import Shape, Slot

SHAPES = (
    Shape(
        name="ilo5",
        title="HPE iLO 5 1.x (ProLiant DL325 Gen10 Plus)",
        source="Cray-HPE/csm-redfish-interface-emulator mockups/DL325 (BSD-3-Clause)",
        manufacturer="HPE",
        model="ProLiant DL325 Gen10 Plus",
        vendor="HPE",
        product="ProLiant DL325 Gen10 Plus",
        redfish_version="1.6.0",
        system_id="1",
        manager_id="1",
        chassis_id="1",
        manager_model="iLO 5",
        firmware="iLO 5 v1.40",
        vmedia_at="Managers",
        slots=(
            Slot("1", ("Floppy", "USBStick"), takes="oem-hpe", name="Virtual Removable Media"),
            Slot("2", ("CD", "DVD"), takes="oem-hpe", name="Virtual Removable Media"),
        ),
        reset_types=("On", "ForceOff", "ForceRestart", "Nmi", "PushPowerButton"),
        boot_targets=(
            "None",
            "Cd",
            "Hdd",
            "Usb",
            "SDCard",
            "Utilities",
            "Diags",
            "BiosSetup",
            "Pxe",
            "UefiShell",
            "UefiHttp",
            "UefiTarget",
        ),
    ),
)
