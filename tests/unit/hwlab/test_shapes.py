"""hwlab's vendor shapes (issue 34): names and where they are chosen (``hwlab
up --shape``, a lab file's ``shape:``, a vendor profile), the live state a
shape shows (a one-time boot consumed by the firmware, the Supermicro
read-back, a foreign override, slots), and the operations of vendor paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas.driver import BootDevice, BootSetting, Operation, PowerAction
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.faults import InputError
from bmaas.hwlab import profiles
from bmaas.hwlab.cli import cli as hwlab_cli
from bmaas.hwlab.daemon import LabOptions, build_spec
from bmaas.hwlab.labspec import LabFileError, NodeSpec, load_labfile, shape_of
from bmaas.hwlab.operations import redfish_operation
from bmaas.hwlab.redfish.shapes import DEFAULT, SHAPES, names, resolve, validate
from bmaas.hwlab.redfish.shapes.state import Override, ShapeState

#: what the issue asks the lab to have, at least
WANTED = {"hwlab", "dmtf", "idrac9", "idrac10", "ilo5", "xcc", "supermicro", "openbmc"}


def test_every_shape_the_issue_names_is_there_and_the_default_first() -> None:
    assert set(names()) >= WANTED
    assert names()[0] == DEFAULT
    assert resolve(DEFAULT) is None
    assert resolve("xcc") is SHAPES["xcc"]
    # shapes without a slot: services like the recorded R6515, and stock bmcweb
    assert [n for n, s in SHAPES.items() if not s.has_cd] == ["dell-r6515", "openbmc"]


def test_an_unknown_shape_is_one_input_error_naming_the_choices() -> None:
    with pytest.raises(InputError) as refused:
        validate("idrac7", field="--shape")
    assert "idrac7" in str(refused.value)
    assert "idrac9" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_each_shape_names_its_source_and_licence() -> None:
    import importlib

    for shape in SHAPES.values():
        assert shape.source
        module = next(
            m
            for m in ("dmtf", "dell", "hpe", "lenovo", "supermicro", "openbmc", "gaps")
            if shape in importlib.import_module(f"bmaas.hwlab.redfish.shapes.{m}").SHAPES
        )
        doc = importlib.import_module(f"bmaas.hwlab.redfish.shapes.{module}").__doc__ or ""
        assert "Licen" in doc or "licen" in doc, module


def test_hwlab_up_with_an_unknown_shape_is_one_line_and_exit_2(tmp_path: Path) -> None:
    args = ["up", "--shape", "nope", "--state-dir", str(tmp_path / "state")]
    result = CliRunner().invoke(hwlab_cli, args, catch_exceptions=False)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "nope" in lines[0]
    assert "Traceback" not in result.output


def test_the_shape_option_reaches_every_node_a_lab_file_leaves_unshaped(tmp_path: Path) -> None:
    lab = tmp_path / "lab.yaml"
    lab.write_text(
        "nodes:\n"
        "  - {name: a, protocols: [redfish], shape: xcc}\n"
        "  - {name: b, protocols: [redfish]}\n"
    )
    spec = build_spec(LabOptions(labfile=str(lab), shape="ilo5"))
    assert [n.shape for n in spec.nodes] == ["xcc", "ilo5"]
    with pytest.raises(InputError, match="one system per Redfish service"):
        build_spec(LabOptions(nodes=4, protocols="redfish", shape="dmtf", redfish_service_size=2))
    with pytest.raises(InputError, match="unknown shape"):
        build_spec(LabOptions(nodes=2, shape="nope"))


def test_a_lab_file_shape_is_checked_with_file_line_and_field(tmp_path: Path) -> None:
    lab = tmp_path / "lab.yaml"
    lab.write_text("nodes:\n  - {name: a, shape: idrac7}\n  - {name: b, shape: 3}\n")
    with pytest.raises(LabFileError) as refused:
        load_labfile(str(lab))
    problems = [str(p) for p in refused.value.problems]
    assert len(problems) == 2, problems
    assert "nodes[0].shape" in problems[0]
    assert "idrac7" in problems[0]
    assert "nodes[1].shape" in problems[1]


def test_a_vendor_profile_gives_its_nodes_its_vendors_shape() -> None:
    shaped = {p.name: p.shape for p in profiles.VENDOR_PROFILES}
    assert shaped == {
        "idrac9": "idrac9",
        "idrac10": "idrac10",
        "ilo5": "ilo5",
        "supermicro": "supermicro",
        "openbmc": "openbmc",
    }
    assert all(s in names() for s in shaped.values())
    assert shape_of(NodeSpec("n", profile="ilo5")) == "ilo5"
    assert shape_of(NodeSpec("n"), "flaky,idrac10") == "idrac10"
    assert shape_of(NodeSpec("n", shape="xcc", profile="ilo5")) == "xcc"  # its own wins
    assert shape_of(NodeSpec("n"), "flaky") is None


def _state(name: str) -> tuple[ShapeState, FakeMachine, FakeClock]:
    clock = FakeClock()
    machine = FakeMachine("m", Hardware(power_on_time=1.0), clock=clock)
    return ShapeState(SHAPES[name], machine), machine, clock


def test_the_firmware_consumes_a_one_time_boot() -> None:
    state, machine, clock = _state("idrac9")
    assert state.override() == Override("Disabled", "None")
    state.set_override(Override("Once", "Pxe"), [])
    assert machine.boot_device() == BootSetting(BootDevice.PXE, persistent=False)
    assert state.override() == Override("Once", "Pxe")
    machine.set_power(PowerAction.ON)
    clock.advance(1.0)
    assert machine.last_boot_device is BootDevice.PXE
    # booted from it: Disabled, the target kept (iDRAC shows it so)
    assert state.override() == Override("Disabled", "Pxe")
    assert machine.boot_device() == BootSetting(BootDevice.DISK, persistent=True)


def test_supermicro_reads_a_one_time_override_back_disabled_with_its_target() -> None:
    state, machine, _clock = _state("supermicro")
    state.set_override(Override("Once", "UsbCd"), [])
    assert machine.boot_device() == BootSetting(BootDevice.CDROM, persistent=False)
    assert state.override() == Override("Disabled", "UsbCd")
    assert state.cd_target() == "UsbCd"


def test_a_foreign_override_reads_as_set_and_a_change_behind_the_shape_shows() -> None:
    state, machine, _clock = _state("ilo5")
    state.set_override(Override("Continuous", "Utilities"), [])
    assert state.override() == Override("Continuous", "Utilities")
    machine.set_boot_device(BootDevice.PXE, persistent=True)  # IPMI, behind Redfish's back
    assert state.override() == Override("Continuous", "Pxe")


def test_an_idrac10_insert_reads_empty_twice_then_shows() -> None:
    state, machine, _clock = _state("idrac10")
    state.insert("2", "https://x/y.iso", cd=True)
    assert machine.media == "https://x/y.iso"
    shown = [state.image_shown("2", cd=True) for _ in range(3)]
    assert shown == [None, None, "https://x/y.iso"]
    state.eject("2", cd=True)
    assert machine.media is None


@pytest.mark.parametrize(
    ("method", "path", "operation"),
    [
        ("GET", "/redfish/v1/Systems/System.Embedded.1", Operation.POWER_GET),
        ("PATCH", "/redfish/v1/Systems/437XR1138R2", Operation.BOOT_SET),
        ("POST", "/redfish/v1/Systems/system/Actions/ComputerSystem.Reset", Operation.POWER_SET),
        (
            "POST",
            "/redfish/v1/Systems/System.Embedded.1/VirtualMedia/2/Actions/VirtualMedia.InsertMedia",
            Operation.VMEDIA_INSERT,
        ),
        ("PATCH", "/redfish/v1/Managers/1/VirtualMedia/CD", Operation.VMEDIA_INSERT),
        (
            "POST",
            "/redfish/v1/Managers/1/VirtualMedia/2/Actions/Oem/Hpe/HpeiLOVirtualMedia.InsertVirtualMedia",
            Operation.VMEDIA_INSERT,
        ),
        (
            "POST",
            "/redfish/v1/Managers/1/VirtualMedia/2/Actions/Oem/Hpe/HpeiLOVirtualMedia.EjectVirtualMedia",
            Operation.VMEDIA_EJECT,
        ),
    ],
)
def test_vendor_paths_name_their_operation(method: str, path: str, operation: Operation) -> None:
    assert redfish_operation(method, path) is operation
