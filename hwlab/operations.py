"""Which bmaas operation a BMC request is: one table per protocol.

Fault rules glob over operation names, so everything that serves or relays a
BMC — hwlab's emulators and its fault proxy alike — must name a request the
same way. These tables are the one place that decides it.

Redfish requests map as:

============================================  ==================================
request                                       operation
============================================  ==================================
POST/DELETE SessionService/Sessions[/<id>]    ``login``
POST .../Actions/ComputerSystem.Reset         ``power.set``
PATCH /redfish/v1/Systems/<id>                ``boot.set``
POST .../VirtualMedia.InsertMedia|EjectMedia  ``vmedia.insert`` / ``vmedia.eject``
POST .../HpeiLOVirtualMedia.Insert|Eject...   ``vmedia.insert`` / ``vmedia.eject`` (iLO OEM)
GET /redfish/v1/Systems/<id>                  ``power.get`` (unless named, below)
GET .../Processors, .../Memory                ``inventory.get``
GET .../Bios[/Settings|/Pending]              ``bios.get``
PATCH .../Bios[/Settings|/Pending]            ``bios.set``
GET /redfish/v1/UpdateService[/...]           ``firmware.get``
POST .../UpdateService.SimpleUpdate           ``firmware.update``
POST .../Actions/Manager.Reset                ``bmc.reset``
any other request                             ``probe`` (emulator) / relayed (proxy)
============================================  ==================================

One GET of the ComputerSystem serves power state, boot override, inventory and
boot progress alike, so a server cannot tell them apart. A client may name
the read in the ``X-Bmaas-Operation`` header (bmaas's Redfish driver does);
only read operations are honoured there, so a header can never make a GET
draw a hardware effect meant for a power or boot change.
"""

from __future__ import annotations

import re

from bmaas.driver import Operation

__all__ = [
    "IPMI_COMMANDS",
    "OPERATION_HEADER",
    "REDFISH_ROUTES",
    "ipmi_operation",
    "redfish_operation",
]

#: the header a Redfish client names its read in
OPERATION_HEADER = "x-bmaas-operation"
READ_OPERATIONS = frozenset(
    {
        Operation.PROBE,
        Operation.POWER_GET,
        Operation.BOOT_GET,
        Operation.INVENTORY_GET,
        Operation.BOOT_PROGRESS_GET,
        Operation.BIOS_GET,
        Operation.FIRMWARE_GET,
    }
)

#: (netfn, command) -> operation; IPMI session setup is ``login`` by itself
IPMI_COMMANDS: dict[tuple[int, int], Operation] = {
    (0x06, 0x01): Operation.PROBE,  # Get Device ID
    (0x00, 0x01): Operation.POWER_GET,  # Get Chassis Status
    (0x00, 0x02): Operation.POWER_SET,  # Chassis Control
    (0x00, 0x08): Operation.BOOT_SET,  # Set System Boot Options
    (0x00, 0x09): Operation.BOOT_GET,  # Get System Boot Options
    (0x0A, 0x10): Operation.INVENTORY_GET,  # Get FRU Inventory Area Info
    (0x0A, 0x11): Operation.INVENTORY_GET,  # Read FRU Data
}

_SYSTEM = r"/redfish/v1/Systems/[^/]+"
_MEDIA = r"/redfish/v1/(?:Managers|Systems)/[^/]+/VirtualMedia/[^/]+"
_BIOS = _SYSTEM + r"/Bios(?:/Settings|/Pending)?"

#: (method, path pattern, operation), first match wins. One GET of the
#: ComputerSystem serves power state, boot override and boot progress alike;
#: it counts as ``power.get`` unless the client names the read (see the
#: Redfish emulator's ``X-Bmaas-Operation``).
REDFISH_ROUTES: list[tuple[str, re.Pattern[str], Operation]] = [
    (method, re.compile(f"{pattern}/?"), operation)
    for method, pattern, operation in (
        ("GET", r"/redfish/v1", Operation.PROBE),
        ("POST", r"/redfish/v1/SessionService/Sessions", Operation.LOGIN),
        ("DELETE", r"/redfish/v1/SessionService/Sessions/[^/]+", Operation.LOGIN),
        ("GET", _SYSTEM, Operation.POWER_GET),
        ("PATCH", _SYSTEM, Operation.BOOT_SET),
        ("POST", r".*/Actions/ComputerSystem\.Reset", Operation.POWER_SET),
        ("POST", r".*/Actions/VirtualMedia\.InsertMedia", Operation.VMEDIA_INSERT),
        ("POST", r".*/Actions/VirtualMedia\.EjectMedia", Operation.VMEDIA_EJECT),
        # HPE iLO 5's OEM actions (the ilo5 shape)
        (
            "POST",
            r".*/Actions/Oem/Hpe/HpeiLOVirtualMedia\.InsertVirtualMedia",
            Operation.VMEDIA_INSERT,
        ),
        (
            "POST",
            r".*/Actions/Oem/Hpe/HpeiLOVirtualMedia\.EjectVirtualMedia",
            Operation.VMEDIA_EJECT,
        ),
        ("PATCH", _MEDIA, Operation.VMEDIA_INSERT),
        ("GET", _SYSTEM + r"/(?:Processors|Memory)(?:/[^/]+)?", Operation.INVENTORY_GET),
        ("GET", _BIOS, Operation.BIOS_GET),
        ("PATCH", _BIOS, Operation.BIOS_SET),
        ("GET", r"/redfish/v1/UpdateService(?:/.*)?", Operation.FIRMWARE_GET),
        ("POST", r".*/Actions/UpdateService\.SimpleUpdate", Operation.FIRMWARE_UPDATE),
        ("POST", r".*/Actions/Manager\.Reset", Operation.BMC_RESET),
    )
]


def ipmi_operation(netfn: int, command: int) -> Operation | None:
    """The operation of an in-session IPMI request; None for commands no
    rule names (relayed or answered as they are)."""
    return IPMI_COMMANDS.get((netfn, command))


def redfish_operation(method: str, path: str, named: str | None = None) -> Operation | None:
    """The operation of a Redfish request; None for requests no rule names.
    ``named``: the ``X-Bmaas-Operation`` header (honoured for reads only)."""
    if method == "GET" and named in READ_OPERATIONS:
        return Operation(named)
    path = path.split("?", 1)[0]
    for route_method, pattern, operation in REDFISH_ROUTES:
        if method == route_method and pattern.fullmatch(path):
            return operation
    return None
