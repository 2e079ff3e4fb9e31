"""BIOS settings, firmware inventory and the machine's parts through the
Redfish driver, against the DMTF reference server's recorded tree (issue 51);
then each vendor tree's UpdateService, TaskService (or Dell's job queue) and
Bios as recorded: what each shape yields, and what bmaas says where a
recording links a resource it does not hold.

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
from bmaas.faults import BMCInternalError, InputError, SettingsNotApplied, UnsupportedOperation
from bmaas.hardware import FirmwareComponent, TaskStatus
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
    quirks: Quirks | None = None, *, registry: bool = True, name: str = TREE
) -> Iterator[tuple[TreeState, RedfishDriver]]:
    """The tree ``name`` served, and a driver for it; ``registry`` adds the
    DMTF tree's registry (the vendor trees' tests pass False)."""
    state = TreeState(name, quirks)
    if registry:
        add_registry(state)
    with serving(state) as url:
        driver: Any = build_driver(
            "node-dmtf" if name == TREE else f"node-{name}",
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


# -- each vendor tree's UpdateService, TaskService and Bios, as recorded -------------------

IMAGE = "http://images.example/firmware.bin"
#: the recordings that link a FirmwareInventory without holding it
NO_INVENTORY = ("lenovo-sr650", "dell-r660", "dell-r6515")


def vendor(name: str, quirks: Quirks | None = None) -> Any:
    return tree(quirks, registry=False, name=name)


def not_the_nodes(fault: BaseException) -> None:
    row = policy_for(fault)
    assert not row.counts_for_health, fault
    assert not row.fences, fault


def test_ilo_firmware_inventory_lists_its_twelve_recorded_components() -> None:
    with vendor("hpe-dl325-gen10plus") as (_, driver):
        components = driver.get_firmware_inventory(deadline=call())
    assert len(components) == 12
    # iLO 5 says no Updateable: unknown, not False
    assert components[0] == FirmwareComponent("1", "iLO 5", "2.46 May 11 2021", None)
    assert components[1].name == "System ROM"
    assert components[1].version == "A43 v2.52 (10/29/2021)"


#: the System's BiosVersion in each tree without its inventory (r660's system has none)
SYSTEM_BIOS = {"lenovo-sr650": "TEE142M-2.41", "dell-r660": None, "dell-r6515": "2.6.6"}


@pytest.mark.parametrize("name", NO_INVENTORY)
def test_a_recorded_inventory_link_without_its_collection_reads_the_systems_bios(
    name: str,
) -> None:
    # bmclib recorded these UpdateServices, not the collections they link: a
    # service that serves no inventory (stock sushy-tools) has its BIOS read
    # from the System, as Ironic's redfish firmware interface reads it
    with vendor(name) as (state, driver):
        components = driver.get_firmware_inventory(deadline=call())
        gets = [p for _, p, _ in state.calls("GET")]
    assert components == [FirmwareComponent("BIOS", "BIOS", SYSTEM_BIOS[name], updateable=True)]
    assert "/redfish/v1/UpdateService/FirmwareInventory" in gets  # asked first


def test_ilo_bios_reads_with_its_recorded_registry_from_the_lower_case_store() -> None:
    with vendor("hpe-dl325-gen10plus") as (state, driver):
        bios = driver.get_bios(deadline=call())
        gets = [p for _, p, _ in state.calls("GET")]
    assert len(bios.current) == 236
    assert bios.current["WorkloadProfile"] == "GeneralPowerEfficientCompute"
    assert bios.pending == {}  # the settings object as recorded: the same values
    assert bios.apply_times == ()  # iLO 5 lists none: OnReset only
    assert bios.registry is not None
    assert len(bios.registry) == 339
    assert bios.registry["PowerRegulator"].allowed == ("StaticHighPerf", "OsControl")
    assert bios.registry["AdminPhone"].max_length == 28
    # the registry file's first Location (en), linked in lower case
    store = "/redfish/v1/RegistryStore/registries/en/biosattributeregistrya43.v1_2_52"
    assert store in gets


def test_ilo_bios_change_is_checked_against_its_registry_then_staged() -> None:
    settings = "/redfish/v1/Systems/1/bios/settings"
    with vendor("hpe-dl325-gen10plus") as (state, driver):
        with pytest.raises(InputError) as info:
            driver.set_bios({"PowerRegulator": "Dynamic", "AdminPhone": "x" * 29}, deadline=call())
        assert len(info.value.problems) == 2  # type: ignore[attr-defined]
        assert state.writes() == []
        pending = driver.set_bios({"PowerRegulator": "StaticHighPerf"}, deadline=call())
    assert pending == {"PowerRegulator": "StaticHighPerf"}
    patches = [(p, b) for m, p, b in state.writes() if m == "PATCH"]
    assert patches == [(settings, {"Attributes": {"PowerRegulator": "StaticHighPerf"}})]


def test_xcc_bios_reads_its_pending_object_where_no_registry_is_served() -> None:
    with vendor("lenovo-sr650") as (_, driver):
        # as recorded, the root links Registries and bmclib holds no such file
        with pytest.raises(UnsupportedOperation, match="/redfish/v1/Registries") as info:
            driver.get_bios(deadline=call())
        not_the_nodes(info.value)
    with vendor("lenovo-sr650") as (state, driver):
        del state.resources["/redfish/v1"]["Registries"]  # a service without registries
        bios = driver.get_bios(deadline=call())
    assert bios.current == {
        "BootModes_SystemBootMode": "LegacyMode",
        "Processors_HyperThreading": "Enabled",
        "Memory_MemorySpeed": "MaximumPerformance",
        "OperatingModes_ChooseOperatingMode": "Efficiency_FavorPerformance",
        "SecureBootConfiguration_SecureBootSetting": "Disabled",
    }
    assert bios.pending == {}  # Bios/Pending recorded empty
    assert bios.apply_times == ("OnReset",)
    assert bios.registry is None


@pytest.mark.parametrize(
    ("name", "says"),
    [
        # the R6515's Bios links Bios/Settings, which bmclib did not record
        ("dell-r6515", "/redfish/v1/Systems/System.Embedded.1/Bios/Settings"),
        ("dell-r660", "the system links no Bios"),  # bmclib's trimmed system
    ],
)
def test_idrac_bios_where_the_recording_stops_is_unsupported(name: str, says: str) -> None:
    with vendor(name) as (_, driver), pytest.raises(UnsupportedOperation) as info:
        driver.get_bios(deadline=call())
    assert says in str(info.value)
    not_the_nodes(info.value)


@pytest.mark.parametrize(
    ("name", "body"),
    [
        # TransferProtocol listed only in SimpleUpdateActionInfo: the URI says it
        ("dmtf-public-rackmount1", {"ImageURI": IMAGE}),
        ("hpe-dl325-gen10plus", {"ImageURI": IMAGE, "TransferProtocol": "HTTP"}),
        ("lenovo-sr650", {"ImageURI": IMAGE}),  # no allowable protocols recorded
        ("dell-r660", {"ImageURI": IMAGE, "TransferProtocol": "HTTP"}),
        ("dell-r6515", {"ImageURI": IMAGE, "TransferProtocol": "HTTP"}),
    ],
)
def test_every_recorded_update_service_takes_simple_update(name: str, body: dict[str, Any]) -> None:
    with vendor(name) as (state, driver):
        task = driver.start_firmware_update(IMAGE, deadline=call())
    assert state.writes() == [
        ("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", body)
    ]
    assert task.kind == "none"  # answered 204: only the version read afterwards tells


def test_ilo_update_targets_are_sent_as_its_inventory_paths() -> None:
    with vendor("hpe-dl325-gen10plus") as (state, driver):
        driver.start_firmware_update(IMAGE, targets=("1",), deadline=call())
        with pytest.raises(InputError, match="'13'"):
            driver.start_firmware_update(IMAGE, targets=("13",), deadline=call())
    ((_, _, body),) = state.writes()
    assert body["Targets"] == ["/redfish/v1/UpdateService/FirmwareInventory/1"]


@pytest.mark.parametrize(
    ("name", "push"),
    [
        ("lenovo-sr650", "/mfwupdate"),
        ("dell-r660", "/redfish/v1/UpdateService/MultipartUpload"),
    ],
)
def test_without_simple_update_the_recorded_multipart_push_uri_takes_the_file(
    name: str, push: str, tmp_path: Any
) -> None:
    image = tmp_path / "fw.bin"
    image.write_bytes(b"firmware-bytes")
    with vendor(name) as (state, driver):
        # OpenBMC's way: SimpleUpdate disabled, the push URI as recorded
        del state.resources["/redfish/v1/UpdateService"]["Actions"]["#UpdateService.SimpleUpdate"]
        with pytest.raises(InputError, match="local file"):
            driver.start_firmware_update(IMAGE, deadline=call())
        driver.start_firmware_update(str(image), deadline=call())
    ((method, path, sent),) = state.writes()
    assert (method, path) == ("POST", push)
    assert b'name="UpdateParameters"' in sent
    assert b"firmware-bytes" in sent


DELL_JOBS = "/redfish/v1/Managers/iDRAC.Embedded.1/Oem/Dell/Jobs"


@pytest.mark.parametrize(
    ("name", "answer", "kind", "status"),
    [
        (
            "dmtf-public-rackmount1",
            "/redfish/v1/TaskService/Tasks/545",
            "task",
            TaskStatus(
                "Completed",
                None,
                (
                    "Base.1.0.PropertyNotWritable: The property SKU is a read only "
                    "property and cannot be assigned a value",
                ),
            ),
        ),
        (
            "lenovo-sr650",
            "/redfish/v1/TaskService/Tasks/1",
            "task",
            TaskStatus(
                "Completed",
                100,
                ("Update.1.0.UpdateSuccessful: Device firmware updated successfully.",),
            ),
        ),
        (
            "dell-r660",
            f"{DELL_JOBS}/JID_467762674724",
            "job",
            TaskStatus("Pending", 0, ("JCP001: Task successfully scheduled.",)),
        ),
        (
            "dell-r6515",
            f"{DELL_JOBS}/JID_467767920358",
            "job",
            TaskStatus("Completed", 100, ("RED001: Job completed successfully.",)),
        ),
    ],
)
def test_each_vendor_s_recorded_task_or_job_is_followed(
    name: str, answer: str, kind: str, status: TaskStatus
) -> None:
    with vendor(name, Quirks(update_answer=answer)) as (state, driver):
        if kind == "job":  # iDRAC's job queue, its members recorded expanded
            for job in state.resources[DELL_JOBS]["Members"]:
                state.add(job["@odata.id"], job)
        task = driver.start_firmware_update(IMAGE, deadline=call())
        assert (task.kind, task.path) == (kind, answer)
        assert driver.get_update_task(task, deadline=call()) == status


def test_a_recorded_cancelled_task_ends_typed() -> None:
    answer = "/redfish/v1/TaskService/Tasks/687"
    with vendor("dmtf-public-rackmount1", Quirks(update_answer=answer)) as (_, driver):
        task = driver.start_firmware_update(IMAGE, deadline=call())
        with pytest.raises(
            BMCInternalError, match=r"ended Cancelled: TaskEvent\.1\.0\.4\.TaskCancelled"
        ):
            driver.get_update_task(task, deadline=call())
