"""What a vendor shape is (:class:`Shape`, :class:`Slot`): data only, so the
vendor modules can describe theirs without importing the catalog in
:mod:`bmaas.hwlab.redfish.shapes`."""

from __future__ import annotations

import dataclasses

__all__ = ["Shape", "Slot"]


@dataclasses.dataclass(frozen=True)
class Slot:
    """One virtual media slot."""

    id: str
    #: ``MediaTypes`` as listed; empty: the slot has no ``MediaTypes`` at all
    #: (an AMI-based ``Managers/Self/VirtualMedia/CD1``), a CD slot by its name
    media_types: tuple[str, ...]
    #: how it takes an image: ``action`` (InsertMedia/EjectMedia), ``patch``
    #: (Image/Inserted only), ``both`` (the actions and PATCH), ``oem-hpe``
    #: (HpeiLOVirtualMedia actions and PATCH: iLO 5 1.x), ``hpe``
    #: (InsertMedia/EjectMedia, the OEM actions and PATCH: iLO 5 2.x)
    takes: str = "action"
    #: ``TransferProtocolType@Redfish.AllowableValues`` of its InsertMedia
    transfer_protocols: tuple[str, ...] = ()
    #: an InsertMedia without TransferProtocolType is refused (400)
    require_protocol: bool = False
    #: held by the virtual console: an insert answers iDRAC RAC0904
    in_use: bool = False
    name: str = "Virtual media"
    write_protected: bool = True
    #: the image the slot starts out holding (another tool's, never bmaas's)
    held: str | None = None

    @property
    def is_cd(self) -> bool:
        """A CD slot by its ``MediaTypes``, else (none listed) by its id."""
        if self.media_types:
            return bool({"CD", "DVD"} & set(self.media_types))
        return self.id.upper().startswith(("CD", "DVD"))


@dataclasses.dataclass(frozen=True)
class Shape:
    name: str
    title: str
    #: where it comes from (the recorded tree), one line
    source: str
    #: the recording it follows: a path under ``tests/fixtures/redfish-trees/``
    #: or the public source's address
    recording: str
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
    #: the root advertises ``ProtocolFeaturesSupported.SelectQuery`` and a GET
    #: with ``$select`` answers only the properties named
    select_query: bool = False
    #: the reset's ``@Redfish.ActionInfo`` link answers 404 (Supermicro X12);
    #: only with ``reset_action_info``
    action_info_missing: bool = False
    #: ``Boot`` has ``BootSourceOverride*``; False: ``BootOrder`` only, and a
    #: PATCH of an override property is 400 Base ``PropertyUnknown``
    boot_override: bool = True
    #: how the system links its manager: ``ManagedBy``, or ``Managers``
    #: (``Links.Managers`` only, no ``ManagedBy``)
    manager_link: str = "ManagedBy"
    #: the override reads back as set (the vendors' firmware keeps it, a
    #: one-time one consumed by the boot); False: it reads what the machine
    #: holds (hwlab's own service, as sushy-tools reads libvirt's domain)
    override_kept: bool = True
    #: the Manager links the slots (hwlab's own: its slots are the system's)
    manager_vmedia: bool = False
    #: the BIOS settings object's leaf under ``Bios``: ``Settings`` (DMTF,
    #: Dell, HPE, Supermicro, OpenBMC) or ``Pending`` (Lenovo XCC)
    bios_settings: str = "Settings"
    #: the Manager's ``Manager.Reset`` ResetType values, in the recording's
    #: order (Dell: GracefulRestart only)
    manager_resets: tuple[str, ...] = ("ForceRestart", "GracefulRestart")
    #: SimpleUpdate answers a Dell job (``Oem/Dell/Jobs/JID_...``) instead of
    #: a DMTF Task (:mod:`bmaas.hwlab.redfish.jobs`)
    update_jobs: bool = False

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
        return any(s.is_cd for s in self.slots)
