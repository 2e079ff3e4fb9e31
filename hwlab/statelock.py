"""One state directory, one lab: an exclusive lock on ``STATE_DIR/hwlab.lock``.

Two ``hwlab up`` started at once on a fresh state directory both used to
succeed: two daemons, and a pid file and ``lab.json`` that disagreed. The pid
file cannot prevent that (both read "no pid" before either writes one). A
``fcntl.flock`` can: ``hwlab up`` takes it without waiting (a second one
exits 2 with one line) and hands the locked descriptor to the daemon it
starts, which holds it for the lab's life; the kernel drops it when the
daemon exits, however it exits, so a crashed lab never leaves a stale lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from bmaas.faults import InputError
from bmaas.hwlab.statefiles import open_private

__all__ = ["LOCK_FILE", "acquire"]

LOCK_FILE = "hwlab.lock"


def acquire(state_dir: Path) -> int:
    """The state directory's lock, as an open descriptor (close it, or let
    the process that inherits it exit, to release it); ``InputError`` when
    another lab or ``hwlab up`` holds it."""
    fd = open_private(state_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT)  # 0600, not via a link
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise InputError(
            f"a lab is already running or starting in {state_dir}; run 'hwlab down' first, "
            "or pick another --state-dir",
            field="--state-dir",
        ) from None
    except OSError:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    return fd
