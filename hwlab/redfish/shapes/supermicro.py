"""Supermicro X13/H13 (Redfish 1.x BMC firmware).

Sources: bmc-toolbox/bmclib at commit
``89df130f5d2857d86ab1ce2fde99f3ae26653e1e``, ``providers/supermicro/
fixtures/serviceroot.json`` (the service root's Vendor/Product), Apache
License 2.0; the rest as openstack/sushy (Apache License 2.0) and issue 34
record it, since no public capture of an X13 system was found: the ids
(``Systems/1``, ``Managers/1``), virtual media under ``Managers/1`` (slot
``CD1`` CD/DVD with ``InsertMedia``, ``USB1`` USBStick), ``ResetType`` listed
only in ``Systems/1/ResetActionInfo`` (the action has no
``ResetType@Redfish.AllowableValues``) with ``GracefulShutdown`` and
``GracefulRestart`` fused into one value, ``UsbCd`` instead of ``Cd``
(sushy asks Supermicro for it), and the H13 read-back of a one-time
override: ``Enabled=Disabled`` with the target kept, right after the PATCH.
"""

from __future__ import annotations

from bmaas.hwlab.redfish.shapes.model import Shape, Slot

SHAPES = (
    Shape(
        name="supermicro",
        title="Supermicro X13/H13",
        source="bmc-toolbox/bmclib Supermicro service root (Apache-2.0); sushy lore",
        manufacturer="Supermicro",
        model="Super Server",
        vendor="Supermicro",
        product="",
        redfish_version="1.11.0",
        system_id="1",
        manager_id="1",
        chassis_id="1",
        manager_model="X13",
        firmware="01.01.12",
        vmedia_at="Managers",
        slots=(
            Slot("CD1", ("CD", "DVD"), name="Virtual CD/DVD"),
            Slot("USB1", ("USBStick",), name="Virtual USB"),
        ),
        reset_types=(
            "On",
            "ForceOff",
            "GracefulShutdownGracefulRestart",
            "ForceRestart",
            "Nmi",
            "ForceOn",
        ),
        reset_action_info=True,
        boot_targets=(
            "None",
            "Pxe",
            "Floppy",
            "Hdd",
            "UsbCd",
            "UsbFloppy",
            "UsbHdd",
            "BiosSetup",
            "UefiShell",
            "UefiHttp",
        ),
        once_reads_disabled=True,
    ),
)
