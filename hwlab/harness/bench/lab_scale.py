"""lab-scale: what a lab of N emulated BMCs costs, and how much it serves.

For each size a lab (half IPMI, half Redfish) is started as ``hwlab up``
starts it (the ``bmaas.hwlab.daemon`` process and its workers, sharded as
:func:`bmaas.hwlab.lab.shard_count` says) and timed until it reports ready; then
the resident memory of all its processes is summed (psutil), and, up to
:data:`READS_UP_TO` nodes, client processes read power states through bmaas's
drivers, sessions reused, as fast as they can for a fixed time: requests per
second the lab served. (Above that, logging clients in to every BMC would
measure the clients, not the lab.)

The clients run on the same 2-core machine as the lab, so the rate is a
lower bound of what the lab serves (its workers share the cores with the
clients). This folds in what ``redfish_scale`` and ``ipmi_latency --bmcs``
measured for one server process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import yaml

from bmaas.hwlab.control import LabClient
from bmaas.hwlab.daemon import LabOptions
from bmaas.hwlab.harness.bench.common import process_tree_rss
from bmaas.hwlab.harness.bench.report import Report, Table, fmt_seconds
from bmaas.hwlab.harness.budgets import per_call
from bmaas.hwlab.pyexec import python_argv

__all__ = ["Options", "run"]

MIB = 1024 * 1024
#: the largest lab the clients read from (see the module docstring)
READS_UP_TO = 2000
#: seconds a lab of any size may take to report ready
READY_TIMEOUT = 300.0


@dataclasses.dataclass(frozen=True)
class Options:
    sizes: tuple[int, ...] = (100, 500, 1000)
    #: seconds of reads per size
    duration: float = 10.0
    clients: int = 2
    threads: int = 16
    seed: int = 1

    @classmethod
    def smoke(cls) -> Options:
        return cls(sizes=(20,), duration=1.0, clients=1, threads=4)


def _reader(
    entries: Sequence[dict[str, Any]], threads: int, duration: float, conn: Connection
) -> None:
    """A client process: ``threads`` threads, each reading its share of the
    nodes round-robin through reused drivers, from the parent's go for
    ``duration`` seconds. Sends back (reads, faults, seconds)."""
    from bmaas.faults import BmaasError
    from bmaas.registry import build_driver

    shares = [entries[i::threads] for i in range(threads)]
    drivers = [[build_driver(e["name"], e["driver"], e["driver_info"]) for e in s] for s in shares]
    counts = [[0, 0] for _ in range(threads)]
    conn.send("ready")
    conn.recv()  # go
    start = time.monotonic()
    until = start + duration

    def loop(index: int) -> None:
        mine = drivers[index]
        i = 0
        while mine and time.monotonic() < until:
            try:
                one = mine[i % len(mine)]
                one.get_power_state(deadline=per_call(one))
                counts[index][0] += 1
            except BmaasError:
                counts[index][1] += 1
            i += 1

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    took = time.monotonic() - start
    for share in drivers:
        for driver in share:
            driver.close()
    conn.send((sum(c[0] for c in counts), sum(c[1] for c in counts), took))


def _throughput(entries: list[dict[str, Any]], options: Options) -> dict[str, float]:
    ctx = multiprocessing.get_context("spawn")
    pipes, procs = [], []
    for i in range(options.clients):
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_reader,
            args=(entries[i :: options.clients], options.threads, options.duration, child),
            name=f"bench-client-{i}",
        )
        proc.start()
        child.close()
        pipes.append(parent)
        procs.append(proc)
    try:
        for pipe in pipes:  # every client logged in before any reads
            if not pipe.poll(120) or pipe.recv() != "ready":
                raise RuntimeError("a benchmark client did not get ready")
        for pipe in pipes:
            pipe.send("go")
        results = []
        for pipe in pipes:
            if not pipe.poll(options.duration + 60):
                raise RuntimeError("a benchmark client did not finish")
            results.append(pipe.recv())
    finally:
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
    reads = sum(r[0] for r in results)
    faults = sum(r[1] for r in results)
    took = max(r[2] for r in results)
    return {"reads": reads, "faults": faults, "seconds": took, "reads_per_s": reads / took}


@contextlib.contextmanager
def _daemon_lab(size: int, seed: int, state_dir: str) -> Iterator[tuple[int, float]]:
    """``hwlab up --nodes size``'s daemon, run directly: (its pid, seconds
    until ready). Stopped through its control API on the way out."""
    options = LabOptions(nodes=size, protocols="mixed", seed=seed, start_timeout=READY_TIMEOUT)
    lab_json = Path(state_dir) / "lab.json"
    start = time.perf_counter()
    daemon = subprocess.Popen(  # noqa: S603 - our own module, no shell
        python_argv("-m", "bmaas.hwlab.daemon", state_dir, options.to_json()),
        stdin=subprocess.DEVNULL,
    )
    try:
        info: dict[str, Any] = {}
        while info.get("state") != "ready":
            if daemon.poll() is not None or info.get("state") == "failed":
                raise RuntimeError(f"the lab did not start: {info.get('error', daemon.returncode)}")
            if time.perf_counter() - start > READY_TIMEOUT:
                raise RuntimeError(f"the lab was not ready within {READY_TIMEOUT:g}s")
            time.sleep(0.05)
            with contextlib.suppress(OSError, ValueError):
                info = json.loads(lab_json.read_text())
        yield daemon.pid, time.perf_counter() - start
    finally:
        with contextlib.suppress(Exception):
            LabClient.from_state_dir(state_dir).shutdown()
        try:
            daemon.wait(60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait(10)


def run(options: Options, *, progress: Callable[[str], None] = lambda _: None) -> Report:
    sizes: dict[str, dict[str, Any]] = {}
    for size in options.sizes:
        with (
            tempfile.TemporaryDirectory(prefix="hwlab-bench-scale-") as tmp,
            _daemon_lab(size, options.seed, tmp) as (pid, up),
        ):
            workers = len(LabClient.from_state_dir(tmp).status()["worker_pids"])
            rss = process_tree_rss([pid])
            served: dict[str, Any] = {"reads": 0, "faults": 0, "seconds": 0.0, "reads_per_s": None}
            loaded_rss = None
            if size <= READS_UP_TO:
                inventory = yaml.safe_load((Path(tmp) / "inventory.yaml").read_text())
                served = _throughput(inventory["nodes"], options)
                loaded_rss = process_tree_rss([pid]) / MIB
        sizes[str(size)] = {
            "start_s": up,
            "workers": workers,
            "rss_mib": rss / MIB,
            "rss_after_reads_mib": loaded_rss,
            "kib_per_node": rss / 1024 / size,
            **served,
        }
        rate = served["reads_per_s"]
        progress(
            f"{size} nodes: up in {up:.1f} s, {rss / MIB:.0f} MiB"
            + (f", {rate:.0f} reads/s" if rate is not None else "")
        )
    return _report(options, sizes)


def _report(options: Options, sizes: dict[str, dict[str, Any]]) -> Report:
    rows = [
        [
            size,
            r["workers"],
            fmt_seconds(r["start_s"]),
            f"{r['rss_mib']:.0f} MiB",
            f"{r['kib_per_node']:.0f} KiB",
            "-" if r["rss_after_reads_mib"] is None else f"{r['rss_after_reads_mib']:.0f} MiB",
            "-" if r["reads_per_s"] is None else f"{r['reads_per_s']:,.0f}",
            r["faults"],
        ]
        for size, r in sizes.items()
    ]
    largest = sizes[str(max(options.sizes))]
    xs = [int(s) for s in sizes]
    marginal = None
    if len(xs) > 1:  # least-squares slope: what one more node costs, interpreters aside
        ys = [sizes[str(x)]["rss_mib"] * 1024 for x in xs]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        marginal = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
            (x - mx) ** 2 for x in xs
        )
    return Report(
        scenario="lab-scale",
        title="Lab scale: start time, memory and requests served",
        params=dataclasses.asdict(options),
        tables=[
            Table(
                "one lab per size (half IPMI, half Redfish)",
                [
                    "nodes",
                    "workers",
                    "start",
                    "RSS, all lab processes",
                    "per node (with interpreters)",
                    "RSS after reads",
                    "power reads/s",
                    "faults",
                ],
                rows,
            )
        ],
        headline={
            "largest lab: reads per second": None
            if largest["reads_per_s"] is None
            else round(largest["reads_per_s"], 1),
            "largest lab: start seconds": round(largest["start_s"], 2),
            "largest lab: KiB per node": round(largest["kib_per_node"], 1),
            "marginal KiB per node": None if marginal is None else round(marginal, 1),
        },
        notes=[
            "start: from starting the hwlab daemon until it reports ready (every BMC listens, "
            "inventory written)",
            "RSS: psutil, the hwlab daemon, its workers and every other child; the benchmark "
            "process not included",
            f"reads: only for labs of up to {READS_UP_TO} nodes ('-' above)",
            f"reads: {options.clients} client process(es) x {options.threads} threads, bmaas "
            f"drivers with reused sessions, {options.duration:g} s per size, on the same cores "
            "as the lab (a lower bound)",
        ],
        data={"sizes": sizes},
        plot=plot,
    )


def plot(fig: Any, report: Report) -> None:
    sizes = report.data["sizes"]
    xs = [int(s) for s in sizes]
    left, middle, right = fig.subplots(1, 3)
    left.plot(xs, [sizes[str(x)]["start_s"] for x in xs], "o-", color="#1b7837")
    left.set_ylabel("seconds until every BMC listens")
    left.set_title("start time")
    middle.plot(xs, [sizes[str(x)]["rss_mib"] for x in xs], "o-", color="#2166ac", label="idle")
    middle.plot(
        xs,
        [sizes[str(x)]["rss_after_reads_mib"] or float("nan") for x in xs],
        "s--",
        color="#67a9cf",
        label="after reads",
    )
    for x in xs:  # each worker is an interpreter: most of the memory
        workers = sizes[str(x)]["workers"]
        middle.annotate(
            f"{workers} worker{'s' if workers > 1 else ''}",
            (x, sizes[str(x)]["rss_mib"]),
            textcoords="offset points",
            xytext=(4, -12),
            fontsize=7,
        )
    middle.set_ylabel("MiB resident, all lab processes")
    middle.set_title("memory")
    middle.legend(fontsize=8)
    right.bar(
        [str(x) for x in xs], [sizes[str(x)]["reads_per_s"] or 0 for x in xs], color="#d95f02"
    )
    right.set_ylabel("power reads per second")
    right.set_title("requests served")
    for ax in (left, middle, right):
        ax.set_xlabel("nodes in the lab")
        ax.grid(alpha=0.3)
    for ax in (left, middle):
        ax.set_xticks(xs)
        ax.set_ylim(bottom=0)
    fig.suptitle(report.title)
    fig.tight_layout()
