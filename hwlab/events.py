"""The lab's event log: one JSON line per injected effect.

It is what a test or a report compares against what a client saw. Several
worker processes append to the same file; each event is one ``write()`` on a
file opened with ``O_APPEND``, which Linux keeps whole for lines this short.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

from bmaas.fakes.faults import Firing
from bmaas.hwlab.statefiles import open_private

__all__ = ["EventLog", "read_events"]


class EventLog:
    """Append firings to ``path`` as JSON lines (a ``FaultPlan`` listener)."""

    def __init__(self, path: str) -> None:
        self.path = path
        # 0600, never through a link (a planted events.jsonl -> ~/.bashrc)
        self._fd = open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        self._lock = threading.Lock()
        self.count = 0

    def __call__(self, firing: Firing) -> None:
        record = {"wall": round(time.time(), 6), **firing.to_dict()}
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        with self._lock:
            if self._fd >= 0:
                os.write(self._fd, line)
                self.count += 1

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def read_events(path: str) -> Iterator[dict[str, Any]]:
    """Every event in the log, oldest first; a torn last line is skipped."""
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue
    except FileNotFoundError:
        return
