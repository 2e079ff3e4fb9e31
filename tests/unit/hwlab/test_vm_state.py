"""``hwlab vm``'s state file is an input (issue 44, finding 2): ``vm.json``
that is not JSON, an array, short of a key or with one too many, too big or
listing too many domains is refused by ``hwlab vm down``, ``cd`` and ``up``
with one ``error:`` line per problem naming the file and the field, exit 2,
no traceback; and ``--count`` is ASCII digits within 1..MAX_VMS."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bmaas.hwlab.cli import cli as hwlab_cli
from bmaas.hwlab.procmark import ProcessMark
from bmaas.hwlab.statejson import StateFileProblems
from bmaas.hwlab.vm import lab as vm_lab
from bmaas.hwlab.vm.state import MAX_VM_JSON, MAX_VMS, VmLab

UUID = "3f1c2b7a-0d4e-4c1a-9b2f-5e6d7c8b9a01"


def good(state: Path, **changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "state_dir": str(state),
        "domains": ["bmaas-vm-1", "bmaas-vm-2"],
        "proxies": False,
        "pids": {"sushy-emulator": {"pid": 4242, "start": 913377, "exe": "/usr/bin/python3"}},
        "iso": "/cache/bmaas-cdrom.iso",
        "vmedia_iso": "/cache/bmaas-vmedia.iso",
        "uuids": {"bmaas-vm-1": UUID},
    }
    doc.update(changes)
    return doc


@pytest.fixture
def state(tmp_path: Path) -> Path:
    path = tmp_path / "vm"
    path.mkdir(mode=0o700)
    return path


def write(state: Path, text: str) -> Path:
    path = state / "vm.json"
    path.write_text(text)
    path.chmod(0o600)
    return path


def errors(state: Path, *args: str) -> list[str]:
    """``hwlab vm ARGS --state-dir STATE``'s error lines (exit 2, no traceback)."""
    result = CliRunner().invoke(hwlab_cli, ["vm", *args, "--state-dir", str(state)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert lines
    assert all(line.startswith("error: ") for line in lines), lines
    return lines


BAD = {
    "not JSON": ("not json", ["vm.json: is not JSON (line 1, column 1"]),
    "an array": ("[]", ["vm.json: must be a JSON object, not an array"]),
    "null": ("null", ["vm.json: must be a JSON object, not null"]),
    "NaN": ('{"proxies": NaN}', ["vm.json: is not JSON hwlab wrote (NaN is not a JSON number)"]),
    "deep": ("[" * 30_000 + "]" * 30_000, ["is not JSON hwlab wrote (nested too deeply)"]),
    "big": (" " * MAX_VM_JSON + "{}", [f"is larger than {MAX_VM_JSON} bytes"]),
}


@pytest.mark.parametrize("command", [["down"], ["cd"], ["up", "--count", "1"]])
@pytest.mark.parametrize("case", list(BAD))
def test_a_vm_json_that_is_not_an_object_is_one_line_exit_2(
    state: Path, command: list[str], case: str
) -> None:
    text, wanted = BAD[case]
    write(state, text)
    lines = errors(state, *command)
    assert len(lines) == len(wanted)
    for line, part in zip(lines, wanted, strict=True):
        assert str(state / "vm.json") in line
        assert part in line


@pytest.mark.parametrize("command", [["down"], ["cd"], ["up", "--count", "1"]])
def test_a_key_too_many_and_one_missing_are_each_named(state: Path, command: list[str]) -> None:
    doc = good(state, extra=1)
    del doc["uuids"]
    write(state, json.dumps(doc))
    assert errors(state, *command) == [
        f"error: {state / 'vm.json'}: extra: unknown key (allowed: state_dir, domains, "
        "proxies, pids, iso, vmedia_iso, uuids)",
        f"error: {state / 'vm.json'}: uuids: is missing",
    ]


def test_every_problem_of_a_file_is_named_at_once(state: Path) -> None:
    doc = good(
        state,
        domains=["bmaas-vm-1", "bmaas-vm-1", "../etc"],
        proxies=1,
        pids={"sushy-emulator": {"pid": 1, "start": -1, "exe": "python"}, "sh": {}},
        iso="/a\u0000b",
        uuids={"bmaas-vm-1": "not-a-uuid", "bmaas-vm-9": UUID},
    )
    write(state, json.dumps(doc))
    got = [line.split(": ", 3)[2:] for line in errors(state, "down")]
    fields = [g[0] for g in got]
    assert fields == [
        "domains[2]",
        "domains[1]",
        "proxies",
        "pids.sushy-emulator.pid",
        "pids.sushy-emulator.start",
        "pids.sushy-emulator.exe",
        "pids.sh",
        "iso",
        "uuids.bmaas-vm-1",
    ]


def test_a_uuid_of_a_domain_the_lab_does_not_have_is_refused(state: Path) -> None:
    write(state, json.dumps(good(state, uuids={"bmaas-vm-9": UUID})))
    with pytest.raises(StateFileProblems, match=r"uuids\.bmaas-vm-9: names no domain"):
        VmLab.load(state)


def test_a_million_domains_are_refused_before_any_is_touched(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    touched: list[str] = []
    monkeypatch.setattr(vm_lab.domain, "destroy", touched.append)
    write(state, json.dumps(good(state, domains=[f"d{i}" for i in range(1_000_000)])))
    start = time.monotonic()
    assert errors(state, "down") == [
        f"error: {state / 'vm.json'} is larger than {MAX_VM_JSON} bytes"
    ]
    assert time.monotonic() - start < 5
    # within the size bound, the count bound speaks
    many = [f"bmaas-vm-{i}" for i in range(1, MAX_VMS + 2)]
    write(state, json.dumps(good(state, domains=many)))
    assert errors(state, "down") == [
        f"error: {state / 'vm.json'}: domains: must hold 1 to {MAX_VMS} items, not {MAX_VMS + 1}"
    ]
    assert touched == []
    assert (state / "vm.json").exists()  # a refused file is left for its owner to look at


def test_a_lab_saved_is_loaded_as_it_was_from_where_it_is(state: Path, tmp_path: Path) -> None:
    lab = VmLab(
        state,
        ["bmaas-vm-1"],
        True,
        {"vbmcd": ProcessMark(4242, 913377, "/usr/bin/python3")},
        "/cache/a.iso",
        "/cache/b.iso",
        {"bmaas-vm-1": UUID},
    )
    lab.save()
    assert VmLab.load(state) == lab
    moved = tmp_path / "moved"
    state.rename(moved)
    loaded = VmLab.load(moved)
    assert loaded is not None
    assert loaded.state_dir == moved
    assert VmLab.load(tmp_path / "nowhere") is None


@pytest.mark.parametrize("count", ["\u0662", "\uff12", "1_0", "2.0", " ", "0", str(MAX_VMS + 1)])
def test_a_count_is_ascii_digits_within_the_documented_range(state: Path, count: str) -> None:
    (line,) = errors(state, "up", "--count", count)
    assert "'--count' / '-n'" in line


def test_up_as_a_library_call_holds_the_same_count(state: Path) -> None:
    from bmaas.faults import InputError

    with pytest.raises(InputError, match="count: must be a number of VMs from 1 to 8"):
        vm_lab.up(state, count=MAX_VMS + 1)
    assert not os.path.exists(state / "vm.json")


@pytest.mark.parametrize(
    "args",
    [
        ["up", "--nodes", "\u0662"],
        ["up", "--redfish-service-size", "\uff12"],
        ["proxy", "--control-port", "8\u0660"],
        ["bench", "fleet-sweep", "--rounds", "1_0"],
    ],
)
def test_every_hwlab_whole_number_option_is_ascii_digits(tmp_path: Path, args: list[str]) -> None:
    result = CliRunner().invoke(hwlab_cli, args)
    assert result.exit_code == 2, result.output
    assert "is not a whole number in ASCII digits" in result.output
