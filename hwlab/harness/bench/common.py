"""What the benchmark scenarios share: labs that always stop, statistics,
side-by-side timing, memory of a process tree, and call counters.

A benchmark that leaves a lab worker running is worse than no benchmark:
:func:`running_lab` stops the lab whatever happens and then makes sure every
worker process is gone (killing any that is not), and :func:`no_stray_children`
does the same for anything else a scenario started.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from bmaas.hwlab.lab import Lab
from bmaas.hwlab.labspec import LabSpec

__all__ = [
    "CallCounter",
    "interleaved",
    "no_stray_children",
    "per_node_hour",
    "percentile",
    "process_cpu",
    "process_footprint",
    "process_tree_rss",
    "running_lab",
    "sampled",
    "summary",
    "tree_cpu",
]

LOG = logging.getLogger(__name__)

#: how long a lab of any size may take to listen (1000 nodes take ~3 s here)
LAB_START_TIMEOUT = 180.0


# -- statistics -------------------------------------------------------------------


def percentile(values: Sequence[float], share: float) -> float | None:
    """Nearest-rank percentile (``share`` 0.5 is a median that is a sample)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]


def summary(values: Sequence[float]) -> dict[str, float | None]:
    """Median, p95 and max, in seconds; None for an empty sample."""
    if not values:
        return {"median": None, "p95": None, "max": None}
    return {
        "median": statistics.median(values),
        "p95": percentile(values, 0.95),
        "max": max(values),
    }


def interleaved(calls: Mapping[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Seconds per call of each contender, one call of each per round in
    turn, so drift on a busy machine hits them all alike. A few untimed
    calls first warm sessions, connections and caches."""
    for _ in range(min(10, rounds)):
        for call in calls.values():
            call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return times


# -- processes --------------------------------------------------------------------


def per_node_hour(value: float, nodes: int, seconds: float) -> float | None:
    """``value`` counted over ``seconds`` on ``nodes`` nodes, per node-hour
    (None when there was no window or no node)."""
    if seconds <= 0 or nodes <= 0:
        return None
    return value / (nodes * seconds / 3600.0)


def _psutil() -> Any:
    import psutil  # bmaas[lab]; imported here so `hwlab --help` stays fast

    return psutil


def _process_clock(pid: int) -> int:
    """Linux's CPU-time clock of process ``pid`` (``clock_getcpuclockid``:
    CPUCLOCK_SCHED of the whole thread group), which Python does not wrap."""
    return ((~pid) << 3) | 2


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used, every thread's,
    including threads that have ended, to the nanosecond: the process's own
    CPU-time clock. ``/proc``'s counters (psutil) move in clock ticks (10 ms):
    an idle sync with events uses a few ticks in minutes, so a steady window
    measured in ticks would be mostly rounding. Falls back to psutil where
    the clock cannot be read (not Linux)."""
    try:
        return time.clock_gettime(_process_clock(pid))
    except (OSError, AttributeError):
        times = _psutil().Process(pid).cpu_times()
        return float(times.user + times.system)


def _tree(pid: int) -> list[Any]:
    """Process ``pid`` and its live descendants (empty when it is gone)."""
    psutil = _psutil()
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def tree_cpu(pid: int) -> float:
    """CPU seconds (:func:`process_cpu`) of process ``pid`` and its live
    descendants: a client's whole cost. ``bmaas sync`` on a large fleet
    reads BMCs in one sweep worker process per core (:mod:`bmaas.sweep`);
    the events bench once counted only the parent at 10,000 nodes, and the
    polling row's CPU read 0.0035 s a node-hour, the workers' reads left out."""
    psutil = _psutil()
    total = 0.0
    for proc in _tree(pid):
        try:
            total += process_cpu(proc.pid)
        except psutil.NoSuchProcess:  # ended between the listing and the read
            continue
    return total


def process_footprint(pid: int) -> dict[str, float]:
    """What process ``pid`` and its live descendants hold now, summed:
    processes, threads, open file descriptors and resident MiB (empty when
    it is gone). A sharded sync's sweep workers are part of what it costs
    (:func:`tree_cpu`)."""
    psutil = _psutil()
    held = {"processes": 0, "threads": 0, "fds": 0, "rss_mib": 0.0}
    for proc in _tree(pid):
        try:
            with proc.oneshot():
                threads, fds, rss = proc.num_threads(), proc.num_fds(), proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        held["processes"] += 1
        held["threads"] += threads
        held["fds"] += fds
        held["rss_mib"] += rss / 2**20
    if not held["processes"]:
        return {}
    held["rss_mib"] = round(held["rss_mib"], 1)
    return held


@contextlib.contextmanager
def sampled(pid: int, every: float = 1.0) -> Iterator[dict[str, dict[str, float]]]:
    """Process ``pid``'s footprint (:func:`process_footprint`) while the
    block runs: ``start`` (on entry), ``end`` (on exit) and ``peak`` (the
    most of each, sampled every ``every`` seconds), in the yielded dict."""
    out: dict[str, dict[str, float]] = {"start": process_footprint(pid)}
    peak = dict(out["start"])
    done = threading.Event()

    def sample() -> None:
        while not done.wait(every):
            for key, value in process_footprint(pid).items():
                peak[key] = max(peak.get(key, value), value)

    sampler = threading.Thread(target=sample, name="bench footprint", daemon=True)
    sampler.start()
    try:
        yield out
    finally:
        done.set()
        sampler.join(every + 5)
        out["end"] = process_footprint(pid)
        for key, value in out["end"].items():
            peak[key] = max(peak.get(key, value), value)
        out["peak"] = peak


def process_tree_rss(pids: Iterable[int]) -> int:
    """Resident bytes of these processes and all their descendants."""
    psutil = _psutil()
    seen: set[int] = set()
    total = 0
    for pid in pids:
        for proc in _tree(pid):
            if proc.pid in seen:
                continue
            seen.add(proc.pid)
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                total += proc.memory_info().rss
    return total


def _kill_alive(pids: Iterable[int], what: str) -> list[int]:
    """Kill whichever of ``pids`` still runs; returns those it had to kill."""
    psutil = _psutil()
    killed = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            proc.kill()
            proc.wait(5)
            killed.append(pid)
        except psutil.NoSuchProcess:
            continue
        except psutil.TimeoutExpired:
            LOG.error("%s %d did not die when killed", what, pid)
    if killed:
        LOG.warning("%s outlived its run and was killed: %s", what, killed)
    return killed


def bmaas_console() -> str:
    """The ``bmaas`` console script a bench runs as an operator does: on the
    PATH, else beside this Python (a virtualenv not activated)."""
    return shutil.which("bmaas") or str(Path(sys.executable).with_name("bmaas"))


@contextlib.contextmanager
def running_lab(
    spec: LabSpec,
    state_dir: str | os.PathLike[str] | None = None,
    *,
    prefix: str = "hwlab-bench-",
    **options: Any,
) -> Iterator[Lab]:
    """A started lab in ``state_dir`` (none: a temporary directory named
    ``prefix``, removed after), stopped on the way out whatever happened;
    any worker process still alive after the stop is killed (and logged)."""
    with contextlib.ExitStack() as stack:
        if state_dir is None:
            state_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix)))
        lab = Lab(spec, Path(state_dir), **options)
        pids: list[int] = []
        try:
            lab.start(timeout=LAB_START_TIMEOUT)
            pids = lab.pids()
            yield lab
        finally:
            lab.stop()
            _kill_alive(pids, "lab worker")


@contextlib.contextmanager
def enrolled_lab(spec: LabSpec, prefix: str) -> Iterator[tuple[Lab, Path, list[str]]]:
    """A started lab (:func:`running_lab`) in a temporary directory named
    ``prefix``, its inventory enrolled in a new store there: the lab, the
    store's path and the nodes' names. Everything is removed on the way out."""
    from bmaas import inventory
    from bmaas.store import Store

    with (
        tempfile.TemporaryDirectory(prefix=prefix) as tmp,
        running_lab(spec, Path(tmp) / "lab") as lab,
    ):
        db = Path(tmp) / "bmaas.db"
        store = Store.open(str(db), create=True)
        try:
            inventory.enroll(store, inventory.load(str(lab.inventory_path)))
        finally:
            store.close()
        yield lab, db, [n["name"] for n in lab.inventory()["nodes"]]


@contextlib.contextmanager
def ironic_running(state_dir: Path, settings: Any, venv: Any) -> Iterator[tuple[Any, Any]]:
    """The harness's Ironic (:class:`~bmaas.hwlab.harness.ironic.IronicService`)
    in ``state_dir``, started and stopped on the way out: it and a connection."""
    from bmaas.hwlab.harness import ironic as harness

    service = harness.IronicService(state_dir, settings, venv=venv)
    try:
        service.start(timeout=180)
        yield service, service.connect()
    finally:
        service.stop()


def ironic_enroll(
    conn: Any, service: Any, entry: Mapping[str, Any], *, driver: str, prefix: str, **kw: Any
) -> Any:
    """The Ironic benches' enrolment: lab node ``entry`` in ``service`` with
    ``driver``, named ``<prefix>-<its name>``, its deploy images the
    service's (:func:`bmaas.hwlab.harness.ironic.enroll`; ``kw``: ``provide``)."""
    from bmaas.hwlab.harness import ironic as harness

    name = f"{prefix}-{entry['name']}"
    kernel, ramdisk = service.kernel, service.ramdisk
    return harness.enroll(
        conn, entry, driver=driver, name=name, kernel=kernel, ramdisk=ramdisk, **kw
    )


def _children() -> dict[int, str]:
    psutil = _psutil()
    out = {}
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            out[proc.pid] = " ".join(proc.cmdline())
    return out


@contextlib.contextmanager
def no_stray_children() -> Iterator[list[int]]:
    """Around a whole benchmark run: any child process started inside it and
    still alive at the end is killed, and its pid is appended to the yielded
    list (empty on a clean run). multiprocessing's resource tracker is left
    alone: it lives as long as this interpreter by design."""
    before = set(_children())
    killed: list[int] = []
    try:
        yield killed
    finally:
        stray = [
            pid
            for pid, cmd in _children().items()
            if pid not in before and "resource_tracker" not in cmd
        ]
        killed += _kill_alive(stray, "benchmark child process")


# -- counting calls ---------------------------------------------------------------


class CallCounter:
    """Thread-safe counts of calls by name, taken by wrapping methods of an
    *instance* (so calls a class makes on ``self`` are counted too)."""

    def __init__(self) -> None:
        self._counts: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def wrap(self, obj: Any, methods: Iterable[str], *, prefix: str = "") -> Any:
        """Count every call of ``methods`` on ``obj`` from now on; returns ``obj``."""
        for name in methods:
            original = getattr(obj, name, None)
            if original is None:
                continue
            setattr(obj, name, self._counted(original, prefix + name))
        return obj

    def _counted(self, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.add(name)
            return fn(*args, **kwargs)

        return counted

    def total(self, prefix: str = "") -> int:
        with self._lock:
            return sum(n for k, n in self._counts.items() if k.startswith(prefix))

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._counts.items()))
