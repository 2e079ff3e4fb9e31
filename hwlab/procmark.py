"""A process hwlab started, as it can prove it later: pid, start time, executable.

``hwlab vm up`` starts sushy-emulator and vbmcd in sessions of their own
and returns; ``hwlab vm down``, another process, stops them from what
``vm.json`` recorded. A pid alone proves nothing by then: the process may be
gone and its pid reused. Issue 44 found ``down`` sending SIGTERM to any
process group whose command line merely contained ``sushy_tools``: anyone's
process with that word in its arguments. So hwlab records a
:class:`ProcessMark` when it starts a process, and signals it only while
every part still holds:

* ``pid``: the process, and the process group it leads (started with
  ``start_new_session``: its pid is its group's id, which
  :meth:`ProcessMark.signal_group` checks);
* ``start``: its start time, ``/proc/PID/stat`` field 22 (clock ticks after
  boot): a process that reuses the pid started later;
* ``exe``: its executable, ``/proc/PID/exe`` (as the kernel resolved it).

A process that is gone, not ours to read, or different in any of these is
left alone; never anything chosen by a name in its arguments.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["PROC", "ProcessMark"]

PROC = Path("/proc")
#: the largest pid Linux hands out (``pid_max`` may be at most 2**22)
MAX_PID = 1 << 22


@dataclasses.dataclass(frozen=True)
class ProcessMark:
    pid: int
    #: ``/proc/PID/stat`` field 22: clock ticks from boot to the process's start
    start: int
    #: ``/proc/PID/exe``: the executable the kernel runs it from
    exe: str

    @classmethod
    def of(cls, pid: int, *, proc: Path = PROC) -> ProcessMark:
        """The mark of the running process ``pid`` (``ProcessLookupError`` if
        there is none; ``PermissionError`` if it is not ours to read)."""
        start, _group, exe = _read(pid, proc)
        return cls(pid, start, exe)

    def running(self, *, proc: Path = PROC) -> bool:
        """Is ``pid`` still the process this mark was taken of (its start
        time and executable), group or not?"""
        try:
            start, _group, exe = _read(self.pid, proc)
        except (OSError, ValueError):
            return False
        return (start, exe) == (self.start, self.exe)

    def holds(self, *, proc: Path = PROC) -> bool:
        """Is ``pid`` still the process this mark was taken of, leading its
        own process group?"""
        try:
            start, group, exe = _read(self.pid, proc)
        except (OSError, ValueError):
            return False
        return (start, exe, group) == (self.start, self.exe, self.pid)

    def signal(
        self, sig: int, *, proc: Path = PROC, kill: Callable[[int, int], None] = os.kill
    ) -> bool:
        """Send ``sig`` to this process alone, if it is still the marked
        process (:meth:`running`); whether it was sent."""
        if not self.running(proc=proc):
            return False
        try:
            kill(self.pid, sig)
        except ProcessLookupError:
            return False
        return True

    def to_text(self) -> str:
        """The mark as a pid file holds it: the pid, its start and its
        executable, a line each (the first line alone is the classic pid file)."""
        return f"{self.pid}\n{self.start}\n{self.exe}\n"

    @classmethod
    def from_text(cls, text: str) -> ProcessMark | None:
        """A mark from :meth:`to_text`; a bare pid (a pid file an older hwlab
        wrote) is a mark that never holds (start -1): such a process is asked
        to stop, never signalled. ``None`` for anything else."""
        lines = text.strip().split("\n")
        head = lines[0].strip()
        if not (head.isascii() and head.isdigit()) or not 0 < int(head) <= MAX_PID:
            return None
        if len(lines) == 1:
            return cls(int(head), -1, "")
        start = lines[1].strip()
        if len(lines) != 3 or not (start.isascii() and start.isdigit()) or not lines[2]:
            return None
        return cls(int(head), int(start), lines[2])

    def signal_group(
        self,
        sig: int,
        *,
        proc: Path = PROC,
        killpg: Callable[[int, int], None] = os.killpg,
    ) -> bool:
        """Send ``sig`` to the process group this process leads, if the mark
        still holds; whether it was sent."""
        if not self.holds(proc=proc):
            return False
        try:
            killpg(self.pid, sig)
        except ProcessLookupError:
            return False
        return True


def _read(pid: int, proc: Path) -> tuple[int, int, str]:
    """``pid``'s start time, process group and executable."""
    try:
        text = (proc / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
        exe = os.readlink(proc / str(pid) / "exe")
    except FileNotFoundError:
        raise ProcessLookupError(pid) from None
    # the command name (field 2) is in parentheses and may hold ") " itself
    fields = text.rpartition(")")[2].split()
    # fields[0] is field 3 (state): field N is fields[N - 3]
    if len(fields) < 20:
        raise ValueError(f"/proc/{pid}/stat has {len(fields) + 2} fields")
    return int(fields[22 - 3]), int(fields[5 - 3]), exe
