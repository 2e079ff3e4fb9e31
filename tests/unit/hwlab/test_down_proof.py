"""``hwlab down`` signals only the process its pid file proves to be the
lab's daemon (issue 44): pid, start time and executable, as ``hwlab vm
down`` does. A pid reused by another process, or a bare pid an older hwlab
wrote, is never signalled."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas.hwlab.cli import cli
from bmaas.hwlab.daemon import lab_alive, read_pid
from bmaas.hwlab.procmark import ProcessMark


@pytest.fixture
def decoy() -> Iterator[subprocess.Popen[bytes]]:
    """Somebody else's process, leading a session of its own."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    yield proc
    proc.kill()
    proc.wait(timeout=10)


def _state(tmp_path: Path, text: str) -> Path:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "hwlab.pid").write_text(text)
    (state / "hwlab.pid").chmod(0o600)
    return state


def test_the_mark_round_trips_and_a_bare_pid_never_holds(decoy: subprocess.Popen[bytes]) -> None:
    mark = ProcessMark.of(decoy.pid)
    assert ProcessMark.from_text(mark.to_text()) == mark
    assert mark.holds()
    bare = ProcessMark.from_text(f"{decoy.pid}\n")
    assert bare is not None
    assert bare.start == -1
    assert not bare.holds()
    for bad in ("", "x\n", "-1\n", "12\nnot-a-start\n/bin/x\n", "12\n3\n", "٢\n", "99999999\n"):
        assert ProcessMark.from_text(bad) is None, bad


def test_a_reused_pid_is_a_stale_file_and_its_process_lives_on(
    tmp_path: Path, decoy: subprocess.Popen[bytes]
) -> None:
    real = ProcessMark.of(decoy.pid)
    # the lab's daemon had this pid, and started earlier than the process that has it now
    state = _state(tmp_path, ProcessMark(real.pid, real.start - 1, real.exe).to_text())
    mark = read_pid(state)
    assert mark is not None
    assert not lab_alive(mark)
    done = CliRunner().invoke(cli, ["down", "--state-dir", str(state), "--timeout", "1"])
    assert done.exit_code == 0, done.output
    assert "removed a stale pid file" in done.output
    assert decoy.poll() is None  # not signalled


def test_a_bare_pid_is_asked_never_signalled(
    tmp_path: Path, decoy: subprocess.Popen[bytes]
) -> None:
    state = _state(tmp_path, f"{decoy.pid}\n")  # alive, but nothing proves it is a lab
    done = CliRunner().invoke(cli, ["down", "--state-dir", str(state), "--timeout", "0.5"])
    assert done.exit_code == 1, done.output
    assert "does not prove the process is hwlab's: not killed" in done.output
    assert decoy.poll() is None
