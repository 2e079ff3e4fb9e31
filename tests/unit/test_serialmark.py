"""bmaas.serialmark: the ready hook that waits for a line on the node's serial log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bmaas.cli import cli
from bmaas.deploy import WillNotBeReady
from bmaas.faults import InputError
from bmaas.serialmark import MAX_QUOTE, SerialMarker

DRIVER: Any = None  # the hook never asks the BMC


def test_only_what_was_written_after_the_hook_was_built_counts(tmp_path: Path) -> None:
    log = tmp_path / "vm-1.log"
    log.write_text("BMAAS-BOOTED via=cdrom boot_id=old\n")
    hook = SerialMarker(str(tmp_path / "{node}.log"), r"BMAAS-BOOTED via=(cdrom|vmedia)")
    assert hook("vm-1", DRIVER) is False  # an earlier boot's marker
    with log.open("a") as f:
        f.write("SeaBIOS noise\nBMAAS-BOOTED via=vmedia boot_id=new\n")
    assert hook("vm-1", DRIVER) is True


def test_a_log_that_appears_later_is_read_from_its_start(tmp_path: Path) -> None:
    hook = SerialMarker(str(tmp_path / "{node}.log"), "BMAAS-BOOTED via=vmedia")
    assert hook("vm-2", DRIVER) is False  # no file yet: nothing said
    (tmp_path / "vm-2.log").write_text("BMAAS-BOOTED via=vmedia\n")
    assert hook("vm-2", DRIVER) is True


def test_a_truncated_log_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "vm-1.log"
    log.write_text("x" * 1000 + "\n")
    hook = SerialMarker(str(tmp_path / "{node}.log"), "BMAAS-BOOTED")
    log.write_text("BMAAS-BOOTED via=cdrom\n")  # shorter than the noted size
    assert hook("vm-1", DRIVER) is True


def test_the_wrong_medium_is_not_ready(tmp_path: Path) -> None:
    hook = SerialMarker(str(tmp_path / "{node}.log"), "BMAAS-BOOTED via=vmedia")
    (tmp_path / "vm-1.log").write_text("BMAAS-BOOTED via=cdrom\n")
    assert hook("vm-1", DRIVER) is False


def test_bad_input_is_every_problem_at_once(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        SerialMarker(str(tmp_path / "serial.log"), "BMAAS-BOOTED (")
    assert "{node}" in str(caught.value)
    assert "not a regular expression" in str(caught.value)


def test_deploy_wants_both_options_or_neither(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["deploy", "--ready-log", str(tmp_path / "{node}.log")])
    assert result.exit_code == 2
    assert "--ready-log/--ready-pattern" in result.output
    assert "Traceback" not in result.output


def test_a_failing_line_ends_the_wait_quoting_the_line(tmp_path: Path) -> None:
    hook = SerialMarker(str(tmp_path / "{node}.log"), "BMAAS-BOOTED", r"Kernel panic")
    log = tmp_path / "vm-1.log"
    log.write_text("SeaBIOS\n")
    assert hook("vm-1", DRIVER) is False
    with log.open("a") as f:
        f.write("[    2.1] Kernel panic - not syncing: Attempted to kill init!\n[    2.2] ---\n")
    with pytest.raises(WillNotBeReady) as caught:
        hook("vm-1", DRIVER)
    assert str(caught.value) == (
        "its serial log shows '[    2.1] Kernel panic - not syncing: Attempted to kill init!'"
    )


def test_a_failing_line_before_the_command_or_after_ready_does_not_count(tmp_path: Path) -> None:
    log = tmp_path / "vm-1.log"
    log.write_text("Kernel panic - an earlier boot's\n")
    hook = SerialMarker(str(tmp_path / "{node}.log"), "BMAAS-BOOTED", "Kernel panic")
    assert hook("vm-1", DRIVER) is False
    with log.open("a") as f:
        f.write("BMAAS-BOOTED via=vmedia\nKernel panic - long after it was up\n")
    assert hook("vm-1", DRIVER) is True


def test_a_long_failing_line_is_quoted_cut(tmp_path: Path) -> None:
    hook = SerialMarker(str(tmp_path / "{node}.log"), "BMAAS-BOOTED", "FAIL")
    (tmp_path / "vm-1.log").write_bytes(b"FAIL " + b"\xff" * 1000)
    with pytest.raises(WillNotBeReady) as caught:
        hook("vm-1", DRIVER)
    assert len(str(caught.value)) < MAX_QUOTE + 40


def test_a_bad_fail_pattern_is_named_with_the_others(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        SerialMarker(str(tmp_path / "serial.log"), "BMAAS-BOOTED", "panic (")
    assert "{node}" in str(caught.value)
    assert "--fail-pattern: not a regular expression" in str(caught.value)


def test_deploy_wants_a_ready_log_for_a_fail_pattern(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["deploy", "--fail-pattern", "Kernel panic"])
    assert result.exit_code == 2
    assert "--fail-pattern" in result.output
    assert "--ready-log and --ready-pattern" in result.output
    assert "Traceback" not in result.output
