"""overrun: how long after its deadline a BMC call returns, per lab effect.

For every scenario of the fault matrix (:data:`bmaas.hwlab.harness.matrix.SCENARIOS`:
every effect the lab can put on the wire, in the BMC or in the hardware) and
both protocols, make ``calls`` calls through the real bmaas driver, each
handed a fresh :class:`~bmaas.deadline.Deadline` of ``deadline`` seconds (the
drivers' own per-call bound stays at its 10 s default, so the Deadline is what
bounds the call), and record how long after that deadline each call returned
(0 when it returned before). The figure is the closing one of issue 14:
"total means total", for every effect, on both protocols.

Power actions wait for power with a long hardware window (60 s), so a node
whose power never lands is cut by the deadline, not by the window. The lab's
``trickle`` effect (the answer a few bytes at a time) is the dribbling BMC
that a per-read socket timeout would let run far past its deadline.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver, BootDevice, PowerAction
from bmaas.faults import BmaasError, InputError
from bmaas.hwlab.harness import matrix
from bmaas.hwlab.harness.bench.common import percentile, running_lab
from bmaas.hwlab.harness.bench.report import Report, Table
from bmaas.registry import build_driver

__all__ = ["Options", "run"]

#: a power action's hardware window: long, so the deadline is what ends the wait
POWER_WINDOW = 60.0
#: the smoke run's scenarios (a hang, a dribbling answer, a quick fault, a success)
SMOKE_SCENARIOS = ("hang", "trickle", "busy", "delay-short")


@dataclasses.dataclass(frozen=True)
class Options:
    #: calls per (scenario, protocol)
    calls: int = 10
    #: seconds each call is given
    deadline: float = 2.0
    #: scenario names to run (empty: every scenario of the matrix)
    only: tuple[str, ...] = ()

    @classmethod
    def smoke(cls) -> Options:
        return cls(calls=1, deadline=0.5, only=SMOKE_SCENARIOS)


# -- the calls ------------------------------------------------------------------------


def _read(driver: BMCDriver, deadline: Deadline) -> str:
    return f"ok:{driver.get_power_state(deadline=deadline)}"


def _power_on(driver: BMCDriver, deadline: Deadline) -> str:
    state = driver.set_power_state(
        PowerAction.ON, wait=True, timeout=POWER_WINDOW, deadline=deadline
    )
    return f"ok:{state}"


def _boot_pxe(driver: BMCDriver, deadline: Deadline) -> str:
    driver.set_boot_device(BootDevice.PXE, persistent=True, deadline=deadline)
    return "ok"


def _power_on_then_settle(driver: BMCDriver, deadline: Deadline) -> str:
    driver.set_power_state(PowerAction.ON, wait=True, timeout=POWER_WINDOW, deadline=deadline)
    deadline.sleep(0.8, time.sleep)  # as the matrix: a crashed boot reads off by now
    return f"ok:{driver.get_power_state(deadline=deadline)}"


#: the matrix's actions, each handed the call's Deadline
ACTIONS: dict[str, Callable[[BMCDriver, Deadline], str]] = {
    "read": _read,
    "power_on": _power_on,
    "boot_pxe": _boot_pxe,
    "power_on_then_settle": _power_on_then_settle,
}


@dataclasses.dataclass
class Cell:
    """The calls of one (scenario, protocol)."""

    scenario: str
    protocol: str
    overruns: list[float] = dataclasses.field(default_factory=list)
    elapsed: list[float] = dataclasses.field(default_factory=list)
    outcomes: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)

    def add(self, elapsed: float, deadline_s: float, outcome: str) -> None:
        self.elapsed.append(elapsed)
        self.overruns.append(max(0.0, elapsed - deadline_s))
        self.outcomes[outcome] += 1

    def to_dict(self, deadline_s: float) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "protocol": self.protocol,
            "calls": len(self.elapsed),
            "outcomes": dict(self.outcomes),
            "at_deadline": sum(1 for e in self.elapsed if e >= deadline_s * 0.99),
            "overrun_median_s": percentile(self.overruns, 0.5),
            "overrun_p99_s": percentile(self.overruns, 0.99),
            "overrun_max_s": max(self.overruns, default=None),
            "elapsed_s": [round(e, 4) for e in self.elapsed],
        }


def _timed(call: Callable[[Deadline], str], seconds: float) -> tuple[float, str]:
    begun = time.monotonic()
    deadline = Deadline.after(seconds)
    try:
        outcome = call(deadline)
    except BmaasError as exc:
        outcome = type(exc).__name__
    return time.monotonic() - begun, outcome


def _lab_cell(
    lab: Any, record: dict[str, Any], protocol: str, scenario: Any, options: Options
) -> Cell:
    node = record["name"]
    action = ACTIONS[scenario.action]
    cell = Cell(scenario.name, protocol)
    for _ in range(options.calls):
        lab.clear_faults(node)
        lab.power(node, "on" if scenario.start_on else "off")
        driver = build_driver(node, protocol, record["driver_info"])
        driver.poll_interval = 0.1
        try:
            matrix.probe_until_up(driver)
            lab.add_faults(node, [scenario.rule])
            if scenario.prime:
                with contextlib.suppress(BmaasError):
                    driver.get_power_state(deadline=Deadline.after(options.deadline))
            elapsed, outcome = _timed(functools.partial(action, driver), options.deadline)
        finally:
            driver.close()
            lab.clear_faults(node)
        cell.add(elapsed, options.deadline, outcome)
    return cell


# -- the run ----------------------------------------------------------------------------


def _scenarios(options: Options) -> list[Any]:
    chosen = [s for s in matrix.SCENARIOS if not options.only or s.name in options.only]
    unknown = set(options.only) - {s.name for s in matrix.SCENARIOS}
    if unknown:
        raise InputError(f"no such matrix scenario: {', '.join(sorted(unknown))}", field="only")
    return chosen


def run(options: Options, *, progress: Callable[[str], None] = lambda _: None) -> Report:
    scenarios = _scenarios(options)
    protocols = ("ipmi", "redfish")
    cells: list[Cell] = []
    notes: list[str] = []
    with running_lab(matrix.matrix_spec(protocols), prefix="hwlab-bench-overrun-") as lab:
        inventory = {n["name"]: n for n in lab.inventory()["nodes"]}
        for scenario in scenarios:
            if scenario.action not in ACTIONS:
                notes.append(f"{scenario.name}: action {scenario.action!r} not measured here")
                continue
            for protocol in protocols:
                if protocol not in matrix.EXPECTED.get(scenario.name, {protocol: ""}):
                    continue  # the effect does not apply to this protocol
                record = inventory[f"matrix-{protocol}"]
                cells.append(_lab_cell(lab, record, protocol, scenario, options))
                progress(f"{scenario.name} / {protocol}")
    return _report(options, cells, notes)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def _report(options: Options, cells: list[Cell], notes: list[str]) -> Report:
    rows = []
    data = [c.to_dict(options.deadline) for c in cells]
    for cell, d in zip(cells, data, strict=True):
        outcome = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in cell.outcomes.most_common())
        rows.append(
            [
                cell.scenario,
                cell.protocol,
                d["calls"],
                outcome,
                d["at_deadline"],
                _ms(d["overrun_median_s"]),
                _ms(d["overrun_p99_s"]),
                _ms(d["overrun_max_s"]),
            ]
        )
    overruns = [o for c in cells for o in c.overruns]
    headline = {
        "overrun_max_s": max(overruns, default=None),
        "overrun_p99_s": percentile(overruns, 0.99),
        "overrun_median_s": percentile(overruns, 0.5),
    }
    notes = [
        f"each call handed a Deadline of {options.deadline:g} s (the drivers' per-call bound "
        "left at its 10 s default); overrun = how long after the deadline the call returned "
        "(0 when before it); 'at deadline' = calls that ran until their deadline",
        "power actions wait with a 60 s hardware window, so the deadline ends them",
        *notes,
    ]
    table = Table(
        f"Deadline overrun per effect and protocol, {options.deadline:g} s deadline "
        f"({options.calls} call(s) each)",
        [
            "effect",
            "protocol",
            "calls",
            "outcome",
            "at deadline",
            "overrun median ms",
            "p99 ms",
            "max ms",
        ],
        rows,
    )
    return Report(
        scenario="overrun",
        title=f"How long after its {options.deadline:g} s deadline a BMC call returns",
        params=dataclasses.asdict(options),
        tables=[table],
        headline=headline,
        notes=notes,
        data={"cells": data, "deadline_s": options.deadline},
        plot=_plot,
    )


def _plot(fig: Any, report: Report) -> None:
    cells = [c for c in report.data["cells"] if c["calls"]]
    ax = fig.add_subplot(1, 1, 1)
    labels = [f"{c['scenario']} / {c['protocol']}" for c in cells]
    ys = range(len(cells))
    ax.barh(
        [y + 0.2 for y in ys],
        [(c["overrun_max_s"] or 0) * 1000 for c in cells],
        height=0.4,
        label="max",
        color="#c44e52",
    )
    ax.barh(
        [y - 0.2 for y in ys],
        [(c["overrun_p99_s"] or 0) * 1000 for c in cells],
        height=0.4,
        label="p99",
        color="#4c72b0",
    )
    ax.set_yticks(list(ys))
    ax.set_yticklabels(labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds after the deadline")
    ax.set_title(report.title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
