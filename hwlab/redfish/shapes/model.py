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
