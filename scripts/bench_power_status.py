"""How long ``bmaas power status --all`` takes, next to ``ipmitool`` doing the same.

    # the core's own overhead: N in-process fake nodes, no network
    python scripts/bench_power_status.py --fake 1000

    # a real fleet (e.g. the inventory an hwlab lab writes), with the same
    # sweep done by one `ipmitool chassis power status` process per IPMI node
    python scripts/bench_power_status.py --inventory lab/inventory.yaml --ipmitool

Each round runs every contender once, in alternating order, so they see the
same machine load; the script prints the median of ``--rounds`` rounds and
the ratios. Each contender uses ``--workers`` parallel workers. ``bmaas`` is
run as an operator runs it: the console script in a subprocess, on a
temporary database the inventory was enrolled into.

Passwords reach ipmitool through ``-E`` (the ``IPMI_PASSWORD`` environment
variable), never on its command line, where ``ps`` would show them.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from bmaas import credentials
from bmaas.store import Store

CALL_TIMEOUT = 30.0


def _bmaas(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("bmaas") or sys.exit("bmaas is not on PATH (activate the venv)")
    env = {**os.environ, "BMAAS_DB": str(db)}
    # S603: our own console script, arguments built here
    return subprocess.run([exe, *args], capture_output=True, text=True, env=env, check=False)  # noqa: S603


def bmaas_sweep(db: Path, workers: int) -> tuple[float, int]:
    """Seconds for `bmaas power status --all`, and how many nodes failed."""
    start = time.perf_counter()
    out = _bmaas(db, "power", "status", "--all", "--json", "--workers", str(workers))
    elapsed = time.perf_counter() - start
    if out.returncode not in (0, 1):
        sys.exit(f"bmaas failed: {out.stderr.strip()}")
    return elapsed, int(json.loads(out.stdout)["failed"])


def ipmitool_sweep(store: Store, workers: int) -> tuple[float, int]:
    """Seconds for one `ipmitool ... chassis power status` per IPMI node."""
    exe = shutil.which("ipmitool") or sys.exit("ipmitool is not installed")
    jobs = []
    for node in store.nodes(driver="ipmi"):
        info = credentials.resolve_driver_info(node.driver_info, node=node.name)
        argv = [exe, "-I", "lanplus", "-H", str(info["ipmi_address"])]
        argv += ["-p", str(info.get("ipmi_port", 623)), "-U", str(info.get("ipmi_username", ""))]
        argv += ["-E", "-N", "1", "-R", "1", "chassis", "power", "status"]
        env = {**os.environ, "IPMI_PASSWORD": info["ipmi_password"].reveal()}
        jobs.append((argv, env))

    def one(job: tuple[list[str], dict[str, str]]) -> bool:
        argv, env = job
        try:
            # S603: ipmitool from PATH, argv built from the enrolled inventory
            done = subprocess.run(argv, capture_output=True, env=env, timeout=CALL_TIMEOUT)  # noqa: S603
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(one, jobs))
    return time.perf_counter() - start, results.count(False)


def fake_inventory(path: Path, count: int) -> Path:
    nodes = [{"name": f"bench-{i:04d}", "driver": "fake"} for i in range(count)]
    path.write_text(yaml.safe_dump({"nodes": nodes}))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--fake", type=int, metavar="N", help="N in-process fake nodes")
    source.add_argument("--inventory", type=Path, help="an inventory file (e.g. a lab's)")
    parser.add_argument("--ipmitool", action="store_true", help="also time ipmitool on IPMI nodes")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=32)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bmaas-bench-") as tmp:
        db = Path(tmp) / "bench.db"
        inventory = args.inventory or fake_inventory(Path(tmp) / "inv.yaml", args.fake)
        enrolled = _bmaas(db, "enroll", str(inventory))
        if enrolled.returncode != 0:
            sys.exit(f"enroll failed: {enrolled.stderr.strip()}")
        store = Store.open(str(db))
        nodes = store.nodes()
        ipmi = [n for n in nodes if n.driver == "ipmi"]
        contenders: dict[str, Callable[[], tuple[float, int]]] = {
            "bmaas power status --all": lambda: bmaas_sweep(db, args.workers)
        }
        if args.ipmitool:
            if not ipmi:
                sys.exit("--ipmitool: the inventory has no ipmi nodes")
            contenders[f"ipmitool x {len(ipmi)} (IPMI half)"] = lambda: ipmitool_sweep(
                store, args.workers
            )
        times: dict[str, list[float]] = {name: [] for name in contenders}
        failures: dict[str, int] = dict.fromkeys(contenders, 0)
        names = list(contenders)
        for round_ in range(args.rounds):
            for name in names if round_ % 2 == 0 else reversed(names):
                elapsed, failed = contenders[name]()
                times[name].append(elapsed)
                failures[name] += failed
        store.close()

    drivers = sorted({n.driver for n in nodes})
    print(
        f"nodes: {len(nodes)} ({', '.join(drivers)}), ipmi: {len(ipmi)}, "
        f"workers: {args.workers}, rounds: {args.rounds}"
    )
    medians = {name: statistics.median(values) for name, values in times.items()}
    base = medians[names[0]]
    for name in names:
        per_node = medians[name] / max(1, len(ipmi) if "ipmitool" in name else len(nodes))
        print(
            f"{name:<34} median {medians[name]:7.3f}s  {per_node * 1000:6.2f} ms/node  "
            f"x{medians[name] / base:5.2f}  failed calls: {failures[name]}"
        )


if __name__ == "__main__":
    main()
