"""hwlab's vendor shapes true to the firmware they name (issue 47, findings 7
and 8), through the shape engine itself (no sockets): each shape cites the
recording it follows and shows what that recording shows; ``$select`` is
answered with the properties named only; the gaps vendor trees leave out
are shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bmaas.driver import PowerAction, PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.effects import Effect, Firing
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.hwlab.http import Request
from bmaas.hwlab.redfish.bmc import Bmc
from bmaas.hwlab.redfish.shapes import SHAPES
from bmaas.hwlab.redfish.shapes.engine import serve
from bmaas.hwlab.redfish.shapes.gaps import HELD_IMAGE
from bmaas.hwlab.redfish.shapes.state import ShapeState

ROOT = Path(__file__).resolve().parents[3]
TREES = ROOT / "tests" / "fixtures" / "redfish-trees"


class Served:
    """One shape served from one machine's live state."""

    def __init__(self, name: str) -> None:
        self.shape = SHAPES[name]
        self.clock = FakeClock()
        self.machine = FakeMachine("m1", Hardware(power_on_time=0.0), clock=self.clock)
        self.bmc = Bmc(self.machine, username="u", password="p", system_id=self.shape.system_id)
        self.state = ShapeState(self.shape, self.machine)

    def call(self, method: str, target: str, body: Any = None) -> tuple[int, dict[str, Any]]:
        raw = b"" if body is None else json.dumps(body).encode()
        answer = serve(self.bmc, self.state, Request(method, target, "HTTP/1.1", [], raw), [])
        assert answer is not None, target
        code, _headers, data = answer
        return code, json.loads(data) if data else {}

    def get(self, target: str) -> dict[str, Any]:
        code, body = self.call("GET", target)
        assert code == 200, (target, code, body)
        return body


def recorded(tree: str, path: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((TREES / tree / path / "index.json").read_text())
    return data


# -- every shape cites its recording -----------------------------------------------


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_shape_cites_the_recording_it_follows(name: str) -> None:
    recording = SHAPES[name].recording
    if recording.startswith("tests/fixtures/redfish-trees/"):
        assert (ROOT / recording / "SOURCE.md").is_file(), recording
    else:
        assert recording.startswith(("https://", "bmaas issue")), recording


@pytest.mark.parametrize(
    "name",
    sorted(n for n, s in SHAPES.items() if s.recording.startswith("tests/fixtures/")),
)
def test_select_query_is_advertised_where_the_recording_advertises_it(name: str) -> None:
    shape = SHAPES[name]
    root = json.loads((ROOT / shape.recording / "index.json").read_text())
    advertised = root.get("ProtocolFeaturesSupported", {}).get("SelectQuery") is True
    assert shape.select_query is advertised
    served = Served(name).get("/redfish/v1")
    assert served["ProtocolFeaturesSupported"]["SelectQuery"] is advertised


# -- finding 7: iLO 5 2.x, Supermicro, OpenBMC --------------------------------------


def test_ilo5_is_the_dl325_recording_v2_46_with_standard_actions() -> None:
    tree = "hpe-dl325-gen10plus"
    served = Served("ilo5")
    manager = served.get("/redfish/v1/Managers/1")
    assert manager["FirmwareVersion"] == recorded(tree, "Managers/1")["FirmwareVersion"]
    system = served.get("/redfish/v1/Systems/1")
    reset = system["Actions"]["#ComputerSystem.Reset"]
    want = recorded(tree, "Systems/1")["Actions"]["#ComputerSystem.Reset"]
    assert reset["ResetType@Redfish.AllowableValues"] == want["ResetType@Redfish.AllowableValues"]
    assert {"GracefulShutdown", "GracefulRestart"} <= set(
        reset["ResetType@Redfish.AllowableValues"]
    )
    slot = served.get("/redfish/v1/Managers/1/VirtualMedia/2")
    assert set(slot["Actions"]) >= set(recorded(tree, "Managers/1/VirtualMedia/2")["Actions"])
    insert = slot["Actions"]["#VirtualMedia.InsertMedia"]["target"]
    code, _ = served.call("POST", insert, {"Image": "https://x/boot.iso"})
    assert code == 204
    assert served.machine.media == "https://x/boot.iso"
    assert served.get("/redfish/v1/Managers/1/VirtualMedia/2")["Inserted"] is True
    code, _ = served.call(
        "POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", {"ResetType": "On"}
    )
    assert code == 204
    code, _ = served.call(
        "POST",
        "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
        {"ResetType": "GracefulRestart"},
    )
    assert code == 204


@pytest.mark.parametrize("version", ["new", "old"])
def test_the_manager_reads_the_bmc_firmware_that_landed(version: str) -> None:
    """The Manager's ``FirmwareVersion`` (where Ironic's ``redfish`` reads the
    BMC's version, and watches it change after an update) is the recording's
    until a BMC image lands, then the image's; not while the BMC reboots, and
    not when it comes back with the old one (``update_reboot`` version=old)."""
    served = Served("ilo5")
    params = {"duration": 1.0, "version": version}
    firing = Firing(0.0, "m1", "redfish", "firmware.update", Effect.UPDATE_REBOOT, "r1", params)
    served.machine.update_firmware("BMC", "http://x/bmc-2.0.bin", [firing])
    assert served.get("/redfish/v1/Managers/1")["FirmwareVersion"] == "iLO 5 v2.46"
    served.clock.advance(60.0)
    want = "bmc-2.0.bin" if version == "new" else "iLO 5 v2.46"
    assert served.get("/redfish/v1/Managers/1")["FirmwareVersion"] == want


def test_ilo5_1_40_keeps_the_old_firmware_under_its_own_name() -> None:
    served = Served("ilo5-1.40")
    assert served.get("/redfish/v1/Managers/1")["FirmwareVersion"] == "iLO 5 v1.40"
    slot = served.get("/redfish/v1/Managers/1/VirtualMedia/2")
    assert "#VirtualMedia.InsertMedia" not in slot.get("Actions", {})
    reset = served.get("/redfish/v1/Systems/1")["Actions"]["#ComputerSystem.Reset"]
    assert "GracefulShutdown" not in reset["ResetType@Redfish.AllowableValues"]
    code, _ = served.call(
        "POST",
        "/redfish/v1/Managers/1/VirtualMedia/2/Actions/VirtualMedia.InsertMedia",
        {"Image": "https://x/boot.iso"},
    )
    assert code == 404


def test_supermicro_lists_cd_and_usbcd() -> None:
    boot = Served("supermicro").get("/redfish/v1/Systems/1")["Boot"]
    assert {"Cd", "UsbCd"} <= set(boot["BootSourceOverrideTarget@Redfish.AllowableValues"])


def test_openbmc_is_stock_bmcweb_no_slot_reset_types_in_action_info_only() -> None:
    served = Served("openbmc")
    system = served.get("/redfish/v1/Systems/system")
    reset = system["Actions"]["#ComputerSystem.Reset"]
    assert "ResetType@Redfish.AllowableValues" not in reset
    info = served.get(reset["@Redfish.ActionInfo"])
    assert "GracefulShutdown" in info["Parameters"][0]["AllowableValues"]
    assert "VirtualMedia" not in served.get("/redfish/v1/Managers/bmc")
    assert "VirtualMedia" not in system
    code, _ = served.call("GET", "/redfish/v1/Managers/bmc/VirtualMedia")
    assert code == 404


# -- $select ------------------------------------------------------------------------


def test_a_select_request_is_answered_with_the_selected_properties_only() -> None:
    served = Served("idrac9")
    served.machine.set_power(PowerAction.ON)
    full = served.get("/redfish/v1/Systems/System.Embedded.1")
    assert {"Boot", "Actions", "Links", "Model"} <= set(full)
    cut = served.get("/redfish/v1/Systems/System.Embedded.1?$select=PowerState,Status/Health")
    assert set(cut) - {"@odata.id", "@odata.type", "@odata.etag"} == {"PowerState", "Status"}
    assert cut["PowerState"] == "On"
    assert cut["Status"] == {"Health": full["Status"]["Health"]}
    # a name the resource does not have is left out, not refused
    cut = served.get("/redfish/v1/Systems/System.Embedded.1?%24select=PowerState,Nope")
    assert "Nope" not in cut
    assert cut["PowerState"] == "On"


def test_a_dollar_query_the_shape_does_not_take_is_501() -> None:
    """DSP0266 7.3 (the protocol validator's REQ_QUERY_UNSUPPORTED_DOLLAR_PARAMS):
    ``$select`` on a shape that does not advertise it, or any other ``$``
    parameter, is 501; a parameter without ``$`` is ignored."""
    dmtf = Served("dmtf")
    code, body = dmtf.call("GET", "/redfish/v1/Systems/437XR1138R2?$select=PowerState")
    assert code == 501
    assert body["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "Base.1.8.QueryNotSupported"
    assert dmtf.call("GET", "/redfish/v1/?$rpvunknown")[0] == 501
    assert dmtf.call("GET", "/redfish/v1/?rpvunknown")[0] == 200
    assert Served("idrac9").call("GET", "/redfish/v1?$expand=.")[0] == 501


# -- finding 8: the gaps --------------------------------------------------------------


def test_ami_cd_slot_has_no_media_types_and_takes_insert_media() -> None:
    served = Served("ami")
    members = served.get("/redfish/v1/Managers/Self/VirtualMedia")["Members"]
    assert {m["@odata.id"] for m in members} == {
        "/redfish/v1/Managers/Self/VirtualMedia/CD1",
        "/redfish/v1/Managers/Self/VirtualMedia/USB1",
    }
    slot = served.get("/redfish/v1/Managers/Self/VirtualMedia/CD1")
    assert "MediaTypes" not in slot
    target = slot["Actions"]["#VirtualMedia.InsertMedia"]["target"]
    assert served.call("POST", target, {"Image": "https://x/a.iso"})[0] == 204
    assert served.machine.media == "https://x/a.iso"  # CD1 is the machine's CD


def test_no_managedby_links_its_manager_as_links_managers_only() -> None:
    links = Served("no-managedby").get("/redfish/v1/Systems/1")["Links"]
    assert "ManagedBy" not in links
    assert links["Managers"] == [{"@odata.id": "/redfish/v1/Managers/1"}]


def test_supermicro_x12_action_info_link_answers_404() -> None:
    served = Served("supermicro-x12")
    reset = served.get("/redfish/v1/Systems/1")["Actions"]["#ComputerSystem.Reset"]
    assert "ResetType@Redfish.AllowableValues" not in reset
    code, body = served.call("GET", reset["@Redfish.ActionInfo"])
    assert code == 404, body
    # the action itself still takes what X12 offers
    code, _ = served.call("POST", reset["target"], {"ResetType": "On"})
    assert code == 204


def test_no_override_boot_has_no_override_properties_and_patch_is_property_unknown() -> None:
    served = Served("no-override")
    system = served.get("/redfish/v1/Systems/437XR1138R2")
    assert set(system["Boot"]) == {"BootOrder", "BootOptions"}
    options = served.get(system["Boot"]["BootOptions"]["@odata.id"])["Members"]
    refs = [served.get(m["@odata.id"])["BootOptionReference"] for m in options]
    assert refs == system["Boot"]["BootOrder"]
    reset = system["Actions"]["#ComputerSystem.Reset"]
    assert reset["ResetType@Redfish.AllowableValues"] == ["On", "ForceOff"]
    code, body = served.call(
        "PATCH",
        "/redfish/v1/Systems/437XR1138R2",
        {"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}},
    )
    assert code == 400
    ids = [m["MessageId"] for m in body["error"]["@Message.ExtendedInfo"]]
    assert ids == ["Base.1.8.PropertyUnknown"]


def test_dmtf_held_starts_with_another_tools_image_in_cd2() -> None:
    tree = "dmtf-public-rackmount1"
    served = Served("dmtf-held")
    base = "/redfish/v1/Systems/437XR1138R2/VirtualMedia"
    cd2 = served.get(f"{base}/CD2")
    assert recorded(tree, "Systems/437XR1138R2/VirtualMedia/CD2")["Image"] == HELD_IMAGE
    assert (cd2["Inserted"], cd2["Image"]) == (True, HELD_IMAGE)
    assert served.get(f"{base}/CD1")["Inserted"] is False
    assert served.machine.media == HELD_IMAGE
    assert served.machine.power_state() is PowerState.OFF
