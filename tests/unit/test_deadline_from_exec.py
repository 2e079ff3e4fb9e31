"""Where a command's budget starts (issue 36): ``bmaas.clock.process_started``
reads the process's start from ``/proc/self/stat`` (here a file written by
the test), and ``App.deadline`` counts the command's first deadline from it.
The end-to-end check, a real process with a slow start, is
tests/lab/test_deadline_from_exec.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import click
import pytest

from bmaas.cli.app import App
from bmaas.clock import STARTUP_LIMIT, process_started
from bmaas.fakes.clock import FakeClock

HERTZ = os.sysconf("SC_CLK_TCK")


def stat_file(tmp_path: Path, age: float, command: str = "bmaas") -> str:
    """A ``/proc/self/stat`` line for a process started ``age`` seconds ago."""
    ticks = int((time.clock_gettime(time.CLOCK_BOOTTIME) - age) * HERTZ)
    fields = ["S", "1", "1", "1", "0", "-1", "4194304"] + ["0"] * 12 + [str(ticks), "0", "0"]
    path = tmp_path / "stat"
    path.write_text(f"4242 ({command}) " + " ".join(fields) + "\n")
    return str(path)


@pytest.mark.skipif(not hasattr(time, "CLOCK_BOOTTIME"), reason="Linux clocks")
def test_the_start_is_read_from_the_process_stat(tmp_path: Path) -> None:
    now = time.monotonic()
    started = process_started(fallback=now, stat=stat_file(tmp_path, age=3.0))
    # ticks are whole (10 ms at 100 Hz), rounded down: never later than the truth
    assert now - 3.0 - 2 / HERTZ - 0.05 <= started <= now - 3.0 + 0.05


@pytest.mark.skipif(not hasattr(time, "CLOCK_BOOTTIME"), reason="Linux clocks")
def test_a_command_name_with_spaces_and_parens_is_skipped(tmp_path: Path) -> None:
    now = time.monotonic()
    path = stat_file(tmp_path, age=1.0, command="we ird) (name")
    assert process_started(fallback=now, stat=path) <= now - 0.9


def test_the_fallback_when_the_file_cannot_be_read(tmp_path: Path) -> None:
    assert process_started(fallback=12.5, stat=str(tmp_path / "missing")) == 12.5
    garbled = tmp_path / "garbled"
    garbled.write_text("4242 (bmaas) S 1 2\n")  # too few fields
    assert process_started(fallback=12.5, stat=str(garbled)) == 12.5


def test_never_later_than_the_fallback(tmp_path: Path) -> None:
    # a "start" in the future (a clock oddity) is not believed
    earlier = time.monotonic() - 10.0
    assert process_started(fallback=earlier, stat=stat_file(tmp_path, age=0.0)) == earlier


def test_the_commands_first_deadline_counts_from_the_process_start() -> None:
    clock = FakeClock(start=100.0)
    app = App(deadline_clock=clock.monotonic, started=97.0)  # 3 s of start-up
    command = app.deadline(5.0)
    assert command.at == pytest.approx(102.0)  # 5 s from exec, not from now
    assert command.left() == pytest.approx(2.0)
    later = app.deadline(5.0)  # a pass of its own (sync --interval): from now
    assert later.at == pytest.approx(105.0)


def test_a_start_up_that_spent_the_budget_ends_the_command_at_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before the database or a driver is loaded (their loading alone would
    overrun further): one line, exit 1, nothing asked."""
    clock = FakeClock(start=100.0)
    app = App(deadline_clock=clock.monotonic, started=99.0)
    with pytest.raises(click.exceptions.Exit) as info:
        app.deadline(0.5)
    assert info.value.exit_code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "the 0.5 s --deadline was spent by start-up (1.00 s after exec)" in err
    assert app._store is None  # nothing opened


def test_without_a_process_start_the_budget_counts_from_now() -> None:
    clock = FakeClock(start=100.0)
    app = App(deadline_clock=clock.monotonic)  # in-process: a test, a library
    assert app.deadline(5.0).at == pytest.approx(105.0)


@pytest.mark.skipif(not hasattr(time, "CLOCK_BOOTTIME"), reason="Linux clocks")
def test_a_process_a_shell_exec_d_in_place_counts_from_its_own_first_line(
    tmp_path: Path,
) -> None:
    """``bash -c 'a; b; bmaas ...'`` execs its last command in place: the
    kernel's start is the shell's fork, 28 s earlier in the docs block that
    found it; the command's budget then starts at ``fallback``."""
    now = time.monotonic()
    stat = stat_file(tmp_path, age=STARTUP_LIMIT + 23.0)
    assert process_started(fallback=now, stat=stat) == now
    # an interpreter slow to start (a loaded machine) is still counted
    slow = stat_file(tmp_path, age=STARTUP_LIMIT - 1.0)
    assert process_started(fallback=now, stat=slow) < now - STARTUP_LIMIT + 1.5
