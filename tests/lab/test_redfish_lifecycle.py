"""BIOS settings, firmware inventory and the machine's parts through the
Redfish driver, against the DMTF reference server's recorded tree (issue 51).

The tree (``tests/fixtures/redfish-trees/dmtf-public-rackmount1``) holds the
BIOS with its settings object, the update service's firmware inventory and
the system's processors, memory, NICs and storage, as recorded. It names an
attribute registry it does not hold; the tests that need one add it, shaped
after DSP2046's ``AttributeRegistry`` example (marked as added, not
recorded). The server applies the settings object when the system resets,
all of it, part of it or none (:attr:`Quirks.bios_applies`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import Capability, PowerAction
from bmaas.drivers.redfish import RedfishDriver
from bmaas.drivers.redfish.service import ServiceRegistry
from bmaas.faults import InputError, SettingsNotApplied, UnsupportedOperation
from bmaas.hardware import FirmwareComponent
from bmaas.policy import policy_for
from bmaas.registry import build_driver
from tests.lab.redfish_trees import Quirks, TreeState, serving

pytestmark = pytest.mark.lab

TREE = "dmtf-public-rackmount1"
SYSTEM = "/redfish/v1/Systems/437XR1138R2"
SETTINGS = f"{SYSTEM}/Bios/Settings"
CALL = 5.0
#: the registry the recorded Bios names (BiosAttributeRegistryP89.v1_0_0),
#: not in the recording: added here, shaped after DSP2046's example
REGISTRY_FILE = "/redfish/v1/Registries/BiosAttributeRegistryP89.v1_0_0"
REGISTRY = "/redfish/v1/registrystore/BiosAttributeRegistryP89.v1_0_0"


def call() -> Deadline:
    return Deadline.after(CALL)


def enumeration(name: str, *values: str) -> dict[str, Any]:
    return {
        "AttributeName": name,
        "Type": "Enumeration",
        "ReadOnly": False,
        "Value": [{"ValueName": v, "ValueDisplayName": v} for v in values],
    }


def add_registry(state: TreeState) -> None:
    attributes = [
        enumeration("ProcTurboMode", "Enabled", "Disabled"),
        enumeration("ProcHyperthreading", "Enabled", "Disabled"),
        enumeration("EmbeddedSata", "Ahci", "Raid"),
        enumeration("NicBoot1", "NetworkBoot", "Disabled"),
        enumeration("NicBoot2", "NetworkBoot", "Disabled"),
        enumeration("BootMode", "Uefi", "LegacyBios"),
        enumeration("PowerProfile", "MaxPerf", "Balanced"),
        enumeration("UsbControl", "UsbEnabled", "UsbDisabled"),
        {"AttributeName": "ProcCoreDisable", "Type": "Integer", "LowerBound": 0, "UpperBound": 7},
        {"AttributeName": "AdminPhone", "Type": "String", "MaxLength": 20},
        {"AttributeName": "SystemModelName", "Type": "String", "ReadOnly": True},
    ]
    state.add(
        REGISTRY_FILE,
        {
            "@odata.type": "#MessageRegistryFile.v1_1_0.MessageRegistryFile",
            "Id": "BiosAttributeRegistryP89.v1_0_0",
            "Registry": "BiosAttributeRegistryP89.v1_0_0",
            "Location": [{"Language": "en", "Uri": REGISTRY}],
        },
    )
    state.add(
        REGISTRY,
        {
            "@odata.type": "#AttributeRegistry.v1_4_0.AttributeRegistry",
            "Id": "BiosAttributeRegistryP89.v1_0_0",
            "RegistryEntries": {"Attributes": attributes},
        },
    )
    state.resources["/redfish/v1/Registries"]["Members"].append({"@odata.id": REGISTRY_FILE})


@contextlib.contextmanager
def tree(
    quirks: Quirks | None = None, *, registry: bool = True
) -> Iterator[tuple[TreeState, RedfishDriver]]:
    state = TreeState(TREE, quirks)
    if registry:
        add_registry(state)
    with serving(state) as url:
        driver: Any = build_driver(
            "node-dmtf",
            "redfish",
            {
                "redfish_address": url,
                "redfish_username": "admin",
                "redfish_password": "recorded-tree-secret",
                "redfish_auth_type": "basic",
            },
            bmc_timeout=CALL,
        )
        driver.services = ServiceRegistry()
        try:
            yield state, driver
        finally:
            driver.close()


def test_bios_reads_current_pending_and_the_registry() -> None:
    with tree() as (_, driver):
        assert driver.supports(Capability.BIOS)
        bios = driver.get_bios(deadline=call())
    assert bios.current["ProcTurboMode"] == "Enabled"
    # the recorded settings object: the values that differ from current
    assert bios.pending == {
        "AdminPhone": "(404) 555-1212",
        "EmbeddedSata": "Ahci",
        "NicBoot2": "NetworkBoot",
        "ProcTurboMode": "Disabled",
    }
    assert bios.registry is not None
    assert bios.registry["ProcCoreDisable"].upper == 7
    assert bios.registry["ProcTurboMode"].allowed == ("Enabled", "Disabled")


def test_without_a_published_registry_the_bios_reads_and_changes_go_unchecked() -> None:
    with tree(registry=False) as (state, driver):
        assert driver.get_bios(deadline=call()).registry is None
        driver.set_bios({"ProcHyperthreading": "Disabled"}, deadline=call())
    assert state.calls("PATCH")[-1][1] == SETTINGS


def test_set_patches_the_settings_object_and_returns_what_is_pending() -> None:
    with tree() as (state, driver):
        pending = driver.set_bios({"ProcHyperthreading": "Disabled"}, deadline=call())
        assert pending["ProcHyperthreading"] == "Disabled"
        assert driver.get_bios(deadline=call()).current["ProcHyperthreading"] == "Enabled"
    patches = state.calls("PATCH")
    assert patches == [("PATCH", SETTINGS, {"Attributes": {"ProcHyperthreading": "Disabled"}})]


def test_every_problem_of_a_change_at_once_and_nothing_sent() -> None:
    changes = {
        "NoSuchThing": "x",
        "SystemModelName": "mine",
        "ProcCoreDisable": 99,
        "ProcTurboMode": "Sometimes",
    }
    with tree() as (state, driver), pytest.raises(InputError) as info:
        driver.set_bios(changes, deadline=call())
    lines = [str(p) for p in info.value.problems]  # type: ignore[attr-defined]
    assert len(lines) == 4, lines
    assert lines[0] == "node 'node-dmtf': bios.NoSuchThing: no such attribute in the BMC's registry"
    assert state.writes() == []


def test_an_apply_time_the_bios_does_not_offer_is_unsupported_before_sending() -> None:
    with tree() as (state, driver), pytest.raises(UnsupportedOperation, match="OnReset only"):
        driver.set_bios({"ProcTurboMode": "Disabled"}, deadline=call(), apply_time="Immediate")
    assert state.writes() == []


@pytest.mark.parametrize(
    ("applies", "missed"),
    [
        ("all", set()),
        ("partly", {"ProcHyperthreading"}),
        ("never", {"ProcHyperthreading", "PowerProfile"}),
    ],
)
def test_the_reset_applies_the_settings_and_verify_names_what_did_not(
    applies: str, missed: set[str]
) -> None:
    wanted = {"ProcHyperthreading": "Disabled", "PowerProfile": "Balanced"}
    quirks = Quirks(bios_applies=applies, bios_sticky=frozenset({"ProcHyperthreading"}))
    with tree(quirks) as (_, driver):
        driver.set_bios(wanted, deadline=call())
        driver.set_power_state(PowerAction.REBOOT, wait=True, deadline=call())
        if not missed:
            settings = driver.verify_bios(wanted, deadline=call())
            assert settings.current["PowerProfile"] == "Balanced"
            return
        with pytest.raises(SettingsNotApplied) as info:
            driver.verify_bios(wanted, deadline=call())
    assert set(info.value.attributes) == missed
    assert all(a["pending"] for a in info.value.attributes.values())
    row = policy_for(info.value)
    assert not row.retried_here  # never success, never the same again
    assert not row.counts_for_health


def test_firmware_inventory_lists_the_recorded_components() -> None:
    with tree() as (_, driver):
        components = driver.get_firmware_inventory(deadline=call())
    assert components[0] == FirmwareComponent(
        "BMC", "Contoso BMC Firmware", "1.45.455b66-rev4", True
    )
    assert [c.id for c in components] == ["BMC", "SS", "BIOS"]


def test_firmware_inventory_where_the_service_has_none_is_unsupported() -> None:
    with tree() as (state, driver):
        del state.resources["/redfish/v1"]["UpdateService"]
        with pytest.raises(UnsupportedOperation, match="no UpdateService"):
            driver.get_firmware_inventory(deadline=call())


def test_detailed_inventory_lists_cpus_dimms_nics_disks_and_firmware() -> None:
    with tree() as (state, driver):
        summary = driver.get_inventory(deadline=call())
        reads = len(state.calls("GET"))
        detailed = driver.get_inventory(deadline=call(), detail=True)
    assert summary.nics is None
    assert reads < len(state.calls("GET"))
    assert detailed.cpus == 2
    # CPU2's socket is recorded Absent; FPGA1 is not a CPU
    assert [p.id for p in detailed.processors or ()] == ["CPU1"]
    assert detailed.dimms is not None
    assert len(detailed.dimms) == 3  # DIMM4's slot is recorded Absent: 3 x 32 GiB = 96 GiB
    assert detailed.dimms[0].size_mb == 32768
    macs = {nic.id: nic.mac for nic in detailed.nics or ()}
    assert macs["12446A3B0411"] == "12:44:6A:3B:04:11"
    assert "VLAN1" not in macs  # a virtual interface is not a NIC
    assert [d.size_bytes for d in detailed.disks or ()][:2] == [8000000000000, 4000000000000]
    assert detailed.firmware is not None
    assert {c.id for c in detailed.firmware} == {"BMC", "SS", "BIOS"}
    assert detailed.extra["bios_version"] == "P79 v1.45 (12/06/2017)"
