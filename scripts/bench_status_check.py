"""How long ``bmaas status check`` takes on a big IPMI lab with dead BMCs,
next to the same lab with every BMC alive, against its ``--deadline``.

    python scripts/bench_status_check.py --nodes 1000 --dead 0.05 --deadline 30

Brings up an hwlab lab of N IPMI BMCs (``bmaas.hwlab.lab.Lab``, sharded over worker
processes as the lab shards itself), enrolls it into a temporary database, and
runs ``bmaas status check --json`` the way an operator does: the console
script in a subprocess. Each round runs it twice, in alternating order: once
on the healthy lab, once with a share of the BMCs dead (an hwlab ``hang``
rule: no answer, ever, to anything). It prints the median wall time of each
(process start included), the time the check itself reports, the share of
the deadline used, and what the check found.

Bounded in time: the lab gets ``--start-timeout`` to come up, every command
``--deadline`` plus a margin; the lab is stopped whatever happens (Ctrl-C
included).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bmaas.hwlab.daemon import LabOptions, build_spec
from bmaas.hwlab.lab import DEFAULT_SHARD_SIZE, Lab

#: seconds a command may run past its own deadline before the bench calls it hung
MARGIN = 30.0


def bmaas(db: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("bmaas") or sys.exit("bmaas is not on PATH (activate the venv)")
    env = {**os.environ, "BMAAS_DB": str(db)}
    # S603: our own console script, arguments built here
    return subprocess.run(  # noqa: S603
        [exe, *args], capture_output=True, text=True, env=env, timeout=timeout, check=False
    )


def run_check(db: Path, deadline_s: float, workers: int) -> tuple[float, dict[str, Any]]:
    """Wall seconds for one ``bmaas status check``, and its JSON report."""
    start = time.perf_counter()
    done = bmaas(
        db,
        "status",
        "check",
        "--json",
        "--deadline",
        f"{deadline_s:g}",
        "--workers",
        str(workers),
        timeout=deadline_s + MARGIN,
    )
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1, 2) or not done.stdout.startswith("{"):
        sys.exit(f"status check did not run (exit {done.returncode}): {done.stderr.strip()}")
    return wall, json.loads(done.stdout)


def describe(report: dict[str, Any]) -> str:
    checks = {c["name"]: c for c in report["checks"]}
    verdicts = " ".join(f"{name}={c['result']}" for name, c in checks.items())
    failing = sum(len(v) for v in checks["bmc"]["nodes"].values())
    kinds = ", ".join(f"{k} {len(v)}" for k, v in sorted(checks["bmc"]["nodes"].items()))
    return f"{verdicts}; failing BMCs: {failing} ({kinds or 'none'})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--dead", type=float, default=0.05, help="share of BMCs that hang")
    parser.add_argument("--deadline", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7, help="which BMCs die")
    parser.add_argument("--shard-size", type=int, default=DEFAULT_SHARD_SIZE)
    parser.add_argument("--start-timeout", type=float, default=600.0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bmaas-bench-status-") as tmp:
        spec = build_spec(LabOptions(nodes=args.nodes, protocols="ipmi", seed=args.seed))
        lab = Lab(spec, Path(tmp) / "lab", shard_size=args.shard_size)
        began = time.perf_counter()
        try:
            lab.start(timeout=args.start_timeout)
            started = time.perf_counter() - began
            db = Path(tmp) / "bench.db"
            enrolled = bmaas(db, "enroll", str(lab.inventory_path), timeout=300)
            if enrolled.returncode != 0:
                sys.exit(f"enroll failed: {enrolled.stderr.strip()}")
            names = [node.name for node in spec.nodes]
            dead = sorted(random.Random(args.seed).sample(names, round(len(names) * args.dead)))
            walls: dict[str, list[float]] = {"healthy": [], "dead": []}
            inside: dict[str, list[float]] = {"healthy": [], "dead": []}
            last: dict[str, dict[str, Any]] = {}
            for round_ in range(args.rounds):
                order = ["healthy", "dead"] if round_ % 2 == 0 else ["dead", "healthy"]
                for variant in order:
                    lab.clear_faults()
                    if variant == "dead":
                        for name in dead:
                            lab.add_faults(name, [{"effect": "hang"}])
                    wall, report = run_check(db, args.deadline, args.workers)
                    walls[variant].append(wall)
                    inside[variant].append(report["elapsed"])
                    last[variant] = report
        finally:
            lab.stop()

    print(
        f"lab: {args.nodes} IPMI BMCs in {-(-args.nodes // args.shard_size)} "
        f"worker process(es), up in {started:.1f}s; dead: {len(dead)} ({args.dead:.0%}, hang); "
        f"deadline {args.deadline:g}s, workers {args.workers}, rounds {args.rounds}"
    )
    for variant in ("healthy", "dead"):
        wall = statistics.median(walls[variant])
        own = statistics.median(inside[variant])
        print(
            f"{variant:<8} wall {wall:6.2f}s (check's own {own:6.2f}s) = "
            f"{wall / args.deadline:5.1%} of the deadline; exit {last[variant]['exit_code']}; "
            f"{describe(last[variant])}"
        )
    ratio = statistics.median(walls["dead"]) / statistics.median(walls["healthy"])
    print(f"dead / healthy wall time: x{ratio:.2f}")


if __name__ == "__main__":
    main()
