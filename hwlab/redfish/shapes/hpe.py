"""HPE iLO 5 (ProLiant Gen10 / Gen10 Plus): current 2.x firmware, and 1.40.

Sources: Cray-HPE/csm-redfish-interface-emulator, ``mockups/DL325`` at
commit ``4cb7a59e9c8100129ae056d73b983840826cf1a2`` (recorded in
``tests/fixtures/redfish-trees/hpe-dl325-gen10plus``), BSD 3-Clause licence,
Copyright 2022 Hewlett Packard Enterprise Development LP (NOTICE, text B).

``ilo5`` is that recording, iLO 5 **v2.46**, as later 2.x firmware answers
too: the ids (``Systems/1``, ``Managers/1``), virtual media under
``Managers/1`` (slot ``1`` Floppy/USBStick, slot ``2`` CD/DVD), each slot
taking the standard ``InsertMedia``/``EjectMedia``, the OEM
``HpeiLOVirtualMedia.InsertVirtualMedia``/``EjectVirtualMedia`` and a PATCH;
the ResetType list with ``GracefulShutdown``, ``GracefulRestart`` and
``PushPowerButton``; the BootSourceOverrideTarget list; the root's
``ProtocolFeaturesSupported.SelectQuery: true``.

``ilo5-1.40`` is iLO 5 **v1.40**, as openstack/proliantutils' iLO 5 samples
(``proliantutils/tests/redfish/json_samples``, Apache License 2.0) and
issue 34 describe it: slots without the standard ``InsertMedia`` (PATCH or
the OEM actions) and a ResetType list without ``GracefulShutdown`` and
``GracefulRestart`` (``PushPowerButton`` for a soft off).
"""

from __future__ import annotations

from typing import Any

from bmaas.hwlab.redfish.shapes.model import Shape, Slot

_RECORDING = "tests/fixtures/redfish-trees/hpe-dl325-gen10plus"
_TARGETS = (
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
)


def _ilo5(**rest: Any) -> Shape:
    """An iLO 5 shape: what both firmware lines share, and ``rest``."""
    return Shape(
        manufacturer="HPE",
        model="ProLiant DL325 Gen10 Plus",
        vendor="HPE",
        product="ProLiant DL325 Gen10 Plus",
        redfish_version="1.6.0",
        system_id="1",
        manager_id="1",
        chassis_id="1",
        manager_model="iLO 5",
        vmedia_at="Managers",
        boot_targets=_TARGETS,
        select_query=True,
        **rest,
    )


SHAPES = (
    _ilo5(
        name="ilo5",
        title="HPE iLO 5 2.x (ProLiant DL325 Gen10 Plus, iLO 5 v2.46)",
        source="Cray-HPE/csm-redfish-interface-emulator mockups/DL325 (BSD-3-Clause)",
        recording=_RECORDING,
        firmware="iLO 5 v2.46",
        slots=(
            Slot("1", ("Floppy", "USBStick"), takes="hpe", name="VirtualMedia"),
            Slot("2", ("CD", "DVD"), takes="hpe", name="VirtualMedia"),
        ),
        # the recording's order
        reset_types=(
            "On",
            "ForceOff",
            "GracefulShutdown",
            "ForceRestart",
            "Nmi",
            "PushPowerButton",
            "GracefulRestart",
        ),
    ),
    _ilo5(
        name="ilo5-1.40",
        title="HPE iLO 5 1.40 (ProLiant DL325 Gen10 Plus)",
        source="Cray-HPE DL325 mockup layout; openstack/proliantutils iLO 5 samples (Apache-2.0)",
        recording="https://opendev.org/x/proliantutils (proliantutils/tests/redfish/json_samples)",
        firmware="iLO 5 v1.40",
        slots=(
            Slot("1", ("Floppy", "USBStick"), takes="oem-hpe", name="Virtual Removable Media"),
            Slot("2", ("CD", "DVD"), takes="oem-hpe", name="Virtual Removable Media"),
        ),
        reset_types=("On", "ForceOff", "ForceRestart", "Nmi", "PushPowerButton"),
    ),
)
