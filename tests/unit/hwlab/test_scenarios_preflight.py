"""``hwlab matrix`` and ``hwlab demo`` check everything they need before they
start anything (issue 36): packages, drivers, the interpreter, loopback
sockets, ``BMAAS_*`` settings, the folder they work in, ``--profile`` and
``--only``. Every problem is one ``error:`` line, exit 2, no traceback, and
no lab is started. Each check is also driven on its own with a broken world."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from bmaas.hwlab.cli import cli as hwlab_cli
from bmaas.hwlab.harness import preflight


@pytest.fixture(autouse=True)
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Any lab or demo started fails the test (the checks come first)."""
    started: list[str] = []

    def refuse(*_a: Any, **_k: Any) -> Any:
        started.append("started")
        raise AssertionError("a lab was started")

    import bmaas.hwlab.harness.demo as demo_mod
    import bmaas.hwlab.lab as lab_mod

    monkeypatch.setattr(lab_mod, "Lab", refuse)
    monkeypatch.setattr(demo_mod, "run_demo", refuse)
    for name in ("BMAAS_BMC_MAX_REQUESTS", "BMAAS_BMC_MIN_INTERVAL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("BMAAS_REDFISH_TLS_MIN_VERSION", raising=False)
    monkeypatch.delenv("BMAAS_REDFISH_TLS_CIPHERS", raising=False)
    return started


def refused(result: Result, expected: list[str]) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stdout == ""  # not even the demo's opening line
    assert len(lines) == len(expected), lines
    for line, fragment in zip(lines, expected, strict=True):
        assert line.startswith("error: "), line
        assert fragment in line, (fragment, line)


def invoke(args: list[str], env: dict[str, str] | None = None, *, through: bool = False) -> Result:
    """``through``: the checks are expected to pass, and the run to reach the
    (refused) lab, whose AssertionError is then the result's exception."""
    return CliRunner().invoke(hwlab_cli, args, env=env, catch_exceptions=through)


def test_demo_names_every_problem_at_once(tmp_path: Path, nothing_starts: list[str]) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    result = invoke(
        ["demo", "--profile", "bogus,flaky,worse", "--workdir", str(a_file)],
        env={"BMAAS_BMC_MAX_REQUESTS": "nan", "BMAAS_REDFISH_TLS_MIN_VERSION": "1.0"},
    )
    refused(
        result,
        [
            "--profile: unknown profile 'bogus'",
            "--profile: unknown profile 'worse'",
            "environment: BMAAS_BMC_MAX_REQUESTS: must be a whole number",
            "environment: BMAAS_REDFISH_TLS_MIN_VERSION: TLS version '1.0'",
            f"--workdir: {a_file} exists and is not a folder",
        ],
    )
    assert nothing_starts == []


def test_demo_refuses_a_missing_emulator_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(
        preflight,
        "PACKAGES",
        (*preflight.PACKAGES, ("bmaas_no_such_emulator", "the Redfish emulator", "redfish")),
    )
    refused(
        invoke(["demo", "--workdir", str(tmp_path / "w")]),
        ["Python package 'bmaas_no_such_emulator' (the Redfish emulator) is not installed"],
    )
    # an IPMI-only demo has no Redfish emulator to miss
    ipmi = invoke(["demo", "--protocols", "ipmi", "--workdir", str(tmp_path / "w")], through=True)
    assert "a lab was started" in str(ipmi.exception)  # the checks passed: it got to the lab


def test_matrix_names_every_problem_at_once(nothing_starts: list[str]) -> None:
    result = invoke(
        ["matrix", "--protocol", "redfish", "--only", "hnag", "--only", "ipmi-node-busy/ipmi"],
        env={"BMAAS_BMC_MIN_INTERVAL": "\u0665"},
    )
    refused(
        result,
        [
            "--only: unknown scenario 'hnag'; did you mean 'hang'?",
            "--only: scenario 'ipmi-node-busy/ipmi' runs over ipmi only, and --protocol gives "
            "redfish: nothing would run",
            "environment: BMAAS_BMC_MIN_INTERVAL:",
        ],
    )
    assert nothing_starts == []


def test_matrix_with_nothing_wrong_gets_to_its_lab(nothing_starts: list[str]) -> None:
    result = invoke(["matrix", "--only", "hang"], through=True)
    assert "a lab was started" in str(result.exception)
    assert nothing_starts == ["started"]


# -- each check on its own -----------------------------------------------------------


def test_packages_only_those_the_protocols_need() -> None:
    missing = {"sushy", "sushy_tools", "flask"}

    def find(name: str) -> object | None:
        if name == "pyghmi":
            raise ImportError("broken")  # a package that cannot even be found is missing
        return None if name in missing else object()

    # hwlab's Redfish emulator is its own: sushy-tools and Flask are not asked for
    redfish = preflight.packages(["redfish"], find=find)
    assert [p.message.split("'")[1] for p in redfish] == ["sushy"]
    assert all("pip install 'bmaas[lab]'" in p.message for p in redfish)
    ipmi = preflight.packages(["ipmi"], find=find)
    assert [p.message.split("'")[1] for p in ipmi] == ["pyghmi"]
    assert preflight.packages(["ipmi", "redfish"]) == []  # this venv has them all


def test_drivers_interpreter_and_loopback() -> None:
    lines = [str(p) for p in preflight.drivers(["ipmi", "redfish"], names=["fake"])]
    assert len(lines) == 2
    assert "bmaas's ipmi driver is not installed" in lines[0]
    assert preflight.drivers(["ipmi", "redfish"]) == []
    assert "cannot be run" in str(preflight.interpreter("/nonexistent/python")[0])
    assert preflight.interpreter() == []

    def no_loopback(family: int, kind: int) -> socket.socket:
        raise OSError(errno.EADDRNOTAVAIL, os.strerror(errno.EADDRNOTAVAIL))

    found = [str(p) for p in preflight.loopback(["ipmi", "redfish"], make=no_loopback)]
    assert [line.split(" 127")[0] for line in found] == [
        "environment: cannot listen on UDP",
        "environment: cannot listen on TCP",
    ]
    assert preflight.loopback(["ipmi", "redfish"]) == []


def test_folder(tmp_path: Path) -> None:
    assert preflight.folder(None, field="--workdir") == []  # the temporary folder
    fresh = tmp_path / "a" / "b"
    assert preflight.folder(fresh, field="--workdir") == []
    assert not (tmp_path / "a").exists()  # checked, not made
    assert list(tmp_path.iterdir()) == []  # the probe left nothing
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    assert "symbolic link" in str(preflight.folder(link, field="--workdir")[0])

    def denied(where: Path) -> None:
        raise PermissionError(errno.EACCES, "Permission denied")

    (one,) = preflight.folder(fresh, field="--workdir", probe=denied)
    assert str(one) == f"--workdir: {fresh} cannot be made in {tmp_path}: Permission denied"
    (two,) = preflight.folder(tmp_path, field="--workdir", probe=denied)
    assert str(two) == f"--workdir: {tmp_path} is not writable: Permission denied"


def test_every_demo_protocol_choice_is_known() -> None:
    from bmaas.hwlab.cli.scenarios import demo

    choices = next(p for p in demo.params if p.name == "protocols").type
    assert set(getattr(choices, "choices", ())) == set(preflight.DEMO_PROTOCOLS)
