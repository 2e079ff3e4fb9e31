"""``ipmitool`` the way OpenStack Ironic's ``ipmitool`` power interface runs
it: the baseline operators use today.

What Ironic does by default (``ironic/drivers/modules/ipmitool.py``,
``_exec_ipmitool``, and ``ironic/conf/ipmi.py``):

* ``[ipmi] use_ipmitool_retries = False``: ipmitool gets ``-R 1 -N 1`` (one
  try, one-second timeout) and Ironic does the retrying itself. With it
  True, ipmitool would get ``-R 12 -N 5`` instead.
* Every failure is retried ("if Ironic is doing retries then retry all
  errors"), until ``[ipmi] command_retry_timeout = 60`` seconds have passed
  or ``60 // min_command_interval = 12`` tries were made.
* ``[ipmi] min_command_interval = 5``: at least 5 s between two commands to
  the same BMC (counted from the end of the last one).
* ``kill_on_timeout = True``: a ``power status`` still running after 60 s
  is killed, and that ends the call.
* ``sync_power_state_workers = 8`` (``[conductor]``): power-state sync runs
  8 ipmitool processes at once.

Ironic passes the password in a temporary file (``-f``); here it goes
through ``-E`` (the ``IPMI_PASSWORD`` environment variable): same cost, and
never on a command line where ``ps`` would show it. Ironic's pause is kept
per BMC address; every lab BMC is on 127.0.0.1, so it is kept per address
and port here (real BMCs have an address each).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bmaas.faults import InputError

__all__ = [
    "IRONIC_RETRY_TIMEOUT",
    "IronicResult",
    "ipmitool_job",
    "ironic_power_status",
    "require_ipmitool",
    "sweep",
]

#: [ipmi] command_retry_timeout
IRONIC_RETRY_TIMEOUT = 60.0
#: [ipmi] min_command_interval
IRONIC_MIN_INTERVAL = 5.0
#: [conductor] sync_power_state_workers
IRONIC_SYNC_WORKERS = 8
#: ipmitool's own timing with use_ipmitool_retries = False
IRONIC_TIMING = ("-R", "1", "-N", "1")

Job = tuple[list[str], dict[str, str]]


def require_ipmitool() -> str:
    tool = shutil.which("ipmitool")
    if tool is None:
        raise InputError("ipmitool is not installed (scripts/setup.sh installs it)")
    return tool


def ipmitool_job(
    info: Mapping[str, Any], *, password: str, command: Sequence[str] = ("power", "status")
) -> Job:
    """argv and environment for one ipmitool call, as Ironic builds it
    (lanplus, ADMINISTRATOR privilege, Ironic's timing)."""
    argv = [require_ipmitool(), "-I", "lanplus", "-H", str(info["ipmi_address"])]
    argv += ["-L", "ADMINISTRATOR", "-p", str(info.get("ipmi_port", 623))]
    argv += ["-U", str(info.get("ipmi_username", "")), "-E", *IRONIC_TIMING, *command]
    return argv, {**os.environ, "IPMI_PASSWORD": password}


@dataclasses.dataclass(frozen=True)
class IronicResult:
    ok: bool
    #: seconds from the first command to the answer or the final error
    elapsed: float
    tries: int
    #: ipmitool's last line on failure (what Ironic logs before IPMIFailure)
    error: str = ""
    #: True when the benchmark stopped waiting at its cap, before Ironic would have
    gave_up: bool = False


def _run(job: Job, timeout: float) -> subprocess.CompletedProcess[str]:
    argv, env = job
    # S603: ipmitool from PATH; argv built here from a lab's inventory
    return subprocess.run(  # noqa: S603
        argv, capture_output=True, text=True, env=env, timeout=timeout, check=False
    )


def ironic_power_status(
    job: Job,
    *,
    cap: float = float("inf"),
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    run: Callable[[Job, float], subprocess.CompletedProcess[str]] = _run,
) -> IronicResult:
    """One ``power status`` through Ironic's retry loop; the benchmark stops
    waiting after ``cap`` seconds (and says so) rather than waiting it out."""
    start = clock()
    end = start + IRONIC_RETRY_TIMEOUT
    tries_left = max(int(IRONIC_RETRY_TIMEOUT // IRONIC_MIN_INTERVAL), 1)
    tries, last_end, error = 0, None, ""
    while True:
        tries_left -= 1
        if last_end is not None:
            pause = IRONIC_MIN_INTERVAL - (clock() - last_end)
            if clock() + max(0.0, pause) - start >= cap:
                return IronicResult(False, cap, tries, error, gave_up=True)
            if pause > 0:
                sleep(pause)
        budget = min(IRONIC_RETRY_TIMEOUT, cap - (clock() - start))
        tries += 1
        try:
            done = run(job, budget)
        except subprocess.TimeoutExpired:
            elapsed = clock() - start
            if budget < IRONIC_RETRY_TIMEOUT:
                return IronicResult(False, cap, tries, error, gave_up=True)
            # kill_on_timeout: the TimeoutExpired escapes Ironic's retry loop
            return IronicResult(False, elapsed, tries, "ipmitool killed after 60 s")
        last_end = clock()
        if done.returncode == 0:
            return IronicResult(True, last_end - start, tries)
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        error = lines[-1] if lines else f"exit {done.returncode}"
        if clock() > end or tries_left == 0:
            return IronicResult(False, last_end - start, tries, error)


def sweep(jobs: Sequence[Job], *, workers: int = IRONIC_SYNC_WORKERS) -> tuple[float, int]:
    """One ipmitool process per node, ``workers`` at a time (Ironic's power
    sync; one try each, since a sweep hits each BMC once): seconds taken and
    how many calls failed."""

    def one(job: Job) -> bool:
        try:
            return _run(job, IRONIC_RETRY_TIMEOUT).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(one, jobs))
    return time.perf_counter() - start, results.count(False)
