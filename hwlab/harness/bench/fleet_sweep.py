"""fleet-sweep: the power state of every node, as a power-state sync reads it.

For each fleet size a lab of that many nodes (half IPMI, half Redfish) is
started once and enrolled into a fresh store; then, in alternating order
round after round, only the sweeps are timed:

* **bmaas**: :func:`bmaas.ops.run_on_nodes` reading every node (both
  protocols) with its default 32 workers and default deadline, a fresh
  driver (login, read, logout) per node, as ``bmaas power status --all`` and
  ``bmaas sync`` do;
* **bmaas, IPMI half**: the same, on the IPMI nodes only (the same nodes
  ipmitool reads);
* **ipmitool x 8**: one ``ipmitool ... power status`` process per IPMI node,
  8 at a time: Ironic's default power-sync workers and its ipmitool options
  (see :mod:`hwlab.harness.bench.ipmitool`);
* **bmaas core (fake drivers)**: ``run_on_nodes`` over as many in-process
  fake drivers: what bmaas itself costs per node, with no network.

The figures are medians over the rounds; nodes per second and the ratio
bmaas / ipmitool are computed from them. Clients and lab share this
machine's cores, as they would not in production: the absolute rates are
lower bounds; the ratios are measured under the same load.
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from bmaas import credentials
from bmaas import inventory as inventory_mod
from bmaas.ops import DEFAULT_WORKERS, driver_factory, run_on_nodes
from bmaas.store import Store
from bmaas.store.records import NodeRecord
from hwlab.harness.bench import ipmitool
from hwlab.harness.bench.common import running_lab
from hwlab.harness.bench.report import Report, Table, fmt_ratio, fmt_seconds
from hwlab.labspec import generate

__all__ = ["Options", "run"]

CONTENDERS = ("bmaas", "bmaas, IPMI half", "ipmitool x 8", "bmaas core (fake drivers)")


@dataclasses.dataclass(frozen=True)
class Options:
    sizes: tuple[int, ...] = (100, 300, 1000)
    rounds: int = 3
    workers: int = DEFAULT_WORKERS
    seed: int = 1

    @classmethod
    def smoke(cls) -> Options:
        return cls(sizes=(20,), rounds=1)


def _bmaas_sweep(records: Sequence[NodeRecord], workers: int) -> tuple[float, int]:
    factory = driver_factory()
    start = time.perf_counter()
    results = run_on_nodes(records, lambda d: d.get_power_state(), factory=factory, workers=workers)
    return time.perf_counter() - start, sum(1 for r in results if not r.ok)


def _jobs(records: Sequence[NodeRecord]) -> list[ipmitool.Job]:
    jobs = []
    for record in records:
        info = credentials.resolve_driver_info(record.driver_info, node=record.name)
        jobs.append(ipmitool.ipmitool_job(info, password=info["ipmi_password"].reveal()))
    return jobs


def _enroll_fakes(store: Store, count: int, workdir: Path) -> None:
    path = workdir / "fakes.yaml"
    nodes = [{"name": f"fake-{i:04d}", "driver": "fake"} for i in range(count)]
    path.write_text(yaml.safe_dump({"nodes": nodes}), encoding="utf-8")
    inventory_mod.enroll(store, inventory_mod.load(path))


def _one_size(size: int, options: Options, workdir: Path) -> dict[str, Any]:
    spec = generate(size, protocols="mixed", seed=options.seed)
    with running_lab(spec, workdir / "lab") as lab:
        store = Store.open(str(workdir / "bmaas.db"))
        try:
            inventory_mod.enroll(store, inventory_mod.load(lab.inventory_path))
            _enroll_fakes(store, size, workdir)
            lab_nodes = [n for n in store.nodes() if n.driver != "fake"]
            ipmi_nodes = [n for n in lab_nodes if n.driver == "ipmi"]
            fakes = [n for n in store.nodes() if n.driver == "fake"]
            jobs = _jobs(ipmi_nodes)
            contenders: dict[str, tuple[int, Callable[[], tuple[float, int]]]] = {
                "bmaas": (len(lab_nodes), lambda: _bmaas_sweep(lab_nodes, options.workers)),
                "bmaas, IPMI half": (
                    len(ipmi_nodes),
                    lambda: _bmaas_sweep(ipmi_nodes, options.workers),
                ),
                "ipmitool x 8": (len(ipmi_nodes), lambda: ipmitool.sweep(jobs)),
                "bmaas core (fake drivers)": (
                    len(fakes),
                    lambda: _bmaas_sweep(fakes, options.workers),
                ),
            }
            # Untimed: driver imports and first connections are not a sweep's cost.
            _bmaas_sweep(lab_nodes[:8] + fakes[:8], options.workers)
            times: dict[str, list[float]] = {name: [] for name in contenders}
            failed: dict[str, int] = dict.fromkeys(contenders, 0)
            names = list(contenders)
            for round_ in range(options.rounds):
                for name in names if round_ % 2 == 0 else names[::-1]:
                    seconds, failures = contenders[name][1]()
                    times[name].append(seconds)
                    failed[name] += failures
        finally:
            store.close()
    out = {}
    for name, (nodes, _) in contenders.items():
        median = statistics.median(times[name])
        out[name] = {
            "nodes": nodes,
            "median_s": median,
            "times_s": times[name],
            "nodes_per_s": nodes / median if median else None,
            "failed_calls": failed[name],
        }
    return out


def run(options: Options, *, progress: Callable[[str], None] | None = None) -> Report:
    ipmitool.require_ipmitool()
    sizes: dict[int, dict[str, Any]] = {}
    for size in options.sizes:
        with tempfile.TemporaryDirectory(prefix="hwlab-bench-sweep-") as tmp:
            sizes[size] = _one_size(size, options, Path(tmp))
        if progress is not None:
            progress(f"{size} nodes: done")
    return _report(options, sizes)


def _report(options: Options, sizes: dict[int, dict[str, Any]]) -> Report:
    rows = []
    headline: dict[str, float | None] = {}
    for size, result in sizes.items():
        tool = result["ipmitool x 8"]["nodes_per_s"]
        for name in CONTENDERS:
            r = result[name]
            ratio = r["nodes_per_s"] / tool if tool and r["nodes_per_s"] else None
            rows.append(
                [
                    size,
                    name,
                    r["nodes"],
                    fmt_seconds(r["median_s"]),
                    f"{r['nodes_per_s']:,.0f}",
                    # the core row has no network: a ratio to ipmitool would mean nothing
                    fmt_ratio(ratio) if name in ("bmaas", "bmaas, IPMI half") else "—",
                    r["failed_calls"],
                ]
            )
        ours = result["bmaas, IPMI half"]["nodes_per_s"]
        headline[f"{size} nodes: bmaas IPMI half / ipmitool x 8 (nodes/s)"] = (
            round(ours / tool, 2) if tool else None
        )
        headline[f"{size} nodes: bmaas all / ipmitool x 8 (nodes/s)"] = (
            round(result["bmaas"]["nodes_per_s"] / tool, 2) if tool else None
        )
    notes = [
        f"median of {options.rounds} round(s), contenders in alternating order; "
        f"bmaas with {options.workers} workers, ipmitool with 8 (Ironic's power-sync workers)",
        "each lab started once per size, only the sweeps timed; lab and clients share the machine",
        "ipmitool: -I lanplus -L ADMINISTRATOR -R 1 -N 1 power status, one process per node",
    ]
    return Report(
        scenario="fleet-sweep",
        title="Fleet sweep: power status of every node",
        params=dataclasses.asdict(options),
        tables=[
            Table(
                "sweep time by fleet size (lab: half IPMI, half Redfish)",
                ["fleet", "contender", "nodes read", "median", "nodes/s", "vs ipmitool", "failed"],
                rows,
            )
        ],
        headline=headline,
        notes=notes,
        data={"sizes": {str(k): v for k, v in sizes.items()}},
        plot=plot,
    )


def plot(fig: Any, report: Report) -> None:
    """Left: sweep time against fleet size; right: nodes per second."""
    sizes = report.data["sizes"]
    xs = [int(s) for s in sizes]
    left, right = fig.subplots(1, 2)
    styles = {
        "bmaas": ("#1b7837", "o-", "bmaas, every node"),
        "bmaas, IPMI half": ("#5aae61", "s--", "bmaas, IPMI half"),
        "ipmitool x 8": ("#d95f02", "^-", "ipmitool x 8 workers, IPMI half"),
        "bmaas core (fake drivers)": ("0.5", "x:", "bmaas core, fake drivers (no network)"),
    }
    for name, (colour, style, label) in styles.items():
        secs = [sizes[str(x)][name]["median_s"] for x in xs]
        rate = [sizes[str(x)][name]["nodes_per_s"] for x in xs]
        left.plot(xs, secs, style, color=colour, label=label)
        right.plot(xs, rate, style, color=colour, label=label)
    left.set_xlabel("nodes in the lab (half IPMI, half Redfish)")
    left.set_ylabel("seconds per sweep (median)")
    left.set_title("time grows with the fleet")
    right.set_xlabel("nodes in the lab")
    right.set_ylabel("nodes read per second")
    right.set_yscale("log")
    right.set_title("throughput")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.set_xticks(xs)
    left.legend(fontsize=8)
    fig.suptitle(report.title)
    fig.tight_layout()
