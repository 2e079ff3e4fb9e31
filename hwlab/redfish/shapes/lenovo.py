"""Lenovo XClarity Controller (ThinkSystem SR650).

Source: bmc-toolbox/bmclib at commit
``89df130f5d2857d86ab1ce2fde99f3ae26653e1e``, ``providers/lenovo/fixtures/v1/``
(service root, system, manager, virtual media collection and the CD and
Floppy slots), Apache License 2.0; recorded in
``tests/fixtures/redfish-trees/lenovo-sr650``. Taken from it: the ids
(``Systems/1``, ``Managers/1``), virtual media under ``Managers/1`` with
slots ``CD`` and ``Floppy`` that have no actions (PATCH only),
``BootSourceOverrideEnabled@Redfish.AllowableValues: ["Once", "Disabled"]``
(no ``Continuous``), the target and ResetType lists, Legacy mode.
"""

from __future__ import annotations

from bmaas.hwlab.redfish.shapes.model import Shape, Slot

SHAPES = (
    Shape(
        name="xcc",
        title="Lenovo XCC (ThinkSystem SR650)",
        source="bmc-toolbox/bmclib Lenovo SR650 fixtures (Apache-2.0)",
        recording="tests/fixtures/redfish-trees/lenovo-sr650",
        manufacturer="Lenovo",
        model="ThinkSystem SR650",
        vendor="Lenovo",
        product="ThinkSystem",
        redfish_version="1.15.0",
        system_id="1",
        manager_id="1",
        chassis_id="1",
        manager_model="XClarity Controller",
        firmware="TEE142M-2.41",
        vmedia_at="Managers",
        slots=(
            Slot("CD", ("CD", "DVD"), takes="patch", name="CD"),
            Slot("Floppy", ("Floppy", "USBStick"), takes="patch", name="Floppy"),
        ),
        manager_resets=("GracefulRestart", "ForceRestart"),  # as recorded
        reset_types=(
            "On",
            "ForceOff",
            "GracefulShutdown",
            "GracefulRestart",
            "ForceRestart",
            "Nmi",
            "ForceOn",
        ),
        boot_targets=("None", "Pxe", "Cd", "Hdd", "BiosSetup"),
        enabled_values=("Once", "Disabled"),
        boot_modes=("UEFI", "Legacy"),
        boot_mode="Legacy",
        select_query=True,
        bios_settings="Pending",  # XCC's settings object: Systems/1/Bios/Pending
    ),
)
