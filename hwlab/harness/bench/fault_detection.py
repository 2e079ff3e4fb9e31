"""fault-detection: how long until a caller knows what is wrong with a BMC.

For each protocol and each of four faults — a dead BMC (``hang``: nothing
ever answers), a refused port (nothing listens), a busy BMC (IPMI 0xC0,
Redfish 503, for every power read) and a wrong password — time one power
read from the moment the client is created (login included) to the typed
fault, with:

* **bmaas**: the ``ipmi`` / ``redfish`` driver with its default deadline
  (10 s), one bounded attempt, as ``bmaas power status`` makes it;
* **pyghmi**: ``pyghmi.ipmi.command.Command`` with bytes credentials and
  every other setting default, then ``get_power()``, as pyghmi users do;
* **sushy**: ``sushy.Sushy(url, username, password)`` with its defaults (10
  tries 3 s apart on connection errors and on 5xx for a GET, 60 s read
  timeout), then ``get_system(...).power_state``;
* **ipmitool (Ironic)**: ``ipmitool -I lanplus -R 1 -N 1 power status``
  retried as Ironic's ``ipmitool`` power interface does by default: every
  error, at least 5 s apart, up to 12 tries or 60 s (see
  :mod:`bmaas.hwlab.harness.bench.ipmitool` for the settings and where they come from).

Each client gets its own fresh BMC per trial (so no trial sees another's
session), and bmaas, pyghmi and sushy run in a child process each
(:mod:`bmaas.hwlab.harness.bench.clients`): a bare client facing a dead BMC may wait for
minutes, so every trial is capped, and a capped trial is reported as
"gave up after N s", a lower bound, never as a time it did not take.
Trials run several at once (they mostly wait); the column "what the caller
got" is the exception class a caller can act on.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import socket
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from bmaas.hwlab.harness.bench.clients import run_trial
from bmaas.hwlab.harness.bench.common import running_lab
from bmaas.hwlab.harness.bench.ipmitool import ipmitool_job, ironic_power_status, require_ipmitool
from bmaas.hwlab.harness.bench.report import Report, Table, fmt_ratio, fmt_seconds
from bmaas.hwlab.labspec import LabSpec, NodeSpec
from bmaas.hwlab.proxy.stock import free_port
from bmaas.secrets import Secret

__all__ = ["CLIENTS", "FAULTS", "Options", "run"]

FAULTS = ("hang", "refused", "busy", "bad-credentials")
CLIENTS: dict[str, tuple[str, ...]] = {
    "ipmi": ("bmaas", "pyghmi", "ipmitool (Ironic)"),
    "redfish": ("bmaas", "sushy"),
}
#: the lab rule behind each fault (refused needs no BMC, bad-credentials a healthy one)
RULES: dict[str, tuple[dict[str, Any], ...]] = {
    "hang": ({"effect": "hang"},),
    "busy": ({"effect": "busy", "operation": "power.get"},),
    "bad-credentials": (),
}
COLOURS = {
    "bmaas": "#1b7837",
    "pyghmi": "#762a83",
    "ipmitool (Ironic)": "#d95f02",
    "sushy": "#2166ac",
}
PASSWORD = "bench-Secret-41"  # noqa: S105 - a throwaway lab BMC's password
#: as long as the right one: IPMI 2.0 passwords are at most 20 bytes, and
#: ipmitool refuses a longer one before sending anything
WRONG_PASSWORD = "bench-Wrong-42"  # noqa: S105


@dataclasses.dataclass(frozen=True)
class Options:
    runs: int = 5
    #: seconds after which a trial stops waiting (Ironic's loop needs ~65 s)
    cap: float = 90.0
    #: trials at once
    parallel: int = 10

    @classmethod
    def smoke(cls) -> Options:
        return cls(runs=1, cap=3.0, parallel=8)


@dataclasses.dataclass(frozen=True)
class Trial:
    protocol: str
    fault: str
    client: str
    run: int

    @property
    def node(self) -> str:
        slug = self.client.split(" ")[0]
        return f"fd-{self.protocol}-{self.fault}-{slug}-{self.run}"


def _trials(options: Options) -> list[Trial]:
    return [
        Trial(protocol, fault, client, run)
        for run in range(options.runs)
        for protocol, clients in CLIENTS.items()
        for fault in FAULTS
        for client in clients
    ]


def _spec(trials: Sequence[Trial]) -> LabSpec:
    nodes = [
        NodeSpec(
            name=t.node,
            protocols=(t.protocol,),
            password=Secret(PASSWORD),
            rules=tuple(_rule(r) for r in RULES[t.fault]),
        )
        for t in trials
        if t.fault != "refused"
    ]
    return LabSpec(nodes=tuple(nodes), seed=0)


def _rule(raw: dict[str, Any]) -> Any:
    from bmaas.fakes.faults import FaultRule

    return FaultRule.from_dict(raw)


def _one(trial: Trial, port: int, username: str, cap: float) -> dict[str, Any]:
    password = WRONG_PASSWORD if trial.fault == "bad-credentials" else PASSWORD
    if trial.client.startswith("ipmitool"):
        info = {"ipmi_address": "127.0.0.1", "ipmi_port": port, "ipmi_username": username}
        result = ironic_power_status(ipmitool_job(info, password=password), cap=cap)
        got = "ok" if result.ok else f"IPMIFailure after {result.tries} tries: {result.error}"
        return {
            "gave_up": result.gave_up,
            "ok": result.ok,
            "result": got,
            "elapsed": result.elapsed,
        }
    return run_trial(
        {
            "client": trial.client,
            "protocol": trial.protocol,
            "node": trial.node,
            "host": "127.0.0.1",
            "port": port,
            "username": username,
            "password": password,
            "system": f"/redfish/v1/Systems/{trial.node}",
            "cap": cap,
        }
    )


def _cell(results: list[dict[str, Any]], cap: float) -> dict[str, Any]:
    times = [r["elapsed"] for r in results]
    gave_up = sum(1 for r in results if r["gave_up"])
    got = sorted({r.get("result", "") for r in results if not r["gave_up"]})
    median = statistics.median(times) if times else None
    return {
        "runs": len(results),
        "median_s": median,
        "max_s": max(times) if times else None,
        "gave_up": gave_up,
        # more than half capped: the median is itself a capped figure
        "lower_bound": gave_up * 2 > len(results),
        "max_lower_bound": gave_up > 0,
        "got": got or [f"nothing within {cap:g} s"],
        "ok": sum(1 for r in results if r.get("ok")),
    }


def run(options: Options, *, progress: Callable[[str], None] = lambda _: None) -> Report:
    require_ipmitool()
    trials = _trials(options)
    raw: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    with running_lab(_spec(trials), prefix="hwlab-bench-fd-") as lab:
        entries = {n["name"]: n for n in lab.inventory()["nodes"]}

        def one(trial: Trial) -> tuple[Trial, dict[str, Any]]:
            if trial.fault == "refused":
                kind = socket.SOCK_DGRAM if trial.protocol == "ipmi" else socket.SOCK_STREAM
                port, username = free_port(kind), "admin"  # nothing listens there
            else:
                info = entries[trial.node]["driver_info"]
                key = "ipmi" if trial.protocol == "ipmi" else "redfish"
                port = lab.endpoints[trial.node][key]
                username = info[f"{key}_username"]
            return trial, _one(trial, port, username, options.cap)

        with concurrent.futures.ThreadPoolExecutor(options.parallel) as pool:
            for trial, result in pool.map(one, trials):
                raw.setdefault((trial.protocol, trial.fault, trial.client), []).append(result)
                progress(f"{trial.node}: {result.get('result', 'gave up')}")
    cells = {key: _cell(results, options.cap) for key, results in raw.items()}
    return _report(options, cells)


def _ratio(cells: dict[tuple[str, str, str], dict[str, Any]], key: tuple[str, str, str]) -> Any:
    """How many times longer than bmaas ``key``'s client took (median)."""
    ours = cells[(key[0], key[1], "bmaas")]
    theirs = cells[key]
    if not ours["median_s"] or theirs["median_s"] is None or ours["lower_bound"]:
        return None, False  # bmaas itself was cut short: no honest ratio
    lower = theirs["lower_bound"] and not ours["lower_bound"]
    return theirs["median_s"] / ours["median_s"], lower


def _report(options: Options, cells: dict[tuple[str, str, str], dict[str, Any]]) -> Report:
    rows = []
    headline: dict[str, float | None] = {}
    for (protocol, fault, client), cell in cells.items():
        ratio, lower = (
            (None, False) if client == "bmaas" else _ratio(cells, (protocol, fault, client))
        )
        if ratio is not None:
            headline[f"{protocol}/{fault}: {client} / bmaas"] = round(ratio, 2)
        rows.append(
            [
                protocol,
                fault,
                client,
                fmt_seconds(cell["median_s"], lower_bound=cell["lower_bound"]),
                fmt_seconds(cell["max_s"], lower_bound=cell["max_lower_bound"]),
                "—" if client == "bmaas" else fmt_ratio(ratio, lower_bound=lower),
                "; ".join(cell["got"])[:70],
            ]
        )
    rows.sort(key=lambda r: (r[0], FAULTS.index(r[1]), CLIENTS[r[0]].index(r[2])))
    notes = [
        f"{options.runs} run(s) per cell, {options.parallel} trials at once, each capped at "
        f"{options.cap:g} s ('≥' marks a capped figure: the client was still waiting)",
        "time from creating the client (its login included) to the answer or exception",
        "ipmitool (Ironic): -R 1 -N 1, every error retried >= 5 s apart, up to 12 tries or "
        "60 s (Ironic defaults: use_ipmitool_retries=False, min_command_interval=5, "
        "command_retry_timeout=60)",
        "sushy defaults on a dead BMC: 10 tries of a 60 s read timeout, 3 s apart "
        "(~630 s by its settings)",
        "bmaas reports BMCBusy at once and leaves waiting to its retry limits; Ironic and "
        "sushy wait inside the call",
    ]
    data = {
        "cells": [
            {"protocol": p, "fault": f, "client": c, **cell} for (p, f, c), cell in cells.items()
        ]
    }
    return Report(
        scenario="fault-detection",
        title="Fault detection: seconds from a power read to a typed fault",
        params=dataclasses.asdict(options),
        tables=[
            Table(
                "time to fault, by protocol, fault and client",
                ["protocol", "fault", "client", "median", "max", "vs bmaas", "what the caller got"],
                rows,
            )
        ],
        headline=headline,
        notes=notes,
        data=data,
        plot=plot,
    )


def plot(fig: Any, report: Report) -> None:
    """Grouped horizontal bars per protocol: one group per fault, one bar per
    client, log-scale seconds; hatched bars were capped (lower bounds)."""
    from matplotlib.patches import Patch

    cells = {(c["protocol"], c["fault"], c["client"]): c for c in report.data["cells"]}
    axes = fig.subplots(1, 2, sharex=True)
    for ax, protocol in zip(axes, CLIENTS, strict=True):
        clients = CLIENTS[protocol]
        height = 0.8 / len(clients)
        for ci, client in enumerate(clients):
            for fi, fault in enumerate(FAULTS):
                cell = cells[(protocol, fault, client)]
                width = max(cell["median_s"] or 1e-4, 1e-4)
                y = fi + ci * height - 0.4 + height / 2
                ax.barh(
                    y,
                    width,
                    height=height,
                    color=COLOURS[client],
                    hatch="//" if cell["lower_bound"] else "",
                    edgecolor="white",
                )
                label = fmt_seconds(width, lower_bound=cell["lower_bound"])
                ax.text(width * 1.2, y, label, va="center", fontsize=7)
        ax.set_yticks(range(len(FAULTS)), FAULTS)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlim(1e-3, 5e3)
        ax.set_title("IPMI" if protocol == "ipmi" else "Redfish")
        ax.set_xlabel("seconds to a fault (median, log scale)")
        ax.grid(axis="x", alpha=0.3)
    handles = [Patch(color=colour, label=client) for client, colour in COLOURS.items()]
    handles.append(
        Patch(facecolor="0.7", hatch="//", edgecolor="white", label="still waiting at the cap")
    )
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle(report.title)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
