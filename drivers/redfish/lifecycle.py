"""BIOS settings, firmware inventory and the machine's parts over Redfish
(issue 51): what the service links, read and parsed into
:mod:`bmaas.hardware`'s types.

Every function takes ``read(path) -> Resource`` (one GET through the
driver's connector, inside the driver's call: its deadline, its gate, its
one fault mapping) and asks only for paths the service linked. What the
service does not link raises :class:`Missing` (the driver makes it
``UnsupportedOperation``).

Where each resource is found: docs/lifecycle.md, "Over Redfish and IPMI".
Two rules with their why: a BIOS's pending values go to its
``@Redfish.Settings`` object when it names one (DMTF, Lenovo
``Bios/Pending``, Dell ``Bios/Settings``), else to ``Bios`` itself; and no
attribute registry found means changes go unchecked, the BMC's answer
deciding (never a guess).

Requests: ``get_bios`` 2 GETs (BIOS, settings object) + the registry once
per driver (collection, file, registry: 3 GETs; none when no file matches);
``set_bios`` those + 1 GET of the settings object (its ETag) + 1 PATCH +
1 GET read-back; ``get_firmware_inventory`` 2 GETs + 1 per component.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from sushy import exceptions as sushy_exc

from bmaas.drivers.redfish.preconditions import Resource
from bmaas.hardware import (
    AttributeInfo,
    BiosSettings,
    Dimm,
    Disk,
    FirmwareComponent,
    Nic,
    Processor,
)

__all__ = [
    "Missing",
    "bios_paths",
    "firmware",
    "parse_registry",
    "parts",
    "pending_of",
    "read_bios",
    "registry_location",
    "system_bios",
]

Reader = Callable[[str], Resource]


class Missing(Exception):
    """The service links no such resource: the capability is not there."""


def _link(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    path = value.get("@odata.id") if isinstance(value, dict) else None
    return path if isinstance(path, str) and path else None


def members(read: Reader, path: str) -> Iterator[dict[str, Any]]:
    """Each member of the collection at ``path``, read (one GET each)."""
    for member in read(path).body.get("Members") or []:
        link = member.get("@odata.id") if isinstance(member, dict) else None
        if isinstance(link, str) and link:
            yield read(link).body


# -- BIOS -----------------------------------------------------------------------------


def bios_paths(system: Mapping[str, Any], bios: Mapping[str, Any]) -> tuple[str, str | None]:
    """The BIOS resource and its settings object (None: writes go to the BIOS)."""
    path = _link(system, "Bios")
    if path is None:
        raise Missing("the system links no Bios")
    settings = bios.get("@Redfish.Settings")
    target = _link(settings, "SettingsObject") if isinstance(settings, dict) else None
    return path, target


def apply_times(bios: Mapping[str, Any]) -> tuple[str, ...]:
    settings = bios.get("@Redfish.Settings")
    times = settings.get("SupportedApplyTimes") if isinstance(settings, dict) else None
    return tuple(t for t in times if isinstance(t, str)) if isinstance(times, list) else ()


def pending_of(current: Mapping[str, Any], staged: Mapping[str, Any]) -> dict[str, Any]:
    """The staged values that differ from the current ones."""
    return {k: v for k, v in staged.items() if current.get(k, object()) != v}


def _attributes(body: Mapping[str, Any]) -> dict[str, Any]:
    attributes = body.get("Attributes")
    return dict(attributes) if isinstance(attributes, dict) else {}


def read_bios(
    read: Reader,
    system: Mapping[str, Any],
    registry: dict[str, AttributeInfo] | None,
) -> tuple[BiosSettings, Resource, str | None]:
    """The BIOS as it reads now (``registry`` as already found), the BIOS
    resource, and its settings object's path."""
    path = _link(system, "Bios")
    if path is None:
        raise Missing("the system links no Bios")
    bios = read(path)
    _, target = bios_paths(system, bios.body)
    current = _attributes(bios.body)
    staged = _attributes(read(target).body) if target is not None else {}
    settings = BiosSettings(current, pending_of(current, staged), registry, apply_times(bios.body))
    return settings, bios, target


def registry_location(read: Reader, root: Mapping[str, Any], name: str) -> str | None:
    """Where the attribute registry ``name`` is, from the root's
    ``Registries`` collection: the file named after it (with or without its
    version), else -- as sushy matches -- the file whose registry's own
    ``Id`` is ``name`` (stock sushy-tools names its file
    ``BiosAttributeRegistry.v1_0_0`` and the registry there
    ``BiosAttributeRegistryP89.v1_0_0``, the name its BIOS gives). The second
    look costs a GET or two per other file, once per driver."""
    collection = _link(root, "Registries")
    if collection is None or not name:
        return None
    base = name.split(".", 1)[0]
    others = []
    for member in read(collection).body.get("Members") or []:
        link = member.get("@odata.id") if isinstance(member, dict) else None
        if not isinstance(link, str):
            continue
        leaf = link.rstrip("/").rsplit("/", 1)[-1]
        if leaf != name and leaf.split(".", 1)[0] != base:
            others.append(link)
            continue
        where = _located(read(link).body, link)
        if where is not None:
            return where
    for link in others:
        try:
            entry = read(link).body
            where = _located(entry, link)
            if (
                where is not None
                and (entry if where == link else read(where).body).get("Id") == name
            ):
                return where
        except sushy_exc.ResourceNotFoundError:
            continue  # listed, not served (recorded trees do it): not the one
    return None


def _located(entry: Mapping[str, Any], link: str) -> str | None:
    """Where the registry file ``entry`` (read at ``link``) puts its
    registry: ``link`` itself when it is the registry, else its English (or
    first) location."""
    if "RegistryEntries" in entry:  # the registry itself, served as a member
        return link
    locations = entry.get("Location") or []
    ranked = sorted(
        (loc for loc in locations if isinstance(loc, dict) and loc.get("Uri")),
        key=lambda loc: loc.get("Language") not in ("en", None),
    )
    return str(ranked[0]["Uri"]) if ranked else None


def parse_registry(body: Mapping[str, Any]) -> dict[str, AttributeInfo]:
    """An AttributeRegistry's attributes by name."""
    entries = body.get("RegistryEntries") or {}
    found: dict[str, AttributeInfo] = {}
    for entry in entries.get("Attributes") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("AttributeName"), str):
            continue
        values = entry.get("Value")
        allowed = (
            tuple(str(v["ValueName"]) for v in values if isinstance(v, dict) and "ValueName" in v)
            if isinstance(values, list)
            else None
        )

        def whole(key: str, entry: dict[str, Any] = entry) -> int | None:
            value = entry.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        found[entry["AttributeName"]] = AttributeInfo(
            type=str(entry.get("Type") or "String"),
            allowed=allowed or None,
            read_only=bool(entry.get("ReadOnly")) or bool(entry.get("Immutable")),
            lower=whole("LowerBound"),
            upper=whole("UpperBound"),
            max_length=whole("MaxLength"),
        )
    return found


# -- firmware and parts ----------------------------------------------------------------


def firmware(
    read: Reader, root: Mapping[str, Any], system: Callable[[], Resource] | None = None
) -> list[FirmwareComponent]:
    """Every member of the update service's firmware inventory (none there:
    :func:`system_bios` when ``system`` reads the System)."""
    service = _link(root, "UpdateService")
    if service is None:
        raise Missing("the service has no UpdateService")
    inventory = _link(read(service).body, "FirmwareInventory")
    try:
        bodies = list(members(read, inventory)) if inventory is not None else None
    except sushy_exc.ResourceNotFoundError:
        if system is None:
            raise
        bodies = None
    if bodies is None:
        bios = system_bios(system)
        if bios is None:
            raise Missing("the UpdateService serves no FirmwareInventory")
        return [bios[1]]
    found = []
    for body in bodies:
        version = body.get("Version")
        updateable = body.get("Updateable")
        found.append(
            FirmwareComponent(
                id=str(body.get("Id") or ""),
                name=str(body.get("Name") or body.get("Id") or ""),
                version=version if isinstance(version, str) and version else None,
                updateable=updateable if isinstance(updateable, bool) else None,
            )
        )
    return found


#: the one component of a service without a firmware inventory
SYSTEM_BIOS = "BIOS"


def system_bios(
    system: Callable[[], Resource] | None,
) -> tuple[str, FirmwareComponent] | None:
    """A service without a firmware inventory (stock sushy-tools links one
    and answers 404): the System's BIOS as component ``BIOS``, its version
    the System's ``BiosVersion`` (None when it shows none: sushy-tools' fake
    driver), the System's path its update target -- Ironic's redfish
    firmware interface reads the BIOS version there, and sushy-tools'
    SimpleUpdate takes Systems as ``Targets``. None: no System to read."""
    if system is None:
        return None
    found = system()
    version = found.body.get("BiosVersion")
    version = version if isinstance(version, str) and version else None
    return found.path, FirmwareComponent(SYSTEM_BIOS, "BIOS", version, updateable=True)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _enabled(body: Mapping[str, Any]) -> bool:
    """Not an empty slot or bay (``Status.State: Absent``)."""
    status = body.get("Status")
    return not (isinstance(status, dict) and status.get("State") == "Absent")


def parts(read: Reader, system: Mapping[str, Any]) -> dict[str, tuple[Any, ...]]:
    """The system's processors, DIMMs, NICs and disks as its links list
    them (a collection the system does not link: an empty tuple)."""
    found: dict[str, tuple[Any, ...]] = {}

    def each(key: str) -> Iterator[dict[str, Any]]:
        path = _link(system, key)
        return members(read, path) if path is not None else iter(())

    found["processors"] = tuple(
        Processor(
            str(b.get("Id")),
            b.get("Model"),
            _int(b.get("TotalCores")),
            _int(b.get("TotalThreads")),
            b.get("InstructionSet") or None,
        )
        for b in each("Processors")
        if b.get("ProcessorType", "CPU") == "CPU" and _enabled(b)
    )
    found["dimms"] = tuple(
        Dimm(
            str(b.get("Id")),
            _int(b.get("CapacityMiB")),
            b.get("MemoryDeviceType"),
            _int(b.get("OperatingSpeedMhz")),
        )
        for b in each("Memory")
        if _enabled(b)
    )
    found["nics"] = tuple(
        Nic(
            str(b.get("Id")),
            b.get("MACAddress") or b.get("PermanentMACAddress"),
            _int(b.get("SpeedMbps")),
            b.get("LinkStatus"),
        )
        for b in each("EthernetInterfaces")
        if b.get("EthernetInterfaceType") != "Virtual"
    )
    disks: list[Disk] = []
    for controller in each("SimpleStorage"):
        for device in controller.get("Devices") or []:
            if isinstance(device, dict) and _enabled(device):
                name = device.get("Name")
                disks.append(
                    Disk(str(name), name, _int(device.get("CapacityBytes")), device.get("Model"))
                )
    for storage in each("Storage"):
        for link in storage.get("Drives") or []:
            path = link.get("@odata.id") if isinstance(link, dict) else None
            if isinstance(path, str):
                drive = read(path).body
                if _enabled(drive):
                    disks.append(
                        Disk(
                            str(drive.get("Id")),
                            drive.get("Name"),
                            _int(drive.get("CapacityBytes")),
                            drive.get("Model"),
                        )
                    )
    found["disks"] = tuple(disks)
    return found
