"""The resources a shape serves, rendered from its live state.

Each function returns one resource's JSON body (``@odata.etag`` and the
headers are added by :func:`bmaas.hwlab.redfish.shapes.engine.serve`).
Only what clients walk is here: the service root, the systems, managers and
chassis collections and members, the reset ActionInfo where the shape keeps
ResetType there, and the virtual media collection and slots.
"""

from __future__ import annotations

from typing import Any

from bmaas.fakes.firmware import BMC_COMPONENT
from bmaas.hwlab.redfish import lifecycle
from bmaas.hwlab.redfish.bmc import Bmc
from bmaas.hwlab.redfish.shapes.model import Shape, Slot
from bmaas.hwlab.redfish.shapes.state import ShapeState
from bmaas.hwlab.redfish.standard import link

__all__ = [
    "BOOT_OPTIONS",
    "boot_option",
    "chassis",
    "manager",
    "reset_info",
    "root",
    "slot",
    "system",
]

_POWER = {"on": "On", "off": "Off", "powering_on": "PoweringOn", "powering_off": "PoweringOff"}


def root(bmc: Bmc, shape: Shape) -> dict[str, Any]:
    return {
        "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot",
        "@odata.id": "/redfish/v1",
        "Id": "RootService",
        "Name": "Root Service",
        "RedfishVersion": shape.redfish_version,
        "UUID": bmc.uuid,
        "Vendor": shape.vendor,
        "Product": shape.product,
        "Systems": link("/redfish/v1/Systems"),
        "Managers": link("/redfish/v1/Managers"),
        "Chassis": link("/redfish/v1/Chassis"),
        "SessionService": link("/redfish/v1/SessionService"),
        "EventService": link("/redfish/v1/EventService"),
        "UpdateService": link("/redfish/v1/UpdateService"),
        "Tasks": link("/redfish/v1/TaskService"),  # DMTF's name for the TaskService link
        "Registries": link("/redfish/v1/Registries"),
        "Links": {"Sessions": link("/redfish/v1/SessionService/Sessions")},
        "ProtocolFeaturesSupported": {
            "SelectQuery": shape.select_query,
            "ExpandQuery": {"ExpandAll": False, "Levels": False, "Links": False, "NoLinks": False},
            "FilterQuery": False,
            "OnlyMemberQuery": False,
            "ExcerptQuery": False,
        },
    }


def system(bmc: Bmc, state: ShapeState) -> dict[str, Any]:
    shape, machine = state.shape, bmc.machine
    reset: dict[str, Any] = {"target": f"{shape.system_path}/Actions/ComputerSystem.Reset"}
    if shape.reset_action_info:
        reset["@Redfish.ActionInfo"] = f"{shape.system_path}/ResetActionInfo"
    else:
        reset["ResetType@Redfish.AllowableValues"] = list(shape.reset_types)
    hw = machine.hardware
    memory = hw.memory_mb // 1024 if hw.memory_mb % 1024 == 0 else round(hw.memory_mb / 1024, 3)
    body: dict[str, Any] = {
        "@odata.type": "#ComputerSystem.v1_13_0.ComputerSystem",
        "@odata.id": shape.system_path,
        "Id": shape.system_id,
        "Name": machine.name,
        "UUID": bmc.uuid,
        "Manufacturer": shape.manufacturer or hw.vendor,
        "Model": shape.model or hw.model,
        "SerialNumber": hw.serial,
        "SystemType": "Physical",
        "PowerState": _POWER.get(machine.power_state().value, "PoweringOff"),
        "Status": {"State": "Enabled", "Health": machine.health},
        "Boot": _boot(state),
        "BootProgress": {"LastState": machine.boot_progress()},
        "ProcessorSummary": {"Count": hw.cpus, "Status": {"State": "Enabled", "Health": "OK"}},
        "MemorySummary": {
            "TotalSystemMemoryGiB": memory,
            "Status": {"State": "Enabled", "Health": "OK"},
        },
        "Links": {
            "Chassis": [link(f"/redfish/v1/Chassis/{shape.chassis_id}")],
            shape.manager_link: [link(shape.manager_path)],
        },
        "Actions": {"#ComputerSystem.Reset": reset},
        **lifecycle.links(shape.system_path),
    }
    if "UefiHttp" in shape.boot_targets and shape.boot_override:
        body["Boot"]["HttpBootUri"] = state.http_boot_uri
    if shape.vmedia_at == "Systems":
        body["VirtualMedia"] = link(f"{shape.system_path}/VirtualMedia")
    return body


def _boot(state: ShapeState) -> dict[str, Any]:
    shape = state.shape
    if not shape.boot_override:  # BootOrder and BootOptions only
        return {
            "BootOrder": list(BOOT_OPTIONS),
            "BootOptions": link(f"{shape.system_path}/BootOptions"),
        }
    override = state.override()
    return {
        "BootSourceOverrideEnabled": override.enabled,
        "BootSourceOverrideEnabled@Redfish.AllowableValues": list(shape.enabled_values),
        "BootSourceOverrideTarget": override.target,
        "BootSourceOverrideTarget@Redfish.AllowableValues": list(shape.boot_targets),
        "BootSourceOverrideMode": state.boot_mode,
        "BootSourceOverrideMode@Redfish.AllowableValues": list(shape.boot_modes),
    }


#: the boot options of a shape without override properties, by reference
BOOT_OPTIONS = {"Boot0001": "UEFI PXEv4", "Boot0002": "UEFI Hard Drive"}


def boot_option(shape: Shape, reference: str) -> dict[str, Any]:
    return {
        "@odata.type": "#BootOption.v1_0_4.BootOption",
        "@odata.id": f"{shape.system_path}/BootOptions/{reference}",
        "Id": reference,
        "Name": "Boot Option",
        "BootOptionReference": reference,
        "DisplayName": BOOT_OPTIONS[reference],
    }


def reset_info(shape: Shape) -> dict[str, Any]:
    return {
        "@odata.type": "#ActionInfo.v1_1_2.ActionInfo",
        "@odata.id": f"{shape.system_path}/ResetActionInfo",
        "Id": "ResetActionInfo",
        "Name": "Reset Action Info",
        "Parameters": [
            {
                "Name": "ResetType",
                "Required": True,
                "DataType": "String",
                "AllowableValues": list(shape.reset_types),
            }
        ],
    }


def _bmc_firmware(bmc: Bmc, shape: Shape) -> str:
    """The recorded version until a BMC image lands on the machine, then the
    last one that did: Ironic's ``redfish`` reads the BMC's version here and
    watches it change to see a BMC update done."""
    _components, updates, now = bmc.machine.firmware_now()
    landed = [u.version for u in updates if u.target == BMC_COMPONENT and u.lands and u.end <= now]
    return landed[-1] if landed else shape.firmware


def manager(bmc: Bmc, shape: Shape) -> dict[str, Any]:
    body: dict[str, Any] = {
        "@odata.type": "#Manager.v1_10_0.Manager",
        "@odata.id": shape.manager_path,
        "Id": shape.manager_id,
        "Name": "Manager",
        "UUID": bmc.manager_uuid,
        "ServiceEntryPointUUID": bmc.service_uuid,
        "ManagerType": "BMC",
        "Model": shape.manager_model,
        "FirmwareVersion": _bmc_firmware(bmc, shape),
        "PowerState": "On",
        "Status": {"State": "Enabled", "Health": "OK"},
        "Links": {
            "ManagerForServers": [link(shape.system_path)],
            "ManagerForChassis": [link(f"/redfish/v1/Chassis/{shape.chassis_id}")],
        },
        "Actions": {
            "#Manager.Reset": {
                "target": f"{shape.manager_path}/Actions/Manager.Reset",
                "ResetType@Redfish.AllowableValues": list(shape.manager_resets),
            }
        },
    }
    if shape.vmedia_path is not None and (shape.vmedia_at == "Managers" or shape.manager_vmedia):
        body["VirtualMedia"] = link(shape.vmedia_path)
    return body


def chassis(bmc: Bmc, shape: Shape) -> dict[str, Any]:
    return {
        "@odata.type": "#Chassis.v1_7_0.Chassis",
        "@odata.id": f"/redfish/v1/Chassis/{shape.chassis_id}",
        "Id": shape.chassis_id,
        "Name": "Chassis",
        "ChassisType": "RackMount",
        "Manufacturer": shape.manufacturer or bmc.machine.hardware.vendor,
        "Model": shape.model or bmc.machine.hardware.model,
        "SerialNumber": bmc.machine.hardware.serial,
        "PowerState": _POWER.get(bmc.machine.power_state().value, "PoweringOff"),
        "Status": {"State": "Enabled", "Health": bmc.machine.health},
        "Links": {
            "ComputerSystems": [link(shape.system_path)],
            "ManagedBy": [link(shape.manager_path)],
        },
    }


def is_cd(slot: Slot) -> bool:
    return slot.is_cd


def slot(state: ShapeState, base: str, found: Slot) -> dict[str, Any]:
    path = f"{base}/{found.id}"
    image = state.image_shown(found.id, is_cd(found))
    body: dict[str, Any] = {
        "@odata.type": "#VirtualMedia.v1_4_0.VirtualMedia",
        "@odata.id": path,
        "Id": found.id,
        "Name": found.name,
        "Image": image,
        "ImageName": image.rsplit("/", 1)[-1] if image else None,
        "ConnectedVia": "URI" if image else "NotConnected",
        "Inserted": image is not None,
        "WriteProtected": found.write_protected,
    }
    if found.media_types:  # an AMI-style slot lists none
        body["MediaTypes"] = list(found.media_types)
    actions: dict[str, Any] = {}
    if found.takes in ("action", "both", "hpe"):
        insert: dict[str, Any] = {"target": f"{path}/Actions/VirtualMedia.InsertMedia"}
        if found.transfer_protocols:
            insert["TransferProtocolType@Redfish.AllowableValues"] = list(found.transfer_protocols)
            insert["TransferMethod@Redfish.AllowableValues"] = ["Stream"]
        actions["#VirtualMedia.InsertMedia"] = insert
        actions["#VirtualMedia.EjectMedia"] = {"target": f"{path}/Actions/VirtualMedia.EjectMedia"}
    if found.takes in ("oem-hpe", "hpe"):
        oem = f"{path}/Actions/Oem/Hpe/HpeiLOVirtualMedia"
        actions["Oem"] = {
            "#HpeiLOVirtualMedia.InsertVirtualMedia": {"target": f"{oem}.InsertVirtualMedia"},
            "#HpeiLOVirtualMedia.EjectVirtualMedia": {"target": f"{oem}.EjectVirtualMedia"},
        }
    if actions:
        body["Actions"] = actions
    return body
