"""hwlab's BIOS, attribute registry, firmware inventory and parts resources
(issue 51), through :func:`bmaas.hwlab.redfish.lifecycle.serve` itself (no
sockets): what the default service and every vendor shape serve from the
machine's simulated BIOS, and what a PATCH of the settings object does."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bmaas.driver import Operation, PowerAction
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.effects import Effect, Firing
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.hwlab.http import Request
from bmaas.hwlab.operations import redfish_operation
from bmaas.hwlab.redfish.bmc import Bmc
from bmaas.hwlab.redfish.lifecycle import REGISTRY, serve
from bmaas.hwlab.redfish.shapes import SHAPES
from bmaas.hwlab.redfish.shapes.documents import system
from bmaas.hwlab.redfish.shapes.state import ShapeState

REGISTRY_PATH = f"/redfish/v1/Registries/{REGISTRY}/Registry"
SIMPLE_UPDATE = "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate"
INVENTORY = "/redfish/v1/UpdateService/FirmwareInventory"


class Served:
    def __init__(self, shape: str | None = None) -> None:
        self.clock = FakeClock()
        self.machine = FakeMachine("m1", Hardware(power_on_time=0.0), clock=self.clock)
        found = SHAPES[shape] if shape else None
        self.bmc = Bmc(
            self.machine, username="u", password="p", system_id=found.system_id if found else None
        )
        if found is not None:
            self.bmc.shape = ShapeState(found, self.machine)
        self.system = found.system_path if found else self.bmc.system_path

    def call(
        self,
        method: str,
        target: str,
        body: Any = None,
        headers: list[tuple[str, str]] | None = None,
        firings: list[Firing] | None = None,
    ) -> tuple[int, dict[str, str], dict[str, Any]]:
        raw = b"" if body is None else json.dumps(body).encode()
        request = Request(method, target, "HTTP/1.1", headers or [], raw)
        answer = serve(self.bmc, request, firings or [])
        assert answer is not None, target
        code, head, data = answer
        return code, dict(head), json.loads(data) if data else {}

    def get(self, target: str) -> dict[str, Any]:
        code, _head, body = self.call("GET", target)
        assert code == 200, (target, code, body)
        return body


def _firing(effect: Effect) -> Firing:
    return Firing(0.0, "m1", "redfish", "bios.set", effect, "r1", {})


def test_the_bios_shows_its_attributes_registry_and_settings_object() -> None:
    lab = Served()
    bios = lab.get(f"{lab.system}/Bios")
    assert bios["AttributeRegistry"] == REGISTRY
    assert bios["Attributes"]["ProcTurboMode"] == "Enabled"
    assert bios["Attributes"]["AdminPassword"] is None  # a password is never shown
    settings = bios["@Redfish.Settings"]
    assert settings["SettingsObject"] == {"@odata.id": f"{lab.system}/Bios/Settings"}
    assert settings["SupportedApplyTimes"] == ["OnReset", "Immediate"]
    assert lab.get(f"{lab.system}/Bios/Settings")["Attributes"] == {}


def test_the_registry_is_found_through_the_registries_collection() -> None:
    lab = Served()
    members = lab.get("/redfish/v1/Registries")["Members"]
    assert members == [{"@odata.id": f"/redfish/v1/Registries/{REGISTRY}"}]
    where = lab.get(members[0]["@odata.id"])["Location"][0]["Uri"]
    entries = {e["AttributeName"]: e for e in lab.get(where)["RegistryEntries"]["Attributes"]}
    assert [v["ValueName"] for v in entries["BootMode"]["Value"]] == ["Uefi", "LegacyBios"]
    assert (entries["ProcCoreDisable"]["LowerBound"], entries["ProcCoreDisable"]["UpperBound"]) == (
        0,
        7,
    )
    assert entries["SystemModelName"]["ReadOnly"] is True
    assert entries["AdminPassword"]["Type"] == "Password"


def test_a_patch_is_pending_until_the_next_boot_then_applied() -> None:
    lab = Served()
    settings = f"{lab.system}/Bios/Settings"
    code, _, _ = lab.call("PATCH", settings, {"Attributes": {"ProcTurboMode": "Disabled"}})
    assert code == 204
    assert lab.get(settings)["Attributes"] == {"ProcTurboMode": "Disabled"}
    assert lab.get(f"{lab.system}/Bios")["Attributes"]["ProcTurboMode"] == "Enabled"
    lab.machine.set_power(PowerAction.ON)
    lab.clock.advance(1.0)
    assert lab.get(f"{lab.system}/Bios")["Attributes"]["ProcTurboMode"] == "Disabled"
    assert lab.get(settings)["Attributes"] == {}


def test_an_immediate_patch_applies_at_once() -> None:
    lab = Served()
    body = {
        "Attributes": {"ProcCoreDisable": 3},
        "@Redfish.SettingsApplyTime": {"ApplyTime": "Immediate"},
    }
    assert lab.call("PATCH", f"{lab.system}/Bios/Settings", body)[0] == 204
    assert lab.get(f"{lab.system}/Bios")["Attributes"]["ProcCoreDisable"] == 3


def test_a_bad_patch_is_refused_naming_every_problem_and_nothing_is_staged() -> None:
    lab = Served()
    body = {
        "Attributes": {"NoSuchThing": 1, "SystemModelName": "x", "ProcCoreDisable": 99},
        "@Redfish.SettingsApplyTime": {"ApplyTime": "AtMaintenanceWindowStart"},
    }
    code, _, answer = lab.call("PATCH", f"{lab.system}/Bios/Settings", body)
    assert code == 400
    message = answer["error"]["message"]
    for part in ("NoSuchThing", "SystemModelName", "99 is above 7", "AtMaintenanceWindowStart"):
        assert part in message
    assert lab.machine.bios.pending == {}


def test_a_patch_with_a_stale_if_match_is_refused() -> None:
    lab = Served()
    settings = f"{lab.system}/Bios/Settings"
    _, head, _ = lab.call("GET", settings)
    lab.machine.bios.stage({"BootMode": "LegacyBios"})  # changed behind the client's back
    stale = [("If-Match", head["ETag"])]
    code, _, _ = lab.call("PATCH", settings, {"Attributes": {"SriovEnable": True}}, stale)
    assert code == 412


@pytest.mark.parametrize(
    ("effect", "left"),
    [
        (Effect.BIOS_PENDING, {"ProcTurboMode": "Disabled", "ProcHyperthreading": "Disabled"}),
        (Effect.BIOS_PARTIAL, {"ProcTurboMode": "Disabled"}),
    ],
)
def test_bios_effects_hold_settings_pending_past_the_next_boot(
    effect: Effect, left: dict[str, str]
) -> None:
    lab = Served()
    wanted = {"ProcTurboMode": "Disabled", "ProcHyperthreading": "Disabled"}
    settings = f"{lab.system}/Bios/Settings"
    code, _, _ = lab.call("PATCH", settings, {"Attributes": wanted}, firings=[_firing(effect)])
    assert code == 204
    lab.machine.set_power(PowerAction.ON)
    lab.clock.advance(1.0)
    assert lab.get(settings)["Attributes"] == left
    lab.machine.set_power(PowerAction.REBOOT)  # the effect held one boot only
    lab.clock.advance(1.0)
    assert lab.get(settings)["Attributes"] == {}


def test_the_firmware_inventory_lists_the_machines_components() -> None:
    lab = Served()
    inventory = lab.get("/redfish/v1/UpdateService")["FirmwareInventory"]["@odata.id"]
    members = [m["@odata.id"] for m in lab.get(inventory)["Members"]]
    found = {b["Id"]: b for b in map(lab.get, members)}
    assert set(found) == {"BMC", "BIOS", "NIC1"}
    assert all(b["Version"] and b["Updateable"] is True for b in found.values())


def test_the_parts_are_served_under_the_system() -> None:
    lab = Served()
    nics = lab.get(f"{lab.system}/EthernetInterfaces")["Members"]
    nic = lab.get(nics[0]["@odata.id"])
    assert nic["MACAddress"].startswith("52:54:00:")
    disks = lab.get(f"{lab.system}/SimpleStorage/1")["Devices"]
    assert disks[0]["CapacityBytes"] == 480 * 10**9


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_shape_links_its_bios_and_serves_it(name: str) -> None:
    lab = Served(name)
    assert lab.bmc.shape is not None
    body = system(lab.bmc, lab.bmc.shape)
    bios = lab.get(body["Bios"]["@odata.id"])
    target = bios["@Redfish.Settings"]["SettingsObject"]["@odata.id"]
    assert target == f"{lab.system}/Bios/{SHAPES[name].bios_settings}"
    assert SHAPES["xcc"].bios_settings == "Pending"  # Lenovo XCC's settings object
    assert lab.call("PATCH", target, {"Attributes": {"SriovEnable": True}})[0] == 204


def test_not_a_lifecycle_resource_falls_through() -> None:
    lab = Served()
    request = Request("GET", lab.system, "HTTP/1.1", [])
    assert serve(lab.bmc, request, []) is None


@pytest.mark.parametrize(
    ("method", "path", "operation"),
    [
        ("GET", "/redfish/v1/Systems/1/Bios", Operation.BIOS_GET),
        ("GET", "/redfish/v1/Systems/1/Bios/Settings", Operation.BIOS_GET),
        ("PATCH", "/redfish/v1/Systems/1/Bios/Settings", Operation.BIOS_SET),
        ("PATCH", "/redfish/v1/Systems/1/Bios/Pending", Operation.BIOS_SET),
        ("GET", "/redfish/v1/UpdateService/FirmwareInventory/BMC", Operation.FIRMWARE_GET),
        ("POST", SIMPLE_UPDATE, Operation.FIRMWARE_UPDATE),
    ],
)
def test_lifecycle_requests_are_named_so_fault_rules_fire(
    method: str, path: str, operation: Operation
) -> None:
    assert redfish_operation(method, path) is operation
    assert redfish_operation("GET", "/redfish/v1/Systems/1", "bios.get") is Operation.BIOS_GET


# -- SimpleUpdate and its tasks -------------------------------------------------------------


def test_the_update_service_offers_simple_update_and_the_task_service_its_tasks() -> None:
    lab = Served()
    action = lab.get("/redfish/v1/UpdateService")["Actions"]["#UpdateService.SimpleUpdate"]
    assert action["target"] == SIMPLE_UPDATE
    assert action["TransferProtocol@Redfish.AllowableValues"] == ["HTTP", "HTTPS"]
    info = lab.get(action["@Redfish.ActionInfo"])
    assert [p["Name"] for p in info["Parameters"]] == ["ImageURI", "TransferProtocol", "Targets"]
    tasks = lab.get("/redfish/v1/TaskService")["Tasks"]["@odata.id"]
    assert lab.get(tasks)["Members"] == []


def test_simple_update_runs_a_task_that_lands_the_image_version_on_the_clock() -> None:
    lab = Served()
    body = {"ImageURI": "https://images.example/fw/bios-2.7.bin"}
    code, head, task = lab.call("POST", SIMPLE_UPDATE, body)
    assert code == 202
    assert head["Location"] == "/redfish/v1/TaskService/Tasks/1" == task["@odata.id"]
    assert (task["TaskState"], task["PercentComplete"], task["TaskStatus"]) == ("New", 0, "OK")
    lab.clock.advance(1.0)
    task = lab.get(head["Location"])
    assert (task["TaskState"], task["PercentComplete"]) == ("Running", 50)
    assert lab.get(f"{INVENTORY}/BIOS")["Version"] == "fake-bios-1.0"  # not yet
    lab.clock.advance(1.0)
    task = lab.get(head["Location"])
    assert (task["TaskState"], task["PercentComplete"]) == ("Completed", 100)
    assert [m["MessageId"] for m in task["Messages"]] == [
        "TaskEvent.1.0.TaskStarted",
        "TaskEvent.1.0.TaskCompletedOK",
    ]
    assert lab.get(f"{INVENTORY}/BIOS")["Version"] == "bios-2.7.bin"  # the default target
    assert lab.get("/redfish/v1/TaskService/Tasks")["Members@odata.count"] == 1
    assert not lab.machine.bmc_down()


@pytest.mark.parametrize(
    ("image", "target"),
    [
        ("http://x/fw/bmc-2.0.bin", "BMC"),
        ("http://x/NIC1_3.1.bin", "NIC1"),
        ("http://x/a.bin", "BIOS"),
    ],
)
def test_without_targets_the_image_name_picks_the_component(image: str, target: str) -> None:
    """A BMC reads the component from the package itself (stock Ironic sends
    no ``Targets`` to a one-system BMC): here, the member whose id the image's
    file name starts with, else the BIOS."""
    lab = Served()
    assert lab.call("POST", SIMPLE_UPDATE, {"ImageURI": image})[0] == 202
    lab.clock.advance(10.0)
    version = image.rpartition("/")[2]
    assert lab.get(f"{INVENTORY}/{target}")["Version"] == version


def test_bmc_firmware_reboots_the_bmc_which_comes_back_with_it() -> None:
    lab = Served()
    body = {"ImageURI": "http://10.0.0.1/bmc-3.0.fwpkg", "Targets": [f"{INVENTORY}/BMC"]}
    assert lab.call("POST", SIMPLE_UPDATE, body)[0] == 202
    lab.clock.advance(1.9)
    assert not lab.machine.bmc_down()
    lab.clock.advance(0.2)  # landed: the BMC reboots into it (bmc_reboot_time 2 s)
    assert lab.machine.bmc_down()
    lab.clock.advance(2.0)
    assert not lab.machine.bmc_down()
    assert lab.get(f"{INVENTORY}/BMC")["Version"] == "bmc-3.0.fwpkg"
    assert lab.get("/redfish/v1/TaskService/Tasks/1")["TaskState"] == "Completed"


@pytest.mark.parametrize(
    ("body", "message_id", "words"),
    [
        ({"ImageURI": "ftp://x/fw.bin"}, "ActionParameterValueFormatError", "http or https"),
        ({"ImageURI": "fw.bin"}, "ActionParameterValueFormatError", "http or https"),
        (
            {"ImageURI": "http://x/a.bin", "TransferProtocol": "TFTP"},
            "PropertyValueNotInList",
            "TransferProtocol 'TFTP'",
        ),
        (
            {"ImageURI": "http://x/a.bin", "Targets": [f"{INVENTORY}/GPU9"]},
            "PropertyValueNotInList",
            "GPU9",
        ),
        ({}, "ActionParameterMissing", "ImageURI"),
    ],
)
def test_a_bad_simple_update_is_refused_and_starts_nothing(
    body: dict[str, Any], message_id: str, words: str
) -> None:
    lab = Served()
    code, _head, answer = lab.call("POST", SIMPLE_UPDATE, body)
    assert code == 400
    assert answer["error"]["code"] == f"Base.1.8.{message_id}"
    assert words in answer["error"]["message"]
    assert lab.machine.updates == []


def test_every_problem_of_a_simple_update_is_named_at_once() -> None:
    lab = Served()
    body = {"ImageURI": "ftp://x/a.bin", "TransferProtocol": "NFS", "Targets": ["nope"]}
    message = lab.call("POST", SIMPLE_UPDATE, body)[2]["error"]["message"]
    assert "ImageURI" in message
    assert "TransferProtocol" in message
    assert "'nope'" in message


def test_the_202_shows_the_task_as_taken_though_the_clock_moved_meanwhile() -> None:
    lab = Served()
    ticks = iter(range(1, 10_000))
    lab.machine._clock = lambda: lab.clock() + next(ticks) * 0.001  # time passes every read
    code, _head, task = lab.call("POST", SIMPLE_UPDATE, {"ImageURI": "http://x/b.bin"})
    assert (code, task["TaskState"], task["PercentComplete"]) == (202, "New", 0)
    assert all(m["MessageSeverity"] == "OK" for m in task["Messages"])
