"""``hwlab vm restart-bmc`` (hwlab/vm/restart.py): the lab's own emulator
stopped by its mark -- SIGKILL when SIGTERM does not end it within the
bound --, its ports refusing for ``--down`` seconds, started again and
recorded; a lab with proxies, or a process no longer the one ``up``
started, is refused and nothing is signalled. No libvirt here: the
emulator is a decoy process, its ports a fake (tests/vm/ restart the real
ones)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas.hwlab.cli import cli
from bmaas.hwlab.procmark import ProcessMark
from bmaas.hwlab.vm import restart
from bmaas.hwlab.vm.state import VmLab

DEAF = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('up', flush=True); time.sleep(60)"
)


def _spawn(code: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "up\n"  # its SIGTERM handler is set
    return proc


def _end(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait(timeout=10)
    assert proc.stdout is not None
    proc.stdout.close()


@pytest.fixture
def deaf() -> Iterator[subprocess.Popen[str]]:
    """An emulator that ignores SIGTERM, leading its own session."""
    proc = _spawn(DEAF)
    yield proc
    _end(proc)


def _lab(tmp_path: Path, pids: dict[str, ProcessMark], *, proxies: bool = False) -> Path:
    state = tmp_path / "vm"
    state.mkdir(mode=0o700, parents=True)
    VmLab(state, ["n1"], proxies, pids, "/x/cd.iso", "/x/vmedia.iso", {}).save()
    return state


class FakeServer:
    """The emulator's ports (refusing once the old process is gone) and its start."""

    def __init__(self, old: subprocess.Popen[str]) -> None:
        self.old = old
        self.ports = {"n1-domain": 6230}
        self.new: subprocess.Popen[str] | None = None

    def refuses(self) -> bool:
        return self.old.wait(timeout=10) is not None  # a bounded wait for the kill to land

    def start(self, timeout: float) -> None:
        self.new = _spawn("import time; print('up', flush=True); time.sleep(60)")

    @property
    def pid(self) -> int | None:
        return self.new.pid if self.new is not None else None


def test_a_process_deaf_to_sigterm_is_killed_past_the_bound_then_down_then_started_again(
    tmp_path: Path, deaf: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state = _lab(tmp_path, {"sushy-emulator": ProcessMark.of(deaf.pid)})
    server = FakeServer(deaf)
    monkeypatch.setattr(restart, "_servers", lambda lab: {"sushy-emulator": server})
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    try:
        (done,) = restart.restart_bmc(
            state, ["sushy-emulator"], down=7.0, stop_timeout=2.0, sleep=sleep, clock=lambda: now[0]
        )
        assert deaf.returncode == -9  # SIGTERM ignored: killed once the bound passed
        assert done.stopped_by == "SIGKILL"
        assert done.stop_s == pytest.approx(2.0, abs=0.11)
        assert slept.count(7.0) == 1  # refusing for --down seconds, then started
        assert server.new is not None
        assert done.new_pid == server.new.pid
        assert done.ports == (6230,)
        lab = VmLab.load(state)
        assert lab is not None
        assert lab.pids["sushy-emulator"] == ProcessMark.of(server.new.pid)  # what down stops
    finally:
        if server.new is not None:
            _end(server.new)


def test_a_lab_with_proxies_or_a_process_no_longer_ours_is_refused_and_left_alone(
    tmp_path: Path, deaf: subprocess.Popen[str]
) -> None:
    real = ProcessMark.of(deaf.pid)
    runner = CliRunner()
    proxied = _lab(tmp_path / "a", {}, proxies=True)
    done = runner.invoke(cli, ["vm", "restart-bmc", "all", "--state-dir", str(proxied)])
    assert done.exit_code == 2, done.output
    assert "without --proxies" in done.output
    # the pid is reused: another process, started after the one up recorded
    reused = _lab(tmp_path / "b", {"vbmcd": ProcessMark(real.pid, real.start - 1, real.exe)})
    done = runner.invoke(cli, ["vm", "restart-bmc", "vbmcd", "--state-dir", str(reused)])
    assert done.exit_code == 2, done.output
    assert "vbmcd: not running as hwlab vm up started it" in done.output
    assert "Traceback" not in done.output
    assert deaf.poll() is None  # never signalled
    done = runner.invoke(cli, ["vm", "restart-bmc", "--state-dir", str(reused)])
    assert done.exit_code == 2
    assert "name an emulator" in done.output
