"""A process is signalled only when hwlab started it and can prove it (issue
44, finding 2: ``hwlab vm down`` sent SIGTERM to any process group whose
command line contained ``sushy_tools``): its pid, start time
(``/proc/PID/stat`` field 22) and executable (``/proc/PID/exe``) must all
still match, and it must lead its own process group."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bmaas.hwlab.procmark import ProcessMark
from bmaas.hwlab.vm import lab as vm_lab
from bmaas.hwlab.vm.state import VmLab


def fake_proc(
    root: Path, pid: int, *, start: int, group: int, exe: str, comm: str = "python"
) -> Path:
    """``root/PID/stat`` and ``root/PID/exe`` as Linux writes them."""
    where = root / str(pid)
    where.mkdir(parents=True, exist_ok=True)
    fields = [str(pid), f"({comm})", "S", "1", str(group)] + ["0"] * 16 + [str(start)] + ["0"] * 30
    (where / "stat").write_text(" ".join(fields) + "\n")
    (where / "exe").unlink(missing_ok=True)
    (where / "exe").symlink_to(exe)
    return root


def test_a_mark_reads_start_time_group_and_executable(tmp_path: Path) -> None:
    # a command name may hold ") " and digits: the fields are counted after the last ")"
    proc = fake_proc(
        tmp_path, 4242, start=913377, group=4242, exe="/usr/bin/python3", comm="a) 7 (b"
    )
    mark = ProcessMark.of(4242, proc=proc)
    assert mark == ProcessMark(4242, 913377, "/usr/bin/python3")
    assert mark.holds(proc=proc)


@pytest.mark.parametrize(
    ("start", "group", "exe", "why"),
    [
        (913378, 4242, "/usr/bin/python3", "the pid was reused by a later process"),
        (913377, 4242, "/usr/bin/bash", "another executable"),
        (913377, 1, "/usr/bin/python3", "not the leader of its own group"),
    ],
)
def test_a_mark_that_no_longer_holds_is_not_signalled(
    tmp_path: Path, start: int, group: int, exe: str, why: str
) -> None:
    sent: list[tuple[int, int]] = []
    mark = ProcessMark(4242, 913377, "/usr/bin/python3")
    proc = fake_proc(tmp_path, 4242, start=start, group=group, exe=exe)
    assert not mark.holds(proc=proc), why
    assert not mark.signal_group(signal.SIGTERM, proc=proc, killpg=lambda *a: sent.append(a))
    assert sent == []


def test_a_mark_that_holds_signals_its_group_once(tmp_path: Path) -> None:
    sent: list[tuple[int, int]] = []
    proc = fake_proc(tmp_path, 4242, start=913377, group=4242, exe="/usr/bin/python3")
    mark = ProcessMark(4242, 913377, "/usr/bin/python3")
    assert mark.signal_group(signal.SIGTERM, proc=proc, killpg=lambda *a: sent.append(a))
    assert sent == [(4242, signal.SIGTERM)]


def test_a_process_that_is_gone_is_not_signalled(tmp_path: Path) -> None:
    mark = ProcessMark(4242, 913377, "/usr/bin/python3")
    assert not mark.holds(proc=tmp_path)
    with pytest.raises(ProcessLookupError):
        ProcessMark.of(4242, proc=tmp_path)


# -- hwlab vm down, with real processes -----------------------------------------


def _spawn(*argv: str) -> subprocess.Popen[bytes]:
    """A process in a session of its own, as hwlab starts sushy-emulator; it
    waits on its stdin (no sleep), so it lives until killed or the test ends."""
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", *argv],
        stdin=subprocess.PIPE,
        start_new_session=True,
    )


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait(10)
        assert p.stdin is not None
        p.stdin.close()


def _lab(state: Path, monkeypatch: pytest.MonkeyPatch, pids: dict[str, ProcessMark]) -> list[str]:
    destroyed: list[str] = []
    monkeypatch.setattr(vm_lab.domain, "destroy", lambda name, **_: destroyed.append(name))
    state.mkdir(mode=0o700)
    VmLab(state, ["bmaas-vm-1"], False, pids, "/a.iso", "/b.iso", {}).save()
    return destroyed


def test_down_leaves_alone_a_process_named_like_the_emulator_that_it_did_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: list[subprocess.Popen[bytes]]
) -> None:
    """The finding: the recorded emulator is gone, its pid now someone's
    process whose arguments say ``sushy_tools`` and ``virtualbmc``. Its
    start time differs (it started later), so it is left alone; so is one
    whose executable differs."""
    decoy = _spawn("sushy_tools.emulator.main", "virtualbmc")
    other = _spawn("sushy_tools")
    processes += [decoy, other]
    real, real_other = ProcessMark.of(decoy.pid), ProcessMark.of(other.pid)
    destroyed = _lab(
        tmp_path / "vm",
        monkeypatch,
        {
            "sushy-emulator": ProcessMark(decoy.pid, real.start - 1, real.exe),  # reused pid
            "vbmcd": ProcessMark(other.pid, real_other.start, "/usr/sbin/sushy_tools"),
        },
    )
    assert vm_lab.down(tmp_path / "vm") == ["bmaas-vm-1"]
    assert decoy.poll() is None
    assert other.poll() is None
    assert destroyed == [VmLab(tmp_path / "vm", ["bmaas-vm-1"]).domain("bmaas-vm-1")]
    assert not (tmp_path / "vm" / "vm.json").exists()


def test_down_stops_the_process_group_it_started_and_can_prove(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: list[subprocess.Popen[bytes]]
) -> None:
    emulator = _spawn()  # its argv names nothing: the proof is not a name
    processes.append(emulator)
    _lab(tmp_path / "vm", monkeypatch, {"sushy-emulator": ProcessMark.of(emulator.pid)})
    saved = json.loads((tmp_path / "vm" / "vm.json").read_text())["pids"]["sushy-emulator"]
    assert saved == {
        "pid": emulator.pid,
        "start": saved["start"],
        "exe": os.readlink(f"/proc/{emulator.pid}/exe"),
    }
    assert vm_lab.down(tmp_path / "vm") == ["sushy-emulator", "bmaas-vm-1"]
    assert emulator.wait(10) == -signal.SIGTERM
