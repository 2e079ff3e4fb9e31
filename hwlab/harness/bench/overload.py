"""overload: the overload events each client sets off sweeping one fragile lab.

Every BMC of an IPMI+Redfish lab carries hwlab's ``overload`` effect (silent
for ``duration`` s once more than ``max_concurrent`` requests are in flight or
more than ``max_rate`` arrive within a second, as Supermicro and iDRAC field
reports describe). Each client reads every node's power state ``sweeps``
times, one client after the other, the lab's windows cleared in between;
the figure is the trigger firings in hwlab's event log during each client's
run, and the reads that failed:

* **bmaas** -- pooled drivers, 32 threads, told the BMCs' limits
  (``bmc_max_requests``, ``bmc_min_interval``: what an operator sets for such
  hardware);
* **ipmitool x 8** -- one process per IPMI node, 8 at a time, as Ironic's
  power sync runs them;
* **bare sushy x 8** -- one ``sushy.Sushy`` client per Redfish node (its
  own login), 8 threads, as a script or a stock driver without a session
  cache does.

Ironic's stock and bmaas hardware types are not in this scenario (a real
Ironic per run does not fit its smoke size): see ``hwlab bench ironic``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bmaas.deadline import Deadline
from bmaas.fakes.machine import Hardware
from bmaas.faults import BmaasError
from bmaas.hwlab.harness.bench import ipmitool
from bmaas.hwlab.harness.bench.clients import bare_sushy
from bmaas.hwlab.harness.bench.common import running_lab
from bmaas.hwlab.harness.bench.report import Report, Table
from bmaas.hwlab.lab import Lab
from bmaas.hwlab.labspec import generate
from bmaas.pool import DriverPool
from bmaas.registry import build_driver

__all__ = ["Options", "run"]

QUICK = Hardware(power_on_time=0.5, power_off_time=0.3, soft_off_time=0.5, os_boot_time=1.0)


@dataclasses.dataclass(frozen=True)
class Options:
    #: nodes in the lab (half IPMI, half Redfish)
    nodes: int = 40
    #: reads of every node per client
    sweeps: int = 3
    max_concurrent: int = 2
    max_rate: float = 5.0
    #: seconds a triggered BMC stays silent
    duration: float = 2.0

    @classmethod
    def smoke(cls) -> Options:
        return cls(nodes=6, sweeps=1, duration=1.0)


def _rule(options: Options) -> dict[str, Any]:
    return {
        "effect": "overload",
        "max_concurrent": options.max_concurrent,
        "max_rate": options.max_rate,
        "duration": options.duration,
    }


def _triggers(lab: Lab) -> int:
    path = lab.events_path
    if not path.exists():
        return 0
    count = 0
    for line in path.read_text().splitlines():
        if line.strip():
            event = json.loads(line)
            count += event.get("effect") == "overload" and "trigger" in event.get("params", {})
    return count


def _reset(lab: Lab, names: Sequence[str], options: Options) -> None:
    """Fresh rules (no window open, no count carried over) on every node."""
    time.sleep(options.duration)  # windows a previous client opened end
    for name in names:
        lab.clear_faults(name)
        lab.add_faults(name, [_rule(options)])


def _bmaas(nodes: Sequence[Mapping[str, Any]], options: Options) -> int:
    limits = {
        "bmc_max_requests": options.max_concurrent,
        # a margin under the BMC's rate: arrival jitter must not squeeze two turns into one
        "bmc_min_interval": 1.25 / options.max_rate if options.max_rate else 1.0,
    }
    failed = 0
    with DriverPool() as pool:
        for _ in range(options.sweeps):

            def read(node: Mapping[str, Any]) -> bool:
                info = {**node["driver_info"], **limits}
                key = pool.key_for(node["driver"], node["name"], info)
                try:
                    pool.run(
                        key,
                        lambda: build_driver(node["name"], node["driver"], info, bmc_timeout=10.0),
                        lambda d: d.get_power_state(deadline=Deadline.after(10.0)),
                        deadline=Deadline.after(10.0),
                    )
                except BmaasError:
                    return False
                return True

            with concurrent.futures.ThreadPoolExecutor(32) as threads:
                failed += list(threads.map(read, nodes)).count(False)
    return failed


def _ipmitool(nodes: Sequence[Mapping[str, Any]], options: Options) -> int:
    jobs = [
        ipmitool.ipmitool_job(n["driver_info"], password=str(n["driver_info"]["ipmi_password"]))
        for n in nodes
    ]
    return sum(ipmitool.sweep(jobs, workers=8)[1] for _ in range(options.sweeps))


def _sushy(nodes: Sequence[Mapping[str, Any]], options: Options) -> int:
    def read(node: Mapping[str, Any]) -> bool:
        info = node["driver_info"]
        try:
            system = bare_sushy(info).get_system(info.get("redfish_system_id"))
            return system.power_state is not None
        except Exception:  # a bare client's failure, whatever it is, is one failed read
            return False

    failed = 0
    for _ in range(options.sweeps):
        with concurrent.futures.ThreadPoolExecutor(8) as threads:
            failed += list(threads.map(read, nodes)).count(False)
    return failed


def run(options: Options, *, progress: Callable[[str], None] = lambda _: None) -> Report:
    spec = generate(options.nodes, protocols="mixed", seed=24)
    spec = dataclasses.replace(
        spec, nodes=tuple(dataclasses.replace(n, hardware=QUICK) for n in spec.nodes)
    )
    names = [n.name for n in spec.nodes]
    clients: dict[str, Callable[[], int]] = {}
    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    with running_lab(spec, prefix="hwlab-bench-overload-") as lab:
        nodes = lab.inventory()["nodes"]
        ipmi = [n for n in nodes if n["driver"] == "ipmi"]
        redfish = [n for n in nodes if n["driver"] == "redfish"]
        clients = {
            "bmaas (pooled, BMC limits)": lambda: _bmaas(nodes, options),
            "ipmitool x 8 (Ironic's sync)": lambda: _ipmitool(ipmi, options),
            "bare sushy x 8 threads": lambda: _sushy(redfish, options),
        }
        reached = {
            "bmaas (pooled, BMC limits)": len(nodes),
            "ipmitool x 8 (Ironic's sync)": len(ipmi),
            "bare sushy x 8 threads": len(redfish),
        }
        for label, client in clients.items():
            _reset(lab, names, options)
            before = _triggers(lab)
            start = time.monotonic()
            failed = client()
            seconds = time.monotonic() - start
            events = _triggers(lab) - before
            reads = reached[label] * options.sweeps
            rows.append([label, reads, failed, events, round(seconds, 2)])
            data[label] = {"reads": reads, "failed": failed, "overload_events": events}
            progress(f"{label}: {events} overload event(s)")
    table = Table(
        f"Overload events per client: {options.nodes} nodes, {options.sweeps} sweep(s), BMCs "
        f"silent {options.duration:g} s past {options.max_concurrent} in flight or "
        f"{options.max_rate:g} req/s",
        ["client", "reads", "failed reads", "overload events", "seconds"],
        rows,
    )
    return Report(
        scenario="overload",
        title="Overload events each client sets off on a fragile lab",
        params=dataclasses.asdict(options),
        tables=[table],
        headline={
            "bmaas_overload_events": float(data["bmaas (pooled, BMC limits)"]["overload_events"]),
        },
        notes=[
            "overload events = hwlab event-log firings that opened a silent window",
            "bmaas is told the BMCs' limits in driver_info (bmc_max_requests, "
            "bmc_min_interval = 1.25/max_rate); the bare clients know nothing of them",
            "Ironic's stock and bmaas types: not in this scenario (hwlab bench ironic)",
        ],
        data={"clients": data},
        plot=_plot,
    )


def _plot(fig: Any, report: Report) -> None:
    clients = report.data["clients"]
    ax = fig.add_subplot(1, 1, 1)
    labels = list(clients)
    ax.bar(labels, [clients[c]["overload_events"] for c in labels], color="#c44e52")
    ax.set_ylabel("overload events")
    ax.set_title(report.title, fontsize=10)
    ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
