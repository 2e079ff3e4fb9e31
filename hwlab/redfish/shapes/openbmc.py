"""OpenBMC (bmcweb), as a stock build serves it.

Source: openbmc/bmcweb (Apache License 2.0), the resource layout of its
``redfish-core/lib/systems.hpp``, ``managers.hpp``, ``service_root.hpp``
and ``virtual_media.hpp`` (no capture copied): ``Systems/system``,
``Managers/bmc``, ``Chassis/chassis``; ``ComputerSystem.Reset`` with no
inline ``ResetType@Redfish.AllowableValues``, only an ``@Redfish.ActionInfo``
link to ``Systems/system/ResetActionInfo`` that lists them; the
BootSourceOverrideTarget list bmcweb serves; the root's
``ProtocolFeaturesSupported.SelectQuery: true``. **No virtual media**: a
stock build has no ``VirtualMedia`` under its Manager (bmcweb serves it only
when built with its virtual media options and the host has the virtual
media service), so a virtual-media deploy is ``UnsupportedOperation``.
"""

from __future__ import annotations

from bmaas.hwlab.redfish.shapes.model import Shape

SHAPES = (
    Shape(
        name="openbmc",
        title="OpenBMC (stock bmcweb)",
        source="openbmc/bmcweb resource layout (Apache-2.0)",
        recording="https://github.com/openbmc/bmcweb (redfish-core/lib/systems.hpp)",
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
        vmedia_at=None,
        slots=(),
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
        reset_action_info=True,
        boot_targets=("None", "Pxe", "Hdd", "Cd", "Diags", "BiosSetup", "Usb"),
        boot_modes=("Legacy", "UEFI"),
        boot_mode="UEFI",
        select_query=True,
    ),
)
