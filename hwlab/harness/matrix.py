"""The fault matrix: every effect, every protocol, through the real drivers.

For each scenario the matrix puts one rule on a lab node, makes one call
through the bmaas driver for that protocol (found through the
``bmaas.drivers`` entry points, so hwlab never imports ``drivers``), and
records what came back — a fault class, or ``ok`` with the power state seen —
and how long it took. The scenarios and what each must produce are read from
:data:`fakes.effects.EFFECTS`, where each effect is defined; the lab's
purpose is to keep the matrix all-pass, with zero ``UnclassifiedFault``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable
from typing import Any

from bmaas.driver import BMCDriver, BootDevice, PowerAction
from bmaas.faults import BmaasError
from bmaas.registry import build_driver
from fakes.effects import EFFECTS, Case
from fakes.machine import Hardware
from hwlab.harness.budgets import no_budget, per_call
from hwlab.lab import Lab
from hwlab.labspec import LabSpec, NodeSpec

__all__ = ["EXPECTED", "SCENARIOS", "Result", "Scenario", "probe_until_up", "run_matrix"]

#: driver deadline in the matrix: short, so hangs classify fast
MATRIX_DEADLINE = 1.0
#: how long a power action may take to land before it counts as a failure
POWER_TIMEOUT = 1.5

MATRIX_HARDWARE = Hardware(
    power_on_time=0.2, power_off_time=0.1, soft_off_time=0.3, os_boot_time=0.5
)


#: one scenario: a rule, a call, what each protocol must give
Scenario = Case


def _read(driver: BMCDriver) -> str:
    return f"ok:{driver.get_power_state(deadline=per_call(driver))}"


def _power_on(driver: BMCDriver) -> str:
    state = driver.set_power_state(
        PowerAction.ON, wait=True, timeout=POWER_TIMEOUT, deadline=no_budget(driver)
    )
    return f"ok:{state}"


def _boot_pxe(driver: BMCDriver) -> str:
    driver.set_boot_device(BootDevice.PXE, persistent=True, deadline=per_call(driver))
    return "ok"


def _power_on_then_settle(driver: BMCDriver) -> str:
    driver.set_power_state(
        PowerAction.ON, wait=True, timeout=POWER_TIMEOUT, deadline=no_budget(driver)
    )
    time.sleep(0.8)  # longer than the rule's up_for: a crashed boot reads off by now
    return f"ok:{driver.get_power_state(deadline=per_call(driver))}"


ACTIONS: dict[str, Callable[[BMCDriver], str]] = {
    "read": _read,
    "power_on": _power_on,
    "boot_pxe": _boot_pxe,
    "power_on_then_settle": _power_on_then_settle,
}

#: every effect's matrix cases, as :data:`fakes.effects.EFFECTS` defines them
SCENARIOS: tuple[Scenario, ...] = tuple(
    dataclasses.replace(case, rule={"effect": str(effect), **case.rule})
    for effect, spec in EFFECTS.items()
    for case in spec.cases
)

#: what each scenario must produce, per protocol: a fault class or "ok:<state>"
EXPECTED: dict[str, dict[str, str]] = {s.name: dict(s.expected) for s in SCENARIOS}


@dataclasses.dataclass(frozen=True)
class Result:
    scenario: str
    protocol: str
    expected: str
    seen: str
    seconds: float
    message: str = ""

    @property
    def passed(self) -> bool:
        return self.seen == self.expected

    @property
    def unclassified(self) -> bool:
        return self.seen == "UnclassifiedFault"

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "passed": self.passed}


def matrix_spec(protocols: Iterable[str]) -> LabSpec:
    """One healthy machine per protocol; the matrix adds rules as it goes."""
    return LabSpec(
        nodes=tuple(
            NodeSpec(name=f"matrix-{p}", protocols=(p,), hardware=MATRIX_HARDWARE)
            for p in protocols
        )
    )


def run_matrix(
    lab: Lab,
    *,
    protocols: Iterable[str] = ("ipmi", "redfish"),
    scenarios: Iterable[Scenario] = SCENARIOS,
    deadline_s: float = MATRIX_DEADLINE,
    progress: Callable[[Result], None] | None = None,
) -> list[Result]:
    """Run ``scenarios`` on ``lab``'s ``matrix-<protocol>`` nodes."""
    inventory = {n["name"]: n for n in lab.inventory()["nodes"]}
    results = []
    for scenario in scenarios:
        for protocol in protocols:
            node = f"matrix-{protocol}"
            result = _run_one(lab, inventory[node], protocol, scenario, deadline_s)
            results.append(result)
            if progress is not None:
                progress(result)
    return results


def _run_one(
    lab: Lab, record: dict[str, Any], protocol: str, scenario: Scenario, deadline_s: float
) -> Result:
    node = record["name"]
    lab.clear_faults(node)
    lab.power(node, "on" if scenario.start_on else "off")
    driver = build_driver(node, protocol, record["driver_info"], bmc_timeout=deadline_s)
    driver.poll_interval = 0.1
    try:
        probe_until_up(driver)  # a live session first: faults then hit a real command
        lab.add_faults(node, [dict(scenario.rule)])
        if scenario.prime:
            with contextlib.suppress(BmaasError):
                driver.get_power_state(deadline=per_call(driver))
        start = time.monotonic()
        try:
            seen, message = ACTIONS[scenario.action](driver), ""
        except BmaasError as exc:
            seen, message = type(exc).__name__, str(exc)
        seconds = time.monotonic() - start
    finally:
        driver.close()
        lab.clear_faults(node)
    expected = EXPECTED[scenario.name][protocol]
    return Result(scenario.name, protocol, expected, seen, round(seconds, 3), message)


def probe_until_up(driver: BMCDriver, limit: float = 10.0) -> None:
    """Set-up, not measurement: a BMC the previous scenario rebooted must
    answer again before the next scenario starts."""
    until = time.monotonic() + limit
    while True:
        try:
            driver.probe(deadline=per_call(driver))
            return
        except BmaasError:
            if time.monotonic() > until:
                raise
            time.sleep(0.1)
