"""What a Redfish service does not say is not a refusal (issue 47, findings 1-6).

Each test serves a recorded tree (``tests/fixtures/redfish-trees``) in the
shape another vendor's recording has -- the recorded bodies, with the one
difference the finding names -- and drives the driver as a user builds it
(:mod:`tests.lab.test_redfish_vendor_trees`). A fault a vendor's shape causes
is never one the policy table counts against the node.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import BootDevice, BootSetting, PowerAction
from bmaas.faults import PowerFailure, PowerPending, UnsupportedOperation
from bmaas.policy import policy_for
from tests.lab.redfish_trees import Quirks, TreeState
from tests.lab.test_redfish_vendor_trees import URL, call, fails, offer, resets, tree

pytestmark = pytest.mark.lab

DMTF = "dmtf-public-rackmount1"
CD1 = "/redfish/v1/Systems/437XR1138R2/VirtualMedia/CD1"
CD2 = "/redfish/v1/Systems/437XR1138R2/VirtualMedia/CD2"
LENOVO_CD = "/redfish/v1/Managers/1/VirtualMedia/CD"
HPE_CD = "/redfish/v1/Managers/1/VirtualMedia/2"


def reset_action(state: TreeState) -> dict[str, Any]:
    action: dict[str, Any] = state.resources[state.system()]["Actions"]["#ComputerSystem.Reset"]
    return action


# -- 1. an ActionInfo link that answers 404 -------------------------------------------------


def link_dangling_action_info(state: TreeState) -> str:
    """Supermicro X12's shape, and another vendor's (``GET .../ResetActionInfo``
    answers 404): no inline values, a link to an ActionInfo never served."""
    action = reset_action(state)
    del action["ResetType@Redfish.AllowableValues"]
    info = f"{state.system()}/ResetActionInfo"
    action["@Redfish.ActionInfo"] = info
    return info


def test_an_action_info_answering_404_leaves_every_power_action_to_the_bmc() -> None:
    with tree(DMTF) as (state, driver):
        info = link_dangling_action_info(state)
        assert state.resources[state.system()]["PowerState"] == "On"
        for action in (
            PowerAction.SOFT_OFF,
            PowerAction.ON,
            PowerAction.REBOOT,
            PowerAction.SOFT_REBOOT,
            PowerAction.OFF,
        ):
            driver.set_power_state(action, deadline=call())
        assert resets(state) == [
            "GracefulShutdown",
            "On",
            "ForceRestart",
            "GracefulRestart",
            "ForceOff",
        ]
        # read once, and its absence remembered
        assert [p for _, p, _ in state.calls("GET")].count(info) == 1


def test_an_unreadable_action_info_falls_back_to_the_values_the_action_lists() -> None:
    with tree(DMTF) as (state, driver):
        link_dangling_action_info(state)
        reset_action(state)["ResetType@Redfish.AllowableValues"] = ["On", "ForceOff", "PowerCycle"]
        driver.set_power_state(PowerAction.REBOOT, deadline=call())
        assert resets(state) == ["PowerCycle"]


def test_with_nothing_readable_the_bmcs_answer_decides_and_is_not_the_nodes_fault() -> None:
    with tree(DMTF, Quirks(takes_resets=frozenset({"On", "ForceOff"}))) as (state, driver):
        link_dangling_action_info(state)
        fault = fails(lambda: driver.set_power_state(PowerAction.SOFT_REBOOT, deadline=call()))
        assert resets(state) == ["GracefulRestart"]  # asked; the BMC said no
    assert isinstance(fault, UnsupportedOperation)
    assert "ActionParameterValueNotInList" in str(fault)


# -- 2. a Boot without override properties; property errors on a write -------------------------


def drop_overrides(state: TreeState) -> None:
    """A ``Boot`` with ``BootOrder``/``BootOptions`` only."""
    boot = state.resources[state.system()]["Boot"]
    for key in [k for k in boot if k.startswith(("BootSourceOverride", "UefiTarget"))]:
        del boot[key]
    assert set(boot) == {"BootOptions", "BootOrder"}


def test_a_system_without_override_properties_says_so_before_any_patch() -> None:
    with tree("hpe-dl325-gen10plus") as (state, driver):
        drop_overrides(state)
        fault = fails(lambda: driver.set_boot_device(BootDevice.PXE, deadline=call()))
        http = fails(lambda: driver.set_http_boot(None, deadline=call()))
        assert not state.writes()
        # no override: the node follows its own boot order
        assert driver.get_boot_device(deadline=call()) == BootSetting(BootDevice.DISK, True)
    assert isinstance(fault, UnsupportedOperation)
    assert isinstance(http, UnsupportedOperation)
    assert "no boot override" in str(fault)


@pytest.mark.parametrize(
    "message_id",
    [
        "Base.1.16.PropertyUnknown",
        "Base.1.16.PropertyNotWritable",
        "Base.1.16.PropertyValueTypeError",
        "Base.1.16.OperationNotAllowed",
    ],
)
def test_a_property_error_on_the_override_patch_is_unsupported_never_counted(
    message_id: str,
) -> None:
    with tree("hpe-dl325-gen10plus", Quirks(refuse_system_patch=(400, message_id))) as (
        state,
        driver,
    ):
        fault = fails(lambda: driver.set_boot_device(BootDevice.PXE, deadline=call()))
        assert [m for m, _, _ in state.writes()] == ["PATCH"]
    assert isinstance(fault, UnsupportedOperation)
    assert message_id.rsplit(".", 1)[-1] in str(fault)


# -- 3. a CD slot without MediaTypes -------------------------------------------------------------


def test_a_slot_named_cd_without_media_types_is_a_cd_slot() -> None:
    # AMI-based services: Managers/Self/VirtualMedia/CD1, no MediaTypes
    with tree("lenovo-sr650") as (state, driver):
        del state.resources[LENOVO_CD]["MediaTypes"]
        driver.insert_virtual_media(URL, deadline=call())
        assert state.resources[LENOVO_CD]["Image"] == URL
        floppy = "/redfish/v1/Managers/1/VirtualMedia/Floppy"  # neither named nor typed CD
        assert state.resources[floppy] == state.recorded[floppy]


def test_a_slot_whose_insert_parameters_allow_cd_media_is_a_cd_slot() -> None:
    with tree("hpe-dl325-gen10plus") as (state, driver):
        slot = state.resources[HPE_CD]
        del slot["MediaTypes"]  # and its Id ("2") and Name ("VirtualMedia") say nothing
        info = f"{HPE_CD}/InsertMediaActionInfo"
        slot["Actions"]["#VirtualMedia.InsertMedia"]["@Redfish.ActionInfo"] = info
        state.add(
            info,
            {
                "@odata.id": info,
                "@odata.type": "#ActionInfo.v1_1_2.ActionInfo",
                "Id": "InsertMediaActionInfo",
                "Parameters": [
                    {"Name": "Image", "Required": True, "DataType": "String"},
                    {"Name": "MediaType", "DataType": "String", "AllowableValues": ["CD", "DVD"]},
                ],
            },
        )
        driver.insert_virtual_media(URL, deadline=call())
        assert state.resources[HPE_CD]["Image"] == URL


def test_a_slot_nothing_calls_a_cd_is_still_no_cd_slot() -> None:
    with tree("hpe-dl325-gen10plus") as (state, driver):
        del state.resources[HPE_CD]["MediaTypes"]
        fault = fails(lambda: driver.insert_virtual_media(URL, deadline=call()))
        assert not state.writes()
    assert "no CD/DVD slot" in str(fault)


# -- 4. the manager through Links.Managers, or the only one ----------------------------------------


def test_a_manager_linked_as_links_managers_is_searched_for_virtual_media() -> None:
    with tree("lenovo-sr650") as (state, driver):
        links = state.resources[state.system()]["Links"]
        links["Managers"] = links.pop("ManagedBy")
        driver.insert_virtual_media(URL, deadline=call())
        assert state.resources[LENOVO_CD]["Image"] == URL


def test_the_only_manager_of_a_one_system_service_is_searched() -> None:
    with tree("lenovo-sr650") as (state, driver):
        del state.resources[state.system()]["Links"]["ManagedBy"]
        driver.insert_virtual_media(URL, deadline=call())
        assert state.resources[LENOVO_CD]["Image"] == URL


# -- 5. eject what bmaas inserted ------------------------------------------------------------------


def test_eject_leaves_media_bmaas_did_not_insert() -> None:
    with tree(DMTF) as (state, driver):
        # as recorded: CD1 holds an Applet's image, CD2 an uploaded one
        driver.eject_virtual_media(deadline=call())
        assert not state.writes()
        assert state.resources[CD1]["Inserted"] is True
        assert state.resources[CD2]["Inserted"] is True
        driver.insert_virtual_media(URL, deadline=call())
        assert state.resources[CD1]["Image"] == URL
        driver.eject_virtual_media(deadline=call())
        assert state.resources[CD1]["Inserted"] is False  # bmaas's own
        assert state.resources[CD2]["Inserted"] is True  # another tool's: left
        driver.eject_virtual_media(deadline=call())  # idempotent: nothing more
        assert state.resources[CD2]["Inserted"] is True


def test_eject_of_a_named_image_or_forced() -> None:
    with tree(DMTF) as (state, driver):
        state.resources[CD1].update(Image=URL, ConnectedVia="URI")  # another process's insert
        driver.eject_virtual_media(deadline=call())  # not this driver's: left
        assert state.resources[CD1]["Inserted"] is True
        driver.eject_virtual_media(url=URL, deadline=call())
        assert state.resources[CD1]["Inserted"] is False
        assert state.resources[CD2]["Inserted"] is True
        driver.eject_virtual_media(force=True, deadline=call())
        assert state.resources[CD2]["Inserted"] is False


def test_eject_leaves_a_slot_whose_image_another_tool_replaced() -> None:
    with tree(DMTF) as (state, driver):
        driver.insert_virtual_media(URL, deadline=call())
        state.resources[CD1].update(Image="http://other.example/theirs.iso")
        driver.eject_virtual_media(deadline=call())
        assert state.resources[CD1]["Inserted"] is True


# -- 6. reboot from off and on ----------------------------------------------------------------


def test_reboot_where_only_on_and_force_off_exist_is_off_then_on() -> None:
    with tree("hpe-dl325-gen10plus", Quirks(off_lag_reads=3)) as (state, driver):
        driver.power_poll_interval = 0.01
        offer(state, ["On", "ForceOff"])
        driver.set_power_state(PowerAction.REBOOT, deadline=call())
        assert resets(state) == ["ForceOff", "On"]
        assert state.resources[state.system()]["PowerState"] == "On"
        # a node that is off is only powered on
        state.quirks.off_lag_reads = 0
        driver.set_power_state(PowerAction.OFF, deadline=call())
        driver.set_power_state(PowerAction.REBOOT, deadline=call())
        assert resets(state) == ["ForceOff", "On", "ForceOff", "On"]


def test_a_composed_reboot_whose_off_never_shows_ends_by_the_deadline() -> None:
    with tree("hpe-dl325-gen10plus", Quirks(off_lag_reads=10_000)) as (state, driver):
        driver.power_poll_interval = 0.05
        offer(state, ["On", "ForceOff"])
        start = time.monotonic()
        pending = fails(
            lambda: driver.set_power_state(PowerAction.REBOOT, deadline=Deadline.after(1.0))
        )
        took = time.monotonic() - start
        assert resets(state) == ["ForceOff"]  # never On while it reads on
    # the budget ended inside the hardware's window (3 BMC timeouts): under way
    assert isinstance(pending, PowerPending)
    assert took < 1.5
    assert "On not sent" in str(pending)


def test_a_composed_reboot_whose_off_never_shows_in_the_hardwares_window_is_a_power_failure() -> (
    None
):
    with tree("hpe-dl325-gen10plus", Quirks(off_lag_reads=10_000)) as (state, driver):
        driver.bmc_timeout = 0.3  # the node's window: 0.9 s
        driver.power_poll_interval = 0.05
        offer(state, ["On", "ForceOff"])
        with pytest.raises(PowerFailure) as info:
            # the request itself (set_power_state gives it one BMC timeout at most)
            driver.request_power(PowerAction.REBOOT, deadline=Deadline.after(3.0))
        assert resets(state) == ["ForceOff"]
    assert "still reads On" in str(info.value)
    assert policy_for(PowerFailure).counts_for_health  # the hardware did not go off
