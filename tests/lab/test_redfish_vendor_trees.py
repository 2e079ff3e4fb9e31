"""The Redfish driver against recorded trees of real servers (issue 34).

Each tree (``tests/fixtures/redfish-trees``, sources and licences in each
``SOURCE.md``) is served as captured by a small stateful mockup server
(:mod:`tests.lab.redfish_trees`); the driver is built the way a user builds
it (``bmaas.registry.build_driver``) and every call gets its own Deadline.
Besides the outcome, each test holds that no fault a vendor's *shape* causes
is one the policy table counts against the node or fences it for.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import BootDevice, BootSetting, Operation, OtherBootDevice, PowerAction, Quirk
from bmaas.drivers.redfish import RedfishDriver
from bmaas.drivers.redfish.service import ServiceRegistry
from bmaas.faults import BmaasError, BMCBusy, UnsupportedOperation
from bmaas.policy import policy_for
from bmaas.registry import build_driver
from tests.lab.redfish_trees import Quirks, TreeState, serving

pytestmark = pytest.mark.lab

URL = "http://images.example/deploy.iso"
#: a generous per-call budget: these servers answer at once
CALL = 5.0

#: tree -> where its CD slot is, and how it takes an image
CD_TREES = {
    "dmtf-public-rackmount1": ("/redfish/v1/Systems/437XR1138R2/VirtualMedia/CD1", "PATCH"),
    "dell-r660": ("/redfish/v1/Systems/System.Embedded.1/VirtualMedia/2", "POST"),
    "lenovo-sr650": ("/redfish/v1/Managers/1/VirtualMedia/CD", "PATCH"),
    "hpe-dl325-gen10plus": ("/redfish/v1/Managers/1/VirtualMedia/2", "POST"),
}


def call() -> Deadline:
    return Deadline.after(CALL)


@contextlib.contextmanager
def tree(
    name: str, quirks: Quirks | None = None, **info: Any
) -> Iterator[tuple[TreeState, RedfishDriver]]:
    state = TreeState(name, quirks)
    with serving(state) as url:
        driver: Any = build_driver(
            f"node-{name}",
            "redfish",
            {
                "redfish_address": url,
                "redfish_username": "admin",
                "redfish_password": "recorded-tree",
                "redfish_auth_type": "basic",
                **info,
            },
            bmc_timeout=CALL,
        )
        driver.services = ServiceRegistry()  # this test's own
        driver.vmedia_poll_interval = 0.02
        try:
            yield state, driver
        finally:
            driver.close()


def not_the_nodes(fault: BaseException) -> None:
    """A fault a vendor's shape caused: never counted, never fenced."""
    row = policy_for(type(fault))
    assert not row.counts_for_health, fault
    assert not row.fences, fault


def fails(fn: Any) -> BmaasError:
    with pytest.raises(BmaasError) as info:
        fn()
    not_the_nodes(info.value)
    return info.value


# -- virtual media wherever the tree keeps it ----------------------------------------------


@pytest.mark.parametrize("name", sorted(CD_TREES))
def test_insert_and_eject_where_the_tree_keeps_the_slot(name: str) -> None:
    slot, method = CD_TREES[name]
    with tree(name) as (state, driver):
        driver.insert_virtual_media(URL, deadline=call())
        assert state.resources[slot]["Image"] == URL
        assert state.resources[slot]["Inserted"] is True
        inserts = [w for w in state.writes() if (w[2] or {}).get("Image") == URL]
        assert [(m, p.startswith(slot)) for m, p, _ in inserts] == [(method, True)]
        driver.eject_virtual_media(deadline=call())
        assert state.resources[slot]["Inserted"] is False
        assert not state.resources[slot]["Image"]


@pytest.mark.parametrize("name", sorted(CD_TREES))
def test_the_cd_slots_read_back_what_was_inserted(name: str) -> None:
    """Ironic's node vmedia read (``get_virtual_media``) on every slot shape."""
    slot, _ = CD_TREES[name]
    with tree(name) as (state, driver):
        driver.insert_virtual_media(URL, deadline=call())
        read = driver.get_virtual_media(deadline=call())
        # (a tree may have a second CD slot holding an image of its own)
        (held,) = [s for s in read if s["inserted"] and s["image"] == URL]
        assert state.resources[slot]["Image"] == URL
        assert {"CD", "DVD"} & set(held["media_types"])
        driver.eject_virtual_media(deadline=call())
        # bmaas's image is out; another tool's (DMTF's CD2) stays (issue 47)
        after = driver.get_virtual_media(deadline=call())
        assert not any(s["image"] == URL for s in after)
        assert [s["inserted"] for s in after] == [
            bool(state.recorded[p].get("Inserted")) and p != slot for p in driver._vmedia_paths
        ]


def test_the_dmtf_slot_holding_media_is_ejected_before_the_insert() -> None:
    slot, _ = CD_TREES["dmtf-public-rackmount1"]
    with tree("dmtf-public-rackmount1") as (state, driver):
        assert state.resources[slot]["Inserted"] is True  # as recorded: an Applet's image
        driver.insert_virtual_media(URL, deadline=call())
        writes = [(m, p, b) for m, p, b in state.writes()]
    assert writes == [
        ("PATCH", slot, {"Image": None, "Inserted": False}),
        ("PATCH", slot, {"Image": URL, "Inserted": True, "WriteProtected": True}),
    ]


def test_the_idrac_slot_is_sent_the_transfer_protocol_it_lists() -> None:
    slot, _ = CD_TREES["dell-r660"]
    with tree("dell-r660") as (state, driver):
        driver.insert_virtual_media(URL, deadline=call())
        ((_, path, body),) = state.writes()
        assert path == f"{slot}/Actions/VirtualMedia.InsertMedia"
        assert body["TransferProtocolType"] == "HTTP"
        fault = fails(lambda: driver.insert_virtual_media("tftp://x/y.iso", deadline=call()))
        assert isinstance(fault, UnsupportedOperation)
        assert "TFTP" in str(fault)


def test_a_required_transfer_protocol_not_listed_is_sent_on_the_second_post() -> None:
    with tree("hpe-dl325-gen10plus", Quirks(require_protocol=True)) as (state, driver):
        driver.insert_virtual_media(URL, deadline=call())
        posts = [b for m, _, b in state.writes()]
    assert [b.get("TransferProtocolType") for b in posts] == [None, "HTTP"]


def test_no_slot_anywhere_is_unsupported_naming_each_operation() -> None:
    with tree("dell-r6515") as (state, driver):
        insert = fails(lambda: driver.insert_virtual_media(URL, deadline=call()))
        eject = fails(lambda: driver.eject_virtual_media(deadline=call()))
        assert not state.writes()
    assert isinstance(insert, UnsupportedOperation)
    assert isinstance(eject, UnsupportedOperation)
    assert "no CD/DVD slot" in str(insert)
    assert insert.operation == str(Operation.VMEDIA_INSERT)
    assert eject.operation == str(Operation.VMEDIA_EJECT)


def test_a_slot_refusing_the_insert_with_405_moves_to_the_next_slot() -> None:
    first = "/redfish/v1/Systems/437XR1138R2/VirtualMedia/CD1"
    second = "/redfish/v1/Systems/437XR1138R2/VirtualMedia/CD2"
    quirks = Quirks(refuse_insert=frozenset({first}))
    with tree("dmtf-public-rackmount1", quirks) as (state, driver):
        driver.insert_virtual_media(URL, deadline=call())
        assert state.resources[second]["Image"] == URL
        # the slot that took it is tried first next time: no second 405
        before = len(state.writes())
        driver.insert_virtual_media(URL, deadline=call())
        assert [p for _, p, _ in state.writes()[before:]] == [second, second]


def test_every_slot_in_use_is_busy_not_the_nodes_fault() -> None:
    slots = frozenset(f"/redfish/v1/Systems/System.Embedded.1/VirtualMedia/{n}" for n in ("1", "2"))
    with tree("dell-r660", Quirks(in_use=slots)) as (state, driver):
        fault = fails(lambda: driver.insert_virtual_media(URL, deadline=call()))
        assert len(state.writes()) == 2  # each slot once
    assert isinstance(fault, BMCBusy)
    assert "RAC0904" in str(fault)


def test_an_insert_that_reads_empty_for_a_while_is_read_back_until_it_shows() -> None:
    with tree("dell-r660", Quirks(hidden_reads=3)) as (state, driver):
        driver.insert_virtual_media(URL, deadline=call())
        slot, _ = CD_TREES["dell-r660"]
        gets = [p for m, p, _ in state.calls("GET") if p == slot]
    # read once when the slots are found, once before the insert, then 3 empty
    # read-backs and the one that shows
    assert len(gets) == 2 + 4


def test_an_insert_that_never_shows_ends_by_the_deadline_as_busy() -> None:
    # 1 s: finding the slot and inserting take ~10 requests 0.05 s apart (the
    # gate's spacing); with 0.5 s, bmaas's own spacing left the first
    # read-back no time, and it was refused before it was sent (SlotTimeout)
    with tree("dell-r660", Quirks(hidden_reads=10_000)) as (_, driver):
        start = time.monotonic()
        fault = fails(lambda: driver.insert_virtual_media(URL, deadline=Deadline.after(1.0)))
        took = time.monotonic() - start
    assert isinstance(fault, BMCBusy)
    assert "still reads empty" in str(fault)
    assert took < 1.0 + 0.5


def test_a_slot_still_reading_inserted_after_an_eject_is_ejected_and_inserted_again() -> None:
    slot, _ = CD_TREES["hpe-dl325-gen10plus"]
    with tree("hpe-dl325-gen10plus", Quirks(sticky_reads=5)) as (state, driver):
        driver.insert_virtual_media(URL, deadline=call())
        driver.eject_virtual_media(deadline=call())
        before = len(state.writes())
        driver.insert_virtual_media(URL, deadline=call())  # reads "inserted, same URL"
        actions = [p.rsplit(".", 1)[-1] for _, p, _ in state.writes()[before:]]
        assert actions == ["EjectMedia", "InsertMedia"]  # never "already there, done"
        assert state.resources[slot]["Inserted"] is True


# -- ETags: 412 and 428 -------------------------------------------------------------------


def test_a_slot_without_an_etag_answered_428_is_sent_again_with_if_match_star() -> None:
    slot, _ = CD_TREES["lenovo-sr650"]  # no @odata.etag recorded, and no ETag header here
    with tree("lenovo-sr650", Quirks(require_if_match=True)) as (state, driver):
        driver.insert_virtual_media(URL, deadline=call())
        assert state.resources[slot]["Image"] == URL
        patches = [p for m, p, _ in state.writes() if m == "PATCH"]
        assert len(patches) == 2  # the 428, then the same PATCH with If-Match: *


def test_a_stale_etag_answered_412_is_read_again_and_sent_once_more() -> None:
    slot, _ = CD_TREES["lenovo-sr650"]
    with tree("lenovo-sr650", Quirks(etag_header=True, stale_patches=1)) as (state, driver):
        driver.insert_virtual_media(URL, deadline=call())
        assert state.resources[slot]["Image"] == URL
        assert [m for m, _, _ in state.writes()] == ["PATCH", "PATCH"]
    with tree("lenovo-sr650", Quirks(etag_header=True, stale_patches=2)) as (_, driver):
        fault = fails(lambda: driver.insert_virtual_media(URL, deadline=call()))
    assert isinstance(fault, BMCBusy)


# -- boot overrides as each tree allows them -----------------------------------------------


def boot_patches(state: TreeState) -> list[dict[str, Any]]:
    return [b["Boot"] for m, _, b in state.writes() if m == "PATCH" and "Boot" in (b or {})]


def test_a_persistent_override_where_continuous_is_not_allowed_is_once_before_every_boot() -> None:
    with tree("lenovo-sr650") as (state, driver):  # XCC: Once, Disabled
        driver.set_boot_device(BootDevice.PXE, persistent=True, deadline=call())
        assert boot_patches(state) == [
            {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}
        ]
        assert Quirk.BOOT_NO_CONTINUOUS in driver.quirks  # never a BootFailure
        before = len(state.writes())
        driver.set_power_state(PowerAction.REBOOT, deadline=call())
        writes = state.writes()[before:]
        assert [(m, (b or {}).get("Boot", b)) for m, _, b in writes] == [
            ("PATCH", {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}),
            ("POST", {"ResetType": "ForceRestart"}),
        ]
        # a one-time request ends the re-sending
        driver.set_boot_device(BootDevice.DISK, persistent=False, deadline=call())
        before = len(state.writes())
        driver.set_power_state(PowerAction.REBOOT, deadline=call())
        assert [m for m, _, _ in state.writes()[before:]] == ["POST"]


def test_continuous_is_sent_where_the_tree_allows_it() -> None:
    with tree("hpe-dl325-gen10plus") as (state, driver):
        driver.set_boot_device(BootDevice.DISK, persistent=True, deadline=call())
        assert boot_patches(state) == [
            {"BootSourceOverrideTarget": "Hdd", "BootSourceOverrideEnabled": "Continuous"}
        ]
        assert driver.get_boot_device(deadline=call()) == BootSetting(BootDevice.DISK, True)
        assert not driver.quirks


def test_a_read_back_keeping_the_target_with_disabled_is_a_quirk_not_a_boot_failure() -> None:
    # Supermicro H13's answer to a PXE-once PATCH, on the DMTF reference shape
    with tree("dmtf-public-rackmount1", Quirks(once_reads_disabled=True)) as (state, driver):
        driver.set_boot_device(BootDevice.PXE, persistent=False, deadline=call())
        boot = state.resources[state.system()]["Boot"]
        assert (boot["BootSourceOverrideTarget"], boot["BootSourceOverrideEnabled"]) == (
            "Pxe",
            "Disabled",
        )
        assert Quirk.BOOT_ONCE_READS_DISABLED in driver.quirks


@pytest.mark.parametrize(
    ("name", "boot", "reads"),
    [
        ("hpe-dl325-gen10plus", ("Usb", "Once"), BootSetting(OtherBootDevice("Usb"), False)),
        (
            "dell-r6515",
            ("Utilities", "Continuous"),
            BootSetting(OtherBootDevice("Utilities"), True),
        ),
        ("dmtf-public-rackmount1", None, BootSetting(BootDevice.PXE, False)),  # as recorded
        ("dell-r6515", None, BootSetting(BootDevice.DISK, True)),  # Disabled, as recorded
        ("lenovo-sr650", None, BootSetting(BootDevice.DISK, False)),  # Once Hdd, as recorded
    ],
)
def test_an_override_reads_as_what_it_is(
    name: str, boot: tuple[str, str] | None, reads: BootSetting
) -> None:
    with tree(name) as (state, driver):
        if boot is not None:  # another tool left it
            state.resources[state.system()]["Boot"].update(
                BootSourceOverrideTarget=boot[0], BootSourceOverrideEnabled=boot[1]
            )
        assert driver.get_boot_device(deadline=call()) == reads


def test_a_stale_system_etag_is_read_again_and_the_override_sent_once_more() -> None:
    with tree("hpe-dl325-gen10plus", Quirks(stale_patches=1)) as (state, driver):
        driver.set_boot_device(BootDevice.PXE, persistent=False, deadline=call())
        assert len(boot_patches(state)) == 2
        assert driver.get_boot_device(deadline=call()) == BootSetting(BootDevice.PXE, False)


def test_the_re_sent_override_answered_428_is_sent_with_the_etag_header() -> None:
    # the re-send before a boot uses the system as last read; this BMC keeps
    # its ETag in a header only and insists on If-Match
    quirks = Quirks(etag_header=True, require_if_match=True)
    with tree("lenovo-sr650", quirks) as (state, driver):
        driver.set_boot_device(BootDevice.PXE, persistent=True, deadline=call())
        driver.set_power_state(PowerAction.REBOOT, deadline=call())
        boot = state.resources[state.system()]["Boot"]
        assert boot["BootSourceOverrideTarget"] == "Pxe"
        assert [m for m, _, _ in state.writes()][-1] == "POST"


def test_a_weak_etag_refused_although_unchanged_is_sent_strong() -> None:
    with tree("hpe-dl325-gen10plus", Quirks(strong_etags=True)) as (state, driver):
        driver.set_boot_device(BootDevice.PXE, persistent=False, deadline=call())
        sent = [h for m, _, h in state.if_matches if m == "PATCH"]
    assert sent == ['W/"1C210906"', '"1C210906"']


# -- soft power by what the tree offers ------------------------------------------------------


def resets(state: TreeState) -> list[str]:
    return [b["ResetType"] for m, p, b in state.writes() if p.endswith("ComputerSystem.Reset")]


def offer(state: TreeState, values: list[str]) -> dict[str, Any]:
    action: dict[str, Any] = state.resources[state.system()]["Actions"]["#ComputerSystem.Reset"]
    action["ResetType@Redfish.AllowableValues"] = values
    return action


def test_soft_off_presses_the_button_where_there_is_no_graceful_shutdown() -> None:
    with tree("hpe-dl325-gen10plus") as (state, driver):
        # iLO 5 as the issue met it: the button, no GracefulShutdown
        offer(state, ["On", "ForceOff", "ForceRestart", "Nmi", "PushPowerButton"])
        driver.set_power_state(PowerAction.SOFT_OFF, deadline=call())
        assert resets(state) == ["PushPowerButton"]
        assert state.resources[state.system()]["PowerState"] == "Off"
        driver.set_power_state(PowerAction.SOFT_OFF, deadline=call())  # already off
        assert resets(state) == ["PushPowerButton"]  # never pressed on a node that is off


def test_a_fused_reset_value_reads_as_the_values_it_joins() -> None:
    with tree("dmtf-public-rackmount1") as (state, driver):
        offer(state, ["On", "ForceOff", "ForceRestart", "GracefulShutdownGracefulRestart"])
        driver.set_power_state(PowerAction.SOFT_REBOOT, deadline=call())
        driver.set_power_state(PowerAction.SOFT_OFF, deadline=call())
        assert resets(state) == ["GracefulRestart", "GracefulShutdown"]


def test_reset_types_listed_only_in_the_action_info_are_read_once() -> None:
    with tree("dmtf-public-rackmount1") as (state, driver):
        system = state.system()
        info = f"{system}/ResetActionInfo"
        action = offer(state, [])
        del action["ResetType@Redfish.AllowableValues"]
        action["@Redfish.ActionInfo"] = info
        state.resources[info] = {
            "@odata.id": info,
            "Parameters": [
                {"Name": "ResetType", "AllowableValues": ["On", "ForceOff", "PowerCycle"]}
            ],
        }
        state.generation[info] = 1
        state.recorded[info] = dict(state.resources[info])
        driver.set_power_state(PowerAction.REBOOT, deadline=call())
        driver.set_power_state(PowerAction.REBOOT, deadline=call())
        assert resets(state) == ["PowerCycle", "PowerCycle"]
        assert [p for m, p, _ in state.calls("GET")].count(info) == 1


def test_soft_reboot_without_graceful_restart_says_what_the_system_offers() -> None:
    with tree("dell-r6515") as (state, driver):
        offer(state, ["On", "ForceOff", "ForceRestart", "GracefulShutdown", "PushPowerButton"])
        fault = fails(lambda: driver.set_power_state(PowerAction.SOFT_REBOOT, deadline=call()))
        assert not state.writes()
    assert isinstance(fault, UnsupportedOperation)
    assert "GracefulRestart" in str(fault)
    assert "GracefulShutdown" in str(fault)


# -- boot mode (a node's boot_mode, Ironic's names) ----------------------------------------------


def test_the_boot_mode_is_read_and_sent_with_every_override() -> None:
    with tree("lenovo-sr650", boot_mode="uefi") as (state, driver):
        assert driver.get_boot_mode(deadline=call()) == "bios"  # Legacy, as recorded
        driver.set_boot_device(BootDevice.PXE, persistent=False, deadline=call())
        assert boot_patches(state) == [
            {
                "BootSourceOverrideTarget": "Pxe",
                "BootSourceOverrideEnabled": "Once",
                "BootSourceOverrideMode": "UEFI",
            }
        ]
        assert driver.get_boot_mode(deadline=call()) == "uefi"


def test_a_boot_mode_the_system_does_not_allow_is_unsupported_before_sending() -> None:
    with tree("hpe-dl325-gen10plus", boot_mode="bios") as (state, driver):
        boot = state.resources[state.system()]["Boot"]
        boot["BootSourceOverrideMode@Redfish.AllowableValues"] = ["UEFI"]
        fault = fails(lambda: driver.set_boot_device(BootDevice.PXE, deadline=call()))
        assert not state.writes()
    assert isinstance(fault, UnsupportedOperation)
    assert "Legacy" in str(fault)


def test_no_boot_mode_asked_sends_none() -> None:
    with tree("dmtf-public-rackmount1") as (state, driver):
        driver.set_boot_device(BootDevice.DISK, persistent=True, deadline=call())
        assert "BootSourceOverrideMode" not in boot_patches(state)[0]
