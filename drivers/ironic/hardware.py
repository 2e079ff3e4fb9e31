"""The ``bmaas-ipmi`` and ``bmaas-redfish`` hardware types.

Generic hardware (pxe/ipxe boot, direct/ramdisk deploy, noop or neutron
network, ...) whose power and management interfaces are bmaas's, so
switching an enrolled node is ``baremetal node set --driver bmaas-ipmi``
(its ``ipmi_*`` driver_info keys carry over). Enable them in ironic.conf::

    [DEFAULT]
    enabled_hardware_types = ipmi,redfish,bmaas-ipmi,bmaas-redfish
    enabled_power_interfaces = ipmitool,redfish,bmaas
    enabled_management_interfaces = ipmitool,redfish,bmaas

``bmaas-redfish`` boots from virtual media too: ``bmaas-virtual-media``
(:mod:`bmaas.drivers.ironic.boot`: Ironic's ``redfish-virtual-media`` with
every BMC request through bmaas, typed), on Ironic 39 and on the releases
that key image publishing by hardware type name (35.x, see
:func:`~bmaas.drivers.ironic.boot.publish_on_legacy_ironic`). Ironic's own
cannot run on a type of another name (it reads ``[<type name>]verify_ca``).
And over UEFI HTTP: ``bmaas-https`` (:mod:`bmaas.drivers.ironic.httpboot`:
Ironic's ``redfish-https``, the same way). Enable them with
``enabled_boot_interfaces``. Its bios, firmware and inspect interfaces,
each named ``bmaas`` (:mod:`~bmaas.drivers.ironic.bios`,
:mod:`~bmaas.drivers.ironic.firmware`, :mod:`~bmaas.drivers.ironic.inspect`),
apply BIOS settings verified after their reboot, update firmware through a
rebooting BMC and inspect out of band, typed.
"""

from __future__ import annotations

from ironic.drivers import generic

from bmaas.drivers.ironic import bios, boot, firmware, httpboot, inspect
from bmaas.drivers.ironic.management import BmaasManagement
from bmaas.drivers.ironic.power import BmaasPower

__all__ = ["BmaasIPMIHardware", "BmaasRedfishHardware"]


class _BmaasHardware(generic.GenericHardware):
    @property
    def supported_management_interfaces(self) -> list[type]:
        return [BmaasManagement]

    @property
    def supported_power_interfaces(self) -> list[type]:
        return [BmaasPower]


class BmaasIPMIHardware(_BmaasHardware):
    """A BMC spoken to over IPMI by bmaas (pyghmi, bounded, typed faults)."""


class BmaasRedfishHardware(_BmaasHardware):
    """A BMC spoken to over Redfish by bmaas (sushy, bounded, typed faults)."""

    @property
    def supported_boot_interfaces(self) -> list[type]:
        # virtual media last, as Ironic's redfish type has it: a node that
        # names no boot interface keeps the generic default
        return [
            *super().supported_boot_interfaces,
            boot.BmaasVirtualMediaBoot,
            httpboot.BmaasHttpsBoot,
        ]

    # bios, firmware, inspect (named ``bmaas``): bmaas's last, as boot's, so
    # a node that names none keeps the generic default (no-bios, ...)
    @property
    def supported_bios_interfaces(self) -> list[type]:
        return [*super().supported_bios_interfaces, bios.BmaasBIOS]

    @property
    def supported_firmware_interfaces(self) -> list[type]:
        return [*super().supported_firmware_interfaces, firmware.BmaasFirmware]

    @property
    def supported_inspect_interfaces(self) -> list[type]:
        return [*super().supported_inspect_interfaces, inspect.BmaasInspect]
