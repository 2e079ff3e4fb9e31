"""Vendor shapes: how real BMCs lay out and take what clients walk.

A shape is data (:class:`Shape`): where the system, its Manager and its
virtual media live, which values each ``Boot`` property allows, which
``ResetType`` values the reset action takes (in the action, or only in its
``@Redfish.ActionInfo``), how each slot takes an image (``InsertMedia``,
a PATCH of ``Image``/``Inserted``, or an OEM action), and what the
firmware shows back (a one-time override read as ``Disabled``, a slot that
reads empty for a while after an insert). :mod:`.engine` serves a shape
from a machine's live state; fault effects, incidents and the fault proxy
apply to every shape as to the default one, since operations are named by
request (:mod:`bmaas.hwlab.operations`).

Each shape module names the recorded tree (or the source) it was built
from and its licence; NOTICE lists them. ``hwlab`` is the default: the
sushy-tools based service (:mod:`bmaas.hwlab.redfish.app`).

=============  ===============================================================
shape          what it is
=============  ===============================================================
``hwlab``      the default service (sushy-tools' views, hwlab's templates)
``dmtf``       DSP2043 public-rackmount1: vmedia under the System, PATCH only
``idrac9``     Dell iDRAC 9 (R660): vmedia under the System, RAC0904 on slot 1
``idrac10``    Dell iDRAC 10: as iDRAC 9; TransferProtocolType required, not
               listed; an insert reads empty for two reads
``dell-r6515`` Dell R6515 as recorded: no virtual media anywhere
``ilo5``       HPE iLO 5 1.x: vmedia under Managers/1, PATCH or OEM actions,
               PushPowerButton and no GracefulShutdown
``xcc``        Lenovo XCC (SR650): Once/Disabled only, PATCH vmedia
``supermicro`` Supermicro X13/H13: ResetType only in ActionInfo, UsbCd,
               a one-time override read back Disabled with its target
``openbmc``    OpenBMC bmcweb: Systems/system, Managers/bmc, Slot_0
=============  ===============================================================
"""

from __future__ import annotations

import dataclasses

from bmaas.faults import InputError

__all__ = ["DEFAULT", "SHAPES", "Shape", "Slot", "names", "resolve", "validate"]

#: the default shape: hwlab's own service
DEFAULT = "hwlab"


@dataclasses.dataclass(frozen=True)
class Slot:
    """One virtual media slot."""

    id: str
    media_types: tuple[str, ...]
    #: how it takes an image: ``action`` (InsertMedia/EjectMedia), ``patch``
    #: (Image/Inserted only), ``oem-hpe`` (HpeiLOVirtualMedia actions and PATCH)
    takes: str = "action"
    #: ``TransferProtocolType@Redfish.AllowableValues`` of its InsertMedia
    transfer_protocols: tuple[str, ...] = ()
    #: an InsertMedia without TransferProtocolType is refused (400)
    require_protocol: bool = False
    #: held by the virtual console: an insert answers iDRAC RAC0904
    in_use: bool = False
    name: str = "Virtual media"


@dataclasses.dataclass(frozen=True)
class Shape:
    name: str
    title: str
    #: where it comes from (the recorded tree), one line
    source: str
    manufacturer: str
    model: str
    #: the service root's Vendor, Product and RedfishVersion
    vendor: str
    product: str
    redfish_version: str
    system_id: str
    manager_id: str
    chassis_id: str
    manager_model: str
    firmware: str
    #: where the slots live: "Managers" (under the Manager), "Systems", None
    vmedia_at: str | None
    slots: tuple[Slot, ...]
    reset_types: tuple[str, ...]
    boot_targets: tuple[str, ...]
    #: ResetType values listed only in the action's ActionInfo resource
    reset_action_info: bool = False
    enabled_values: tuple[str, ...] = ("Once", "Continuous", "Disabled")
    boot_modes: tuple[str, ...] = ("UEFI", "Legacy")
    #: the mode the system starts in (as recorded)
    boot_mode: str = "UEFI"
    #: a one-time override reads back Enabled=Disabled with its target kept
    once_reads_disabled: bool = False
    #: GETs of a slot that read empty after an insert was accepted
    insert_hidden_reads: int = 0

    @property
    def system_path(self) -> str:
        return f"/redfish/v1/Systems/{self.system_id}"

    @property
    def manager_path(self) -> str:
        return f"/redfish/v1/Managers/{self.manager_id}"

    @property
    def vmedia_path(self) -> str | None:
        if self.vmedia_at is None:
            return None
        owner = self.manager_path if self.vmedia_at == "Managers" else self.system_path
        return f"{owner}/VirtualMedia"

    @property
    def has_cd(self) -> bool:
        return any({"CD", "DVD"} & set(s.media_types) for s in self.slots)


def _catalog() -> dict[str, Shape]:
    from bmaas.hwlab.redfish.shapes import dell, dmtf, hpe, lenovo, openbmc, supermicro

    found: dict[str, Shape] = {}
    for module in (dmtf, dell, hpe, lenovo, supermicro, openbmc):
        for shape in module.SHAPES:
            found[shape.name] = shape
    return found


#: every vendor shape by name (the default, ``hwlab``, has no entry: it is
#: the sushy-tools based service)
SHAPES: dict[str, Shape] = _catalog()


def names() -> tuple[str, ...]:
    """Every shape a lab takes, the default first."""
    return (DEFAULT, *SHAPES)


def validate(name: str, *, field: str = "shape") -> str:
    """``name`` if it is a shape; else :class:`InputError` naming the choices."""
    if name not in names():
        raise InputError(f"unknown shape {name!r} (one of: {', '.join(names())})", field=field)
    return name


def resolve(name: str | None) -> Shape | None:
    """The shape called ``name`` (None for the default service)."""
    if name is None or validate(name) == DEFAULT:
        return None
    return SHAPES[name]
