"""A ready hook that waits for the machine's own word: a line on its serial log.

``bmaas deploy --ready-log TEMPLATE --ready-pattern REGEX`` builds one
:class:`SerialMarker`: a node is ready once the file ``TEMPLATE`` (``{node}``
replaced by the node's name, e.g. hwlab's VM lab's
``STATE_DIR/serial/{node}.log``) shows a line matching ``REGEX`` *written
after the command started*: the size of every such file is noted when the
hook is built (before this command powers anything on), and only what was
appended since is searched, so an earlier boot's marker never counts. A file
that shrank (rotated, truncated by a restart) is read from its start.

The deploy asks the hook every ``ready_interval`` seconds within its ready
step, so the wait is bounded by the step's limit and the deploy's deadline;
a node that never prints the line ends the deploy with a ``BootFailure``
(``not ready Ns after boot``) and the request moves to another node.

With ``--fail-pattern REGEX`` the same new lines are searched for the
machine's word that its boot failed (``Kernel panic``; OVMF's ``No
bootable option or device was found``): a match before any ready line ends
the wait at once (:class:`~bmaas.deploy.WillNotBeReady`, a ``BootFailure``
that quotes the line) instead of after ``--ready-timeout`` -- a machine
that halted on a panic reads "on" at its BMC all the while. It is read in
the ready step only: with ``--to-disk``, once the node boots its disk.
"""

from __future__ import annotations

import glob
import os
import re
import threading

from bmaas.deploy import WillNotBeReady
from bmaas.driver import BMCDriver
from bmaas.faults import InputError

__all__ = ["SerialMarker"]

#: the most of a log searched per ask: a chatty console cannot make one ask slow
MAX_READ = 4 << 20
#: the most of a failing line quoted in the fault (a console line is the
#: machine's, of any length)
MAX_QUOTE = 160


class SerialMarker:
    """Ready when ``template``'s file for the node shows ``pattern`` anew;
    failed (:class:`~bmaas.deploy.WillNotBeReady`) when it shows
    ``fail_pattern`` first."""

    def __init__(self, template: str, pattern: str, fail_pattern: str | None = None) -> None:
        problems = []
        if "{node}" not in template:
            problems.append("--ready-log: has no {node} (each node has its own log)")
        try:
            self.regex = re.compile(pattern.encode())
        except re.error as exc:
            problems.append(f"--ready-pattern: not a regular expression: {exc}")
        self.fail_regex: re.Pattern[bytes] | None = None
        if fail_pattern is not None:
            try:
                self.fail_regex = re.compile(fail_pattern.encode())
            except re.error as exc:
                problems.append(f"--fail-pattern: not a regular expression: {exc}")
        if problems:
            raise InputError("; ".join(problems))
        self.template = template
        self._lock = threading.Lock()
        #: path -> its size when this command started
        self._start: dict[str, int] = {}
        pattern_glob = glob.escape(template).replace(glob.escape("{node}"), "*")
        for path in glob.glob(pattern_glob):
            try:
                self._start[path] = os.stat(path).st_size
            except OSError:
                continue

    def path(self, node: str) -> str:
        return self.template.replace("{node}", node)

    def __call__(self, node: str, driver: BMCDriver) -> bool:
        path = self.path(node)
        with self._lock:
            start = self._start.get(path, 0)
        try:
            with open(path, "rb") as log:
                size = os.fstat(log.fileno()).st_size
                if size < start:  # truncated or replaced: all of it is new
                    start = 0
                log.seek(max(start, size - MAX_READ))
                new = log.read(MAX_READ)
        except FileNotFoundError:
            return False  # not written yet: the machine has said nothing
        ready = self.regex.search(new)
        failed = self.fail_regex.search(new) if self.fail_regex is not None else None
        if failed is not None and (ready is None or failed.start() < ready.start()):
            raise WillNotBeReady(f"its serial log shows {_line_of(new, failed)!r}")
        return ready is not None


def _line_of(text: bytes, match: re.Match[bytes]) -> str:
    """The whole line ``match`` is on, decoded and cut to ``MAX_QUOTE``."""
    start = text.rfind(b"\n", 0, match.start()) + 1
    end = text.find(b"\n", match.end())
    line = text[start : end if end >= 0 else len(text)].strip()
    return line[:MAX_QUOTE].decode(errors="replace")
