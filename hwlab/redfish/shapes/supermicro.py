"""Supermicro X13/H13 and X12 (Redfish 1.x BMC firmware).

Sources: bmc-toolbox/bmclib at commit
``89df130f5d2857d86ab1ce2fde99f3ae26653e1e``, ``providers/supermicro/
fixtures/serviceroot.json`` (the service root's Vendor/Product and its
``ProtocolFeaturesSupported.SelectQuery: true``), Apache License 2.0; the
rest as openstack/sushy (Apache License 2.0) and issues 34 and 47 record
it, since no public capture of an X13 system was found: the ids
(``Systems/1``, ``Managers/1``), virtual media under ``Managers/1`` (slot
``CD1`` CD/DVD with ``InsertMedia``, ``USB1`` USBStick), ``ResetType`` listed
only in ``Systems/1/ResetActionInfo`` (the action has no
``ResetType@Redfish.AllowableValues``) with ``GracefulShutdown`` and
``GracefulRestart`` fused into one value, both ``Cd`` and ``UsbCd`` among
the override targets (every Supermicro recording lists both; sushy asks
Supermicro for ``UsbCd``), and the H13 read-back of a one-time override:
``Enabled=Disabled`` with the target kept, right after the PATCH.

``supermicro-x12`` is the X12 tree of issue 47 (finding 1): the reset
action links ``Systems/1/ResetActionInfo``, which answers 404.
"""

from __future__ import annotations

from typing import Any

from bmaas.hwlab.redfish.shapes.model import Shape, Slot

_ROOT = (
    "https://github.com/bmc-toolbox/bmclib/blob/89df130f5d2857d86ab1ce2fde99f3ae26653e1e/"
    "providers/supermicro/fixtures/serviceroot.json"
)


def _supermicro(**rest: Any) -> Shape:
    return Shape(
        manufacturer="Supermicro",
        model="Super Server",
        vendor="Supermicro",
        product="",
        redfish_version="1.11.0",
        system_id="1",
        manager_id="1",
        chassis_id="1",
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
            "Cd",
            "Hdd",
            "UsbCd",
            "UsbFloppy",
            "UsbHdd",
            "BiosSetup",
            "UefiShell",
            "UefiHttp",
        ),
        select_query=True,
        **rest,
    )


SHAPES = (
    _supermicro(
        name="supermicro",
        title="Supermicro X13/H13",
        source="bmc-toolbox/bmclib Supermicro service root (Apache-2.0); sushy lore",
        recording=_ROOT,
        manager_model="X13",
        firmware="01.01.12",
        once_reads_disabled=True,
    ),
    _supermicro(
        name="supermicro-x12",
        title="Supermicro X12 (ResetActionInfo link answers 404)",
        source="bmc-toolbox/bmclib Supermicro service root (Apache-2.0); issue 47 finding 1",
        recording=_ROOT,
        manager_model="X12",
        firmware="01.00.35",
        action_info_missing=True,
    ),
)
