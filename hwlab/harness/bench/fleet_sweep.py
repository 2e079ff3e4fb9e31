"""fleet-sweep: the power state of every node, as a power-state sync reads it.

For each fleet size a lab of that many nodes (half IPMI, half Redfish) is
started once and enrolled into a fresh store; then, round after round in
alternating order, only the sweeps are measured:

* **bmaas IPMI / Redfish, cold**: :func:`bmaas.ops.run_on_nodes` with a fresh
  driver per node (login, read, logout), as a one-shot ``bmaas power status``;
* **bmaas IPMI / Redfish, steady**: the same nodes through a
  :class:`bmaas.pool.DriverPool`, each timed pass right after
  :data:`WARM_PASSES` untimed ones (the first logs in; the second opens the
  lean Redfish read's own connection, as a sync's second pass does): the
  timed pass reuses sessions and connections, as every later pass of
  ``bmaas sync --interval`` does (shorter than the BMC's idle timeout);
* **bmaas all, steady, P processes**: every lab node through a
  :class:`bmaas.sweep.ShardedSweeper` with one process per core (pooled too);
* **bare sushy x 8**: the same Redfish nodes through plain sushy, one
  ``sushy.Sushy`` client (session auth, logged in by an untimed first pass)
  and its ``System`` kept per node, ``system.refresh()`` and
  ``power_state`` per read, 8 threads: the baseline the lean Redfish read is
  measured against, side by side in the same run;
* **ipmitool x 8**: one ``ipmitool ... power status`` process per IPMI node,
  8 at a time: Ironic's default power-sync workers and its ipmitool options
  (see :mod:`bmaas.hwlab.harness.bench.ipmitool`).

Besides wall time and nodes per second, each row has the **client CPU time
per node read**: user + system seconds of the client's processes (this
process and its sweep workers, through ``getrusage``/psutil; the ipmitool
processes, through ``RUSAGE_CHILDREN``), never the lab's. Nodes per second
depends on how many cores the clients get beside the lab; CPU per read does
not, so the ipmitool comparison holds on any machine. The core count is in
the report.

After the rounds, the **hung-BMC pass ratio**: one pooled pass over every
node, healthy, then ``HUNG`` of them (one IPMI, one Redfish) made to hang
(hwlab's ``hang`` effect) and two more pooled passes timed: each hung pass's
wall time over the healthy one's. Reads per login come from the pools.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import gc
import os
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from bmaas import credentials
from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver, PowerState
from bmaas.hwlab.harness.bench import hung_sync, ipmitool, sushy_poll
from bmaas.hwlab.harness.bench.common import enrolled_lab
from bmaas.hwlab.harness.bench.report import Report, Table, fmt_ratio, fmt_seconds, ratio, rounded
from bmaas.hwlab.harness.budgets import per_call
from bmaas.hwlab.labspec import generate
from bmaas.ops import DEFAULT_WORKERS, driver_factory, run_on_nodes
from bmaas.pool import DriverPool, idle_for_interval
from bmaas.store import Store
from bmaas.store.records import NodeRecord
from bmaas.sweep import ShardedSweeper

__all__ = ["GOALS", "Options", "read_power", "run"]

IPMI_COLD, IPMI_STEADY = "bmaas IPMI, cold", "bmaas IPMI, steady"
REDFISH_COLD, REDFISH_STEADY = "bmaas Redfish, cold", "bmaas Redfish, steady"
IPMI_SHARDED, ALL_SHARDED = "bmaas IPMI, steady, sharded", "bmaas all, steady, sharded"
IPMITOOL = "ipmitool x 8"
BARE_SUSHY = "bare sushy x 8"
#: nodes made to hang for the hung-BMC pass ratio (one of each protocol)
HUNG = 2
CONTENDERS = (
    IPMI_COLD,
    IPMI_STEADY,
    IPMI_SHARDED,
    REDFISH_COLD,
    REDFISH_STEADY,
    ALL_SHARDED,
    BARE_SUSHY,
    IPMITOOL,
)
#: untimed passes before each steady row's timed one: the first logs in (and
#: its read is the login's own System GET); the second opens the lean
#: Redfish read's kept connection (:mod:`bmaas.drivers.redfish.lean`). Only from
#: the third on is a pass what a sync repeats every interval.
WARM_PASSES = 2

#: the steady rows' pool idle: passes up to 5 min apart, as `bmaas sync
#: --interval 300` keeps them (drivers' own ``session_idle`` still caps it)
STEADY_IDLE = idle_for_interval(300.0)
#: the issue's targets (issue 17), shown beside the figures
GOALS = {
    "ipmi_cpu_ms": 0.3,
    "ipmi_cpu_vs_ipmitool": 0.1,
    "redfish_cpu_ms": 1.5,
    "ipmi_rate_vs_ipmitool": 5.0,
    # issue 26
    "redfish_lean_cpu_ms": 0.5,
    "redfish_cpu_vs_sushy": 1 / 3,
}


@dataclasses.dataclass(frozen=True)
class Options:
    sizes: tuple[int, ...] = (100, 300, 1000)
    rounds: int = 3
    workers: int = DEFAULT_WORKERS
    #: sweep processes for the sharded rows (0: one per core)
    processes: int = 0
    seed: int = 1
    #: with a share of hung BMCs (0.05: 5 %), also the sync's pass ratio
    #: once they are fenced (:mod:`bmaas.hwlab.harness.bench.hung_sync`); 0: not run
    hung_fraction: float = 0.0

    @classmethod
    def smoke(cls) -> Options:
        return cls(sizes=(20,), rounds=1, processes=2, hung_fraction=0.1)


#: seconds one bench pass may take (its budget: the bench is where it starts)
PASS_BUDGET = 600.0


def _pass() -> Deadline:
    """One pass's budget: a node's turn waits for its pooled driver at most this."""
    return Deadline.after(PASS_BUDGET)


def read_power(driver: BMCDriver) -> PowerState:
    """The operation every bmaas row runs (module level: it crosses processes)."""
    return driver.get_power_state(deadline=per_call(driver))


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _children_cpu() -> float:
    """CPU of children that ended (ipmitool); running lab workers are not in it."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _pids_cpu(pids: Sequence[int]) -> float:
    import psutil

    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def _threads_cpu(pids: Sequence[int]) -> float:
    """CPU seconds of the running threads of ``pids``, to the nanosecond
    (``/proc/<pid>/task/<tid>/schedstat``; psutil's process times count
    clock ticks, 10 ms, too coarse for a lab pass of a few tens of ms).
    For long-lived threads only (a lab worker's servers): the time of a
    thread that ended is not in it. Falls back to :func:`_pids_cpu`."""
    total = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return _pids_cpu(pids)
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as stat:
                    total += int(stat.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # the thread ended meanwhile
    return total / 1e9


def _settle() -> None:
    """A full collection of this process's heap before every timed pass, for
    every contender alike: each row's warm passes leave objects behind that
    the next full collection walks, and without this the timed pass of
    whichever row comes next paid for them (0.8 s at 5,000 Redfish nodes).
    ``bmaas sync`` settles its own heap between passes (:mod:`bmaas.heap`)."""
    gc.collect()


#: one measured sweep: wall seconds, client CPU seconds, failed reads, lab CPU seconds
Measured = tuple[float, float, int, float]
#: the lab's CPU seconds so far (its worker processes: every BMC it serves)
LabCpu = Callable[[], float]


def _in_process(
    records: Sequence[NodeRecord], workers: int, pool: DriverPool | None, lab_cpu: LabCpu
) -> Callable[[], Measured]:
    factory = driver_factory()

    def sweep() -> Measured:
        if pool is not None:
            # Untimed warm passes: sessions logged in (again, if they idled
            # out while the other contenders ran), connections opened.
            for _ in range(WARM_PASSES):
                run_on_nodes(
                    records,
                    read_power,
                    factory=factory,
                    workers=workers,
                    pool=pool,
                    deadline=_pass(),
                )
        _settle()
        lab, cpu, start = lab_cpu(), _self_cpu(), time.perf_counter()
        results = run_on_nodes(
            records, read_power, factory=factory, workers=workers, pool=pool, deadline=_pass()
        )
        wall = time.perf_counter() - start
        return wall, _self_cpu() - cpu, sum(1 for r in results if not r.ok), lab_cpu() - lab

    return sweep


def _sharded(
    records: Sequence[NodeRecord], sweeper: ShardedSweeper, lab_cpu: LabCpu
) -> Callable[[], Measured]:
    def sweep() -> Measured:
        for _ in range(WARM_PASSES):  # untimed, as in _in_process
            sweeper.run(records, read_power, deadline=_pass())
        _settle()  # this process; each worker settles its own (bmaas.heap)
        pids = sweeper.pids()
        lab, cpu = lab_cpu(), _self_cpu() + _pids_cpu(pids)
        start = time.perf_counter()
        results = sweeper.run(records, read_power, deadline=_pass())
        wall = time.perf_counter() - start
        used = _self_cpu() + _pids_cpu(pids) - cpu
        return wall, used, sum(1 for r in results if not r.ok), lab_cpu() - lab

    return sweep


def _ipmitool(records: Sequence[NodeRecord], lab_cpu: LabCpu) -> Callable[[], Measured]:
    jobs = []
    for record in records:
        info = credentials.resolve_driver_info(record.driver_info, node=record.name)
        jobs.append(ipmitool.ipmitool_job(info, password=info["ipmi_password"].reveal()))

    def sweep() -> Measured:
        _settle()
        lab, cpu = lab_cpu(), _children_cpu()
        wall, failed = ipmitool.sweep(jobs)
        return wall, _children_cpu() - cpu, failed, lab_cpu() - lab

    return sweep


def _bare_sushy(
    records: Sequence[NodeRecord], workers: int, lab_cpu: LabCpu
) -> tuple[Callable[[], Measured], Callable[[], None]]:
    """Plain sushy, as a power sync built on it reads
    (:class:`~bmaas.hwlab.harness.bench.sushy_poll.Kept`: clients made, and
    logged in, by the first untimed pass). Also returns what logs them out,
    to call while the lab still runs."""
    kept, nodes = sushy_poll.Kept(), [sushy_poll.node_job(r) for r in records]

    def sweep() -> Measured:
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            for _ in range(WARM_PASSES):  # untimed: clients made, sessions kept
                list(pool.map(kept.read, nodes))
            _settle()
            lab, cpu, start = lab_cpu(), _self_cpu(), time.perf_counter()
            ok = list(pool.map(kept.read, nodes))
            wall = time.perf_counter() - start
        return wall, _self_cpu() - cpu, ok.count(False), lab_cpu() - lab

    return sweep, kept.close


def _hung_ratio(lab: Any, every: Sequence[NodeRecord], workers: int) -> dict[str, Any]:
    """Wall time of pooled passes with ``HUNG`` hung BMCs over a healthy one's."""
    factory = driver_factory()
    pool = DriverPool()
    hung = [
        next(n for n in every if n.driver == "ipmi"),
        next(n for n in every if n.driver == "redfish"),
    ][:HUNG]

    def timed() -> tuple[float, int]:
        start = time.perf_counter()
        results = run_on_nodes(
            every, read_power, factory=factory, workers=workers, pool=pool, deadline=_pass()
        )
        return time.perf_counter() - start, sum(1 for r in results if not r.ok)

    try:
        run_on_nodes(
            every, read_power, factory=factory, workers=workers, pool=pool, deadline=_pass()
        )
        healthy, _ = timed()
        for node in hung:
            lab.add_faults(node.name, [{"name": "bench-hang", "effect": "hang"}])
        try:
            passes = [timed() for _ in range(2)]
        finally:
            for node in hung:
                lab.clear_faults(node.name)
        stats = pool.stats.to_dict()
    finally:
        pool.close()
    return {
        "hung_nodes": len(hung),
        "healthy_s": healthy,
        "hung_pass_s": [p[0] for p in passes],
        "hung_pass_failed": [p[1] for p in passes],
        "ratio": [p[0] / healthy if healthy else None for p in passes],
        "sessions": stats,
    }


def _one_size(size: int, options: Options) -> dict[str, Any]:
    spec = generate(size, protocols="mixed", seed=options.seed)
    processes = options.processes or os.cpu_count() or 1
    with enrolled_lab(spec, "hwlab-bench-sweep-") as (lab, db, _):
        store = Store.open(str(db))
        # Steady rows keep sessions as `bmaas sync` does (its pool's idle is
        # twice the interval): a first pass of 10,000 nodes on a loaded box
        # outlasts the default 60 s, which turned the timed pass cold.
        pools = [DriverPool(idle=STEADY_IDLE), DriverPool(idle=STEADY_IDLE)]
        sweeper = ShardedSweeper(
            processes=processes,
            workers=options.workers,
            make_factory=driver_factory,
            idle=STEADY_IDLE,
        )
        try:
            every = store.nodes.find()
            ipmi = [n for n in every if n.driver == "ipmi"]
            redfish = [n for n in every if n.driver == "redfish"]
            w = options.workers
            lab_pids = lab.pids()

            def lab_cpu() -> float:
                return _threads_cpu(lab_pids)

            bare_sushy, close_sushy = _bare_sushy(redfish, 8, lab_cpu)  # 8 threads, as named
            contenders: dict[str, tuple[int, Callable[[], Measured]]] = {
                IPMI_COLD: (len(ipmi), _in_process(ipmi, w, None, lab_cpu)),
                IPMI_STEADY: (len(ipmi), _in_process(ipmi, w, pools[0], lab_cpu)),
                IPMI_SHARDED: (len(ipmi), _sharded(ipmi, sweeper, lab_cpu)),
                REDFISH_COLD: (len(redfish), _in_process(redfish, w, None, lab_cpu)),
                REDFISH_STEADY: (len(redfish), _in_process(redfish, w, pools[1], lab_cpu)),
                ALL_SHARDED: (len(every), _sharded(every, sweeper, lab_cpu)),
                BARE_SUSHY: (len(redfish), bare_sushy),
                IPMITOOL: (len(ipmi), _ipmitool(ipmi, lab_cpu)),
            }
            # Untimed: imports and the sweep processes' start. Each steady row
            # runs its own untimed warm passes before every timed one: a BMC
            # forgets an idle session (IPMI: 20 s here) while others are timed.
            sweeper.run(every[:8], read_power, deadline=_pass())
            run_on_nodes(every[:8], read_power, factory=driver_factory(), workers=w)
            measured: dict[str, list[Measured]] = {name: [] for name in contenders}
            names = list(contenders)
            for round_ in range(options.rounds):
                for name in names if round_ % 2 == 0 else names[::-1]:
                    measured[name].append(contenders[name][1]())
            sessions: dict[str, Any] = {"in_process": [p.stats.to_dict() for p in pools]}
            sessions["sharded"] = sweeper.stats.to_dict()
            hung = _hung_ratio(lab, every, w)
            if options.hung_fraction:
                hung_fenced = hung_sync.measure(
                    lab, store, every, workers=w, fraction=options.hung_fraction
                )
        finally:
            if "close_sushy" in locals():
                close_sushy()
            sweeper.close()
            for pool in pools:
                pool.close()
            store.close()
    out: dict[str, Any] = {"processes": processes, "sessions": sessions, "hung": hung}
    if options.hung_fraction:
        out["hung_sync"] = hung_fenced
    for name, (nodes, _) in contenders.items():
        walls = [m[0] for m in measured[name]]
        cpus = [m[1] / nodes for m in measured[name]] if nodes else []
        lab_cpus = [m[3] / nodes for m in measured[name]] if nodes else []
        median = statistics.median(walls)
        out[name] = {
            "nodes": nodes,
            "median_s": median,
            "times_s": walls,
            "nodes_per_s": nodes / median if median else None,
            "cpu_per_read_ms": statistics.median(cpus) * 1000 if cpus else None,
            "cpu_per_read_ms_all": [c * 1000 for c in cpus],
            # the lab's side: its worker processes' CPU over the same pass
            "lab_cpu_per_read_ms": statistics.median(lab_cpus) * 1000 if lab_cpus else None,
            "lab_cpu_per_read_ms_all": [c * 1000 for c in lab_cpus],
            "failed_calls": sum(m[2] for m in measured[name]),
        }
    return out


def run(options: Options, *, progress: Callable[[str], None] = lambda _: None) -> Report:
    ipmitool.require_ipmitool()
    sizes: dict[int, dict[str, Any]] = {}
    for size in options.sizes:
        sizes[size] = _one_size(size, options)
        progress(f"{size} nodes: done")
    return _report(options, sizes)


def _report(options: Options, sizes: dict[int, dict[str, Any]]) -> Report:
    rows = []
    headline: dict[str, float | None] = {}
    unfenced: list[str] = []
    for size, result in sizes.items():
        tool = result[IPMITOOL]
        for name in CONTENDERS:
            r = result[name]
            ipmi_only = name in (IPMI_COLD, IPMI_STEADY, IPMI_SHARDED)
            rows.append(
                [
                    size,
                    name,
                    r["nodes"],
                    fmt_seconds(r["median_s"]),
                    f"{r['nodes_per_s']:,.0f}" if r["nodes_per_s"] else "—",
                    f"{r['cpu_per_read_ms']:.3f}" if r["cpu_per_read_ms"] is not None else "—",
                    _ms(r.get("lab_cpu_per_read_ms")),
                    # the same IPMI nodes as ipmitool: only those rows compare
                    fmt_ratio(ratio(r["nodes_per_s"], tool["nodes_per_s"], 3))
                    if ipmi_only
                    else "—",
                    fmt_ratio(ratio(r["cpu_per_read_ms"], tool["cpu_per_read_ms"], 3))
                    if ipmi_only
                    else "—",
                    r["failed_calls"],
                ]
            )
        steady, sharded = result[IPMI_STEADY], result[IPMI_SHARDED]
        best = max(steady["nodes_per_s"] or 0, sharded["nodes_per_s"] or 0)
        headline.update(
            {
                f"{size} nodes: IPMI steady CPU ms/read": rounded(steady["cpu_per_read_ms"], 3),
                f"{size} nodes: IPMI steady CPU / ipmitool CPU per read": ratio(
                    steady["cpu_per_read_ms"], tool["cpu_per_read_ms"], 3
                ),
                f"{size} nodes: Redfish steady CPU ms/read": rounded(
                    result[REDFISH_STEADY]["cpu_per_read_ms"], 3
                ),
                f"{size} nodes: lab CPU ms per IPMI steady read": rounded(
                    steady.get("lab_cpu_per_read_ms"), 3
                ),
                f"{size} nodes: lab CPU ms per Redfish steady read": rounded(
                    result[REDFISH_STEADY].get("lab_cpu_per_read_ms"), 3
                ),
                f"{size} nodes: IPMI steady nodes/s / ipmitool x 8": ratio(
                    best, tool["nodes_per_s"], 3
                ),
                f"{size} nodes: bare sushy CPU ms/read": rounded(
                    result[BARE_SUSHY]["cpu_per_read_ms"], 3
                ),
                f"{size} nodes: Redfish steady CPU / bare sushy CPU per read": ratio(
                    result[REDFISH_STEADY]["cpu_per_read_ms"],
                    result[BARE_SUSHY]["cpu_per_read_ms"],
                    3,
                ),
                f"{size} nodes: IPMI steady reads per login": result["sessions"]["in_process"][0][
                    "reads_per_login"
                ],
                f"{size} nodes: Redfish steady reads per login": result["sessions"]["in_process"][
                    1
                ]["reads_per_login"],
                f"{size} nodes: hung-BMC pass / healthy pass (worst of 2)": rounded(
                    max((r for r in result["hung"]["ratio"] if r is not None), default=None), 3
                ),
            }
        )
        fenced = result.get("hung_sync")
        if fenced is not None:
            share = f"{fenced['hung_fraction']:.0%} hung"
            headline[f"{size} nodes: sync pass, {share} and fenced / healthy (median)"] = rounded(
                fenced["ratio_median"], 3
            )
            for name in fenced["unfenced"]:
                unfenced.append(
                    f"{size} nodes: hung {name} not fenced: {fenced['late_reads'][name]} of its "
                    "reads were cut by the client's own lateness (a loaded runner; "
                    "bmaas.lateness), which counts against no BMC"
                )
    cores = os.cpu_count()
    processes = next(iter(sizes.values()))["processes"] if sizes else None
    notes = [
        f"{cores} cores, shared by the lab and the clients; sharded rows: {processes} "
        f"sweep processes x {options.workers} threads",
        f"median of {options.rounds} round(s), contenders in alternating order; each steady "
        f"row's timed pass follows its own {WARM_PASSES} untimed passes (the first logs in, "
        "the second opens the lean Redfish read's connection; sessions kept by a driver pool, "
        f"idle up to {STEADY_IDLE:g} s as bmaas sync keeps them, capped by each driver's own); "
        "a full collection of the bench process's heap before every timed pass, every row "
        "alike (sweep workers settle their own, as bmaas sync's do: bmaas.heap)",
        "CPU per read: user+sys of the client processes only (bmaas: this process and its "
        "sweep workers; ipmitool: its processes), never the lab's",
        "lab CPU per read: on-CPU time of the lab's worker processes' threads (every BMC "
        "emulator; /proc schedstat, ns) over "
        "the same timed pass, per node read; a steady read is one answer (one Redfish GET, "
        "one IPMI command), a cold one a login's exchanges too",
        "ipmitool: -I lanplus -L ADMINISTRATOR -R 1 -N 1 power status, one process per node, "
        "8 at a time (Ironic's power-sync workers)",
        f"hung-BMC pass ratio: {HUNG} BMCs (one IPMI, one Redfish) hang after a healthy "
        "pooled pass over every node; two pooled passes follow, each over the healthy one",
        "hung-BMC sync ratio (--hung-fraction): that share of the nodes hang, the sync "
        f"(bmaas sync --interval, BMC timeout {hung_sync.BMC_TIMEOUT:g} s) fences them, "
        f"then {hung_sync.STEADY} passes, each over the healthy pass's time",
        "bare sushy x 8: a kept sushy client and System per node, system.refresh() a read, "
        "8 threads, in this process (its CPU per read is beside bmaas Redfish's)",
        "goals (issue 26): Redfish steady CPU/read <= {redfish_lean_cpu_ms} ms and <= "
        "1/3 of bare sushy's".format(**GOALS),
        "goals (issue 17): IPMI steady CPU/read <= {ipmi_cpu_ms} ms and <= "
        "{ipmi_cpu_vs_ipmitool} of ipmitool's; Redfish steady <= {redfish_cpu_ms} ms; "
        "IPMI steady nodes/s >= {ipmi_rate_vs_ipmitool}x ipmitool x 8".format(**GOALS),
        *unfenced,
    ]
    return Report(
        scenario="fleet-sweep",
        title="Fleet sweep: power status of every node",
        params={**dataclasses.asdict(options), "cores": cores},
        tables=[
            Table(
                "sweep by fleet size (lab: half IPMI, half Redfish)",
                [
                    "fleet",
                    "contender",
                    "nodes read",
                    "median",
                    "nodes/s",
                    "CPU ms/read",
                    "lab CPU ms/read",
                    "nodes/s vs ipmitool",
                    "CPU vs ipmitool",
                    "failed",
                ],
                rows,
            )
        ],
        headline=headline,
        notes=notes,
        data={"cores": cores, "goals": GOALS, "sizes": {str(k): v for k, v in sizes.items()}},
        plot=plot,
    )


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def plot(fig: Any, report: Report) -> None:
    """Left: nodes per second against fleet size; right: client CPU per read."""
    sizes = report.data["sizes"]
    xs = [int(s) for s in sizes]
    left, right = fig.subplots(1, 2)
    styles = {
        IPMI_COLD: ("#a6dba0", "s:"),
        IPMI_STEADY: ("#1b7837", "s-"),
        IPMI_SHARDED: ("#00441b", "D-"),
        REDFISH_COLD: ("#c2a5cf", "o:"),
        REDFISH_STEADY: ("#762a83", "o-"),
        ALL_SHARDED: ("#2166ac", "v-"),
        IPMITOOL: ("#d95f02", "^-"),
    }
    for name, (colour, style) in styles.items():
        rate = [sizes[str(x)][name]["nodes_per_s"] for x in xs]
        cpu = [sizes[str(x)][name]["cpu_per_read_ms"] for x in xs]
        left.plot(xs, rate, style, color=colour, label=name)
        right.plot(xs, cpu, style, color=colour, label=name)
    right.axhline(GOALS["ipmi_cpu_ms"], color="#1b7837", lw=0.8, ls="--", label="IPMI goal")
    right.axhline(GOALS["redfish_cpu_ms"], color="#762a83", lw=0.8, ls="--", label="Redfish goal")
    left.set_xlabel("nodes in the lab (half IPMI, half Redfish)")
    left.set_ylabel("nodes read per second (median)")
    left.set_yscale("log")
    left.set_title(f"throughput ({report.data.get('cores')} cores, lab included)")
    right.set_xlabel("nodes in the lab")
    right.set_ylabel("client CPU ms per node read (median)")
    right.set_yscale("log")
    right.set_title("client CPU per read (any machine)")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.set_xscale("log")
    left.legend(fontsize=7)
    fig.suptitle(report.title)
    fig.tight_layout()
