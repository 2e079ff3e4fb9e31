"""How fast the CLI starts and how fast a big inventory enrolls.

    python scripts/bench_cli.py [--nodes 50000] [--runs 7] [--report docs/bench]

Measures, each as its own process, interleaved, median of ``--runs``:
``bmaas --help``, ``bmaas node list`` on 1000 enrolled nodes, ``hwlab status``
on a running 12-node lab, and next to them the floor (``python -c pass``) and
``python -c "import sqlalchemy"`` (what any command that opens the database
pays); then ``bmaas enroll`` of a generated ``--nodes`` inventory (half IPMI,
half Redfish, a network; 16 MB at 50,000 nodes) once. Wall time, CPU time
(user+sys of that process: what the machine's other load does not inflate)
and peak memory per process, with the core count and load average, so the
figures can be read on any machine. Goals (issue 17): every start < 0.3 s,
enroll of 50,000 nodes < 30 s and < 300 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def run_once(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(  # noqa: S603 - our own CLIs, arguments built here
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_mb": usage.ru_maxrss / 1024,
    }


def inventory(nodes: int) -> dict[str, Any]:
    docs = []
    for i in range(nodes):
        address = f"10.{i // 65536}.{(i // 256) % 256}.{i % 256}"
        node: dict[str, Any] = {
            "name": f"r{i // 40:04d}-n{i % 40:02d}",
            "resource_class": "baremetal",
            "properties": {"cpus": 32, "memory_mb": 262144, "local_gb": 480, "cpu_arch": "x86_64"},
            "network_segment": "rack1",
        }
        if i % 2:
            node["driver"] = "ipmi"
            node["driver_info"] = {
                "ipmi_address": address,
                "ipmi_username": "admin",
                "ipmi_password": "${BMC_PASSWORD}",
            }
        else:
            node["driver"] = "redfish"
            node["driver_info"] = {
                "redfish_address": f"https://{address}",
                "redfish_system_id": "/redfish/v1/Systems/1",
                "redfish_username": "admin",
                "redfish_password": "${BMC_PASSWORD}",
            }
        docs.append(node)
    segment = {
        "name": "rack1",
        "cidr": "10.128.0.0/16",
        "allocation_pools": [{"start": "10.128.0.10", "end": "10.128.0.250"}],
    }
    return {"networks": [{"name": "lab", "segments": [segment]}], "nodes": docs}


def write_inventory(nodes: int, path: Path) -> float:
    """Write the inventory from a separate process and return its size in MB:
    Linux carries a process's peak RSS across fork+exec, so a parent that
    built 300 MB of YAML would inflate every child's figure."""
    code = (
        "import sys, yaml; sys.path.insert(0, sys.argv[3]); import bench_cli; "
        "open(sys.argv[2], 'w').write(yaml.safe_dump("
        "bench_cli.inventory(int(sys.argv[1])), sort_keys=False))"
    )
    here = str(Path(__file__).parent)
    subprocess.run(  # noqa: S603
        [sys.executable, "-c", code, str(nodes), str(path), here], check=True
    )
    return path.stat().st_size / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=50_000, help="enroll this many nodes")
    parser.add_argument("--runs", type=int, default=7, help="runs per start-up command")
    parser.add_argument("--report", type=Path, help="write cli.md and cli.json here")
    args = parser.parse_args()
    bmaas = shutil.which("bmaas") or "bmaas"
    hwlab = shutil.which("hwlab") or "hwlab"
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "BMC_PASSWORD": "bench", "HWLAB_STATE_DIR": str(work / "lab")}
        small = work / "small.yaml"
        write_inventory(1000, small)
        db_small = str(work / "small.db")
        run_once([bmaas, "--db", db_small, "enroll", str(small)], env)
        up = [hwlab, "up", "--nodes", "12", "--seed", "1", "--state-dir", str(work / "lab")]
        subprocess.run(  # noqa: S603
            up,
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        try:
            commands = {
                "python -c pass (floor)": [sys.executable, "-c", "pass"],
                "python -c 'import sqlalchemy'": [sys.executable, "-c", "import sqlalchemy"],
                "bmaas --help": [bmaas, "--help"],
                "bmaas node list (1000 nodes)": [bmaas, "--db", db_small, "node", "list"],
                "hwlab status (12-node lab)": [hwlab, "status", "--state-dir", str(work / "lab")],
            }
            samples: dict[str, list[dict[str, float]]] = {name: [] for name in commands}
            for _ in range(args.runs):  # interleaved: load changes hit every command alike
                for name, cmd in commands.items():
                    samples[name].append(run_once(cmd, env))
        finally:
            down = [hwlab, "down", "--state-dir", str(work / "lab")]
            subprocess.run(  # noqa: S603
                down,
                check=False,
                env=env,
                stdout=subprocess.DEVNULL,
            )
        big = work / "big.yaml"
        size_mb = write_inventory(args.nodes, big)
        enroll = run_once([bmaas, "--db", str(work / "big.db"), "enroll", str(big)], env)
    starts = {
        name: {key: statistics.median(s[key] for s in runs) for key in runs[0]}
        for name, runs in samples.items()
    }
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cores": os.cpu_count(),
        "load_average_after": os.getloadavg()[0],
        "runs": args.runs,
        "starts": starts,
        "enroll": {"nodes": args.nodes, "file_mb": size_mb, **enroll},
        "goals": {"start_s": 0.3, "enroll_s": 30, "enroll_mb": 300},
    }
    print(markdown(report))
    if args.report:
        args.report.mkdir(parents=True, exist_ok=True)
        (args.report / "cli.json").write_text(json.dumps(report, indent=2) + "\n")
        (args.report / "cli.md").write_text(markdown(report) + "\n")


def markdown(r: dict[str, Any]) -> str:
    lines = [
        f"# CLI start and enroll ({r['date']}, {r['cores']} cores, "
        f"load average {r['load_average_after']:.1f} after the run)",
        "",
        "`python scripts/bench_cli.py --report docs/bench`; each command its own process, "
        f"median of {r['runs']} interleaved runs. CPU = user+sys of that process "
        "(the machine's other load inflates wall time, much less CPU time).",
        "",
        "| command | wall | CPU | peak memory | goal |",
        "|---|---|---|---|---|",
    ]
    for name, m in r["starts"].items():
        goal = "< 0.3 s" if name.startswith(("bmaas", "hwlab")) else "-"
        lines.append(
            f"| `{name}` | {m['wall_s']:.3f} s | {m['cpu_s']:.3f} s | "
            f"{m['peak_mb']:.0f} MB | {goal} |"
        )
    e = r["enroll"]
    lines.append(
        f"| `bmaas enroll` {e['nodes']:,} nodes ({e['file_mb']:.0f} MB YAML) | "
        f"{e['wall_s']:.1f} s | {e['cpu_s']:.1f} s | {e['peak_mb']:.0f} MB | < 30 s, < 300 MB |"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
