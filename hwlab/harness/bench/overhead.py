"""overhead: what bmaas adds to one power read, next to the bare library.

On the same emulated BMC (a lab worker process, so client and server do not
share a GIL), interleaved call by call so drift hits both alike:

* **IPMI**: ``IPMIDriver.get_power_state`` on its reused session vs bare
  pyghmi ``Command.get_power()`` on a reused session; for scale, a fresh
  bmaas driver (RMCP+ login, read, logout) and ``ipmitool power status`` (a
  process and its own login) are timed too;
* **Redfish**: ``RedfishDriver.get_power_state`` vs bare sushy
  ``System.refresh()`` on one reused client with sushy's defaults (session
  auth, its own retry settings).

bmaas adds a deadline per call, classification, a call lock and, for
Redfish, the bounded connector and the operation header. Medians per call
and the ratio bmaas / bare. (Formerly ``ipmi_latency`` and
``redfish_latency``.)
"""

from __future__ import annotations

import dataclasses
import statistics
import subprocess
from collections.abc import Callable
from typing import Any

from bmaas.driver import PowerState
from bmaas.hwlab.harness.bench import ipmitool
from bmaas.hwlab.harness.bench.clients import bare_sushy
from bmaas.hwlab.harness.bench.common import interleaved, running_lab
from bmaas.hwlab.harness.bench.report import Report, Table, fmt_ratio, fmt_seconds
from bmaas.hwlab.harness.budgets import per_call
from bmaas.hwlab.labspec import LabSpec, NodeSpec
from bmaas.registry import build_driver

__all__ = ["Options", "run"]


@dataclasses.dataclass(frozen=True)
class Options:
    calls: int = 500
    #: fresh logins and ipmitool processes (slow: fewer samples)
    fresh: int = 30

    @classmethod
    def smoke(cls) -> Options:
        return cls(calls=20, fresh=3)


def _spec() -> LabSpec:
    return LabSpec(
        nodes=(
            NodeSpec("oh-ipmi", protocols=("ipmi",), power=PowerState.ON),
            NodeSpec("oh-redfish", protocols=("redfish",), power=PowerState.ON),
        )
    )


def _ipmi(entry: dict[str, Any], options: Options) -> dict[str, list[float]]:
    from pyghmi.ipmi import command

    info = entry["driver_info"]
    driver = build_driver(entry["name"], "ipmi", info)
    bare = command.Command(
        info["ipmi_address"],
        info["ipmi_username"].encode(),
        info["ipmi_password"].encode(),
        port=info["ipmi_port"],
    )
    try:
        times = interleaved(
            {
                "bmaas": lambda: driver.get_power_state(deadline=per_call(driver)),
                "pyghmi": lambda: bare.get_power(),
            },
            options.calls,
        )
    finally:
        driver.close()
        bare.ipmi_session.logout()

    def fresh() -> None:
        with build_driver(entry["name"], "ipmi", info) as one:
            one.get_power_state(deadline=per_call(one))

    job = ipmitool.ipmitool_job(info, password=info["ipmi_password"])

    def tool() -> None:
        subprocess.run(job[0], env=job[1], capture_output=True, timeout=10, check=True)  # noqa: S603

    times.update(interleaved({"bmaas, fresh login": fresh, "ipmitool": tool}, options.fresh))
    return times


def _redfish(entry: dict[str, Any], options: Options) -> dict[str, list[float]]:
    info = entry["driver_info"]
    system_path = f"/redfish/v1/Systems/{entry['name']}"
    driver = build_driver(entry["name"], "redfish", {**info, "redfish_system_id": system_path})
    root = bare_sushy(info)
    system = root.get_system(system_path)

    def bare() -> object:
        system.refresh()
        return system.power_state

    try:
        return interleaved(
            {"bmaas": lambda: driver.get_power_state(deadline=per_call(driver)), "sushy": bare},
            options.calls,
        )
    finally:
        driver.close()
        root._auth.close()  # sushy closes its session only in __del__ otherwise
        root._auth = None


def run(options: Options, *, progress: Callable[[str], None] = lambda _: None) -> Report:
    ipmitool.require_ipmitool()
    with running_lab(_spec(), prefix="hwlab-bench-overhead-") as lab:
        entries = {n["name"]: n for n in lab.inventory()["nodes"]}
        results = {
            "ipmi": _ipmi(entries["oh-ipmi"], options),
            "redfish": _redfish(entries["oh-redfish"], options),
        }
    progress("done")
    return _report(options, results)


def _report(options: Options, results: dict[str, dict[str, list[float]]]) -> Report:
    medians = {p: {k: statistics.median(v) for k, v in r.items()} for p, r in results.items()}
    bare = {"ipmi": "pyghmi", "redfish": "sushy"}
    rows = []
    for protocol, values in medians.items():
        base = values["bmaas"]
        for name, median in values.items():
            samples = len(results[protocol][name])
            rows.append([protocol, name, samples, fmt_seconds(median), fmt_ratio(median / base)])
    headline: dict[str, float | None] = {
        f"{p}: bmaas / {bare[p]} (median per read)": round(
            medians[p]["bmaas"] / medians[p][bare[p]], 3
        )
        for p in medians
    }
    headline["ipmi: ipmitool / bmaas reused session"] = round(
        medians["ipmi"]["ipmitool"] / medians["ipmi"]["bmaas"], 1
    )
    return Report(
        scenario="overhead",
        title="Overhead: one power read, bmaas vs the bare library",
        params=dataclasses.asdict(options),
        tables=[
            Table(
                "median per power read on one emulated BMC (sessions reused unless noted)",
                ["protocol", "client", "samples", "median", "vs bmaas"],
                rows,
            )
        ],
        headline=headline,
        notes=[
            f"{options.calls} interleaved reads each; {options.fresh} fresh logins and ipmitool "
            "runs",
            "the BMC runs in a lab worker process on the same machine",
        ],
        data={
            "medians_s": medians,
            "samples_s": results,
        },
        plot=plot,
    )


def plot(fig: Any, report: Report) -> None:
    """Box plots of per-call latency, reused sessions, per protocol."""
    samples = report.data["samples_s"]
    axes = fig.subplots(1, 2)
    for ax, (protocol, names) in zip(
        axes, (("ipmi", ("bmaas", "pyghmi")), ("redfish", ("bmaas", "sushy"))), strict=True
    ):
        data = [[v * 1000 for v in samples[protocol][n]] for n in names]
        ax.boxplot(data, tick_labels=list(names), showfliers=False)
        for i, values in enumerate(data, start=1):
            median = statistics.median(values)
            ax.text(i + 0.25, median, f"{median:.2f} ms", va="center", fontsize=8)
        ax.set_ylabel("ms per power read")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{'IPMI' if protocol == 'ipmi' else 'Redfish'}: reused session")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(report.title)
    fig.tight_layout()
