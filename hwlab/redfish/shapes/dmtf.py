"""The DMTF reference rack server (DSP2043 ``public-rackmount1``).

Source: DMTF/Redfish-Publications, ``mockups/public-rackmount1`` at commit
``26c949654e3e510800b05fa8d39cf336f10fa687`` (recorded in
``tests/fixtures/redfish-trees/dmtf-public-rackmount1``), BSD 3-Clause
licence (NOTICE, text A). Taken from it: the ids (system ``437XR1138R2``,
manager ``BMC``, chassis ``1U``), virtual media under the **System** with
slots ``CD1``, ``CD2`` (CD, DVD) and ``Floppy1`` that have no
``InsertMedia``/``EjectMedia`` actions (a PATCH of ``Image``/``Inserted``
only), the ResetType and BootSourceOverrideTarget lists. Trimmed to what
clients walk; no text is copied beyond property values.
"""

from __future__ import annotations

from bmaas.hwlab.redfish.shapes.model import Shape, Slot

SHAPES = (
    Shape(
        name="dmtf",
        title="DMTF DSP2043 public-rackmount1 (Contoso 3500)",
        source="DMTF/Redfish-Publications mockups/public-rackmount1 (BSD-3-Clause)",
        recording="tests/fixtures/redfish-trees/dmtf-public-rackmount1",
        manufacturer="Contoso",
        model="3500",
        vendor="Contoso",
        product="3500",
        redfish_version="1.15.0",
        system_id="437XR1138R2",
        manager_id="BMC",
        chassis_id="1U",
        manager_model="Joo Janta 200",
        firmware="1.45.455b66-rev4",
        vmedia_at="Systems",
        slots=(
            Slot("CD1", ("CD", "DVD"), takes="patch", name="Virtual CD"),
            Slot("CD2", ("CD", "DVD"), takes="patch", name="Virtual CD"),
            Slot("Floppy1", ("Floppy", "USBStick"), takes="patch", name="Virtual Removable Media"),
        ),
        reset_types=(
            "On",
            "ForceOff",
            "GracefulShutdown",
            "GracefulRestart",
            "ForceRestart",
            "Nmi",
            "ForceOn",
            "PushPowerButton",
        ),
        boot_targets=(
            "None",
            "Pxe",
            "Cd",
            "Usb",
            "Hdd",
            "BiosSetup",
            "Utilities",
            "Diags",
            "SDCard",
            "UefiTarget",
        ),
    ),
)
