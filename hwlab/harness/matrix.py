"""The fault matrix: every effect, every protocol, through the real drivers.

For each scenario the matrix puts one rule on a lab node, makes one call
through the bmaas driver for that protocol (found through the
``bmaas.drivers`` entry points, so hwlab never imports ``drivers``), and
records what came back — a fault class, or ``ok`` with the power state seen —
and how long it took. The scenarios and what each must produce are read from
:data:`bmaas.fakes.effects.EFFECTS`, where each effect is defined; the lab's
purpose is to keep the matrix all-pass, with zero ``UnclassifiedFault``.

With ``shapes`` every Redfish scenario runs again on one node of each vendor
shape (:mod:`bmaas.hwlab.redfish.shapes`), the shapes side by side (a
thread per shape, ``workers`` at once; one node takes one scenario at a
time). A scenario whose call the shape does not offer -- virtual media on a
shape without a CD slot, a boot override on one without override
properties -- is left out for that shape (:func:`offered`): what the driver
says there is the vendor matrix's to check (``tests/lab/test_vendor_matrix.py``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver, BootDevice, PowerAction
from bmaas.fakes.effects import EFFECTS, Case, incident_cases
from bmaas.fakes.machine import Hardware
from bmaas.faults import BmaasError
from bmaas.hwlab.harness.budgets import no_budget, per_call
from bmaas.hwlab.lab import Lab
from bmaas.hwlab.labspec import LabSpec, NodeSpec
from bmaas.hwlab.redfish.shapes import SHAPES
from bmaas.registry import build_driver
from bmaas.retry import RetryingDriver, RetryLimits
from bmaas.updates import UpdateBounds

__all__ = [
    "EXPECTED",
    "SCENARIOS",
    "Result",
    "Scenario",
    "offered",
    "probe_until_up",
    "run_matrix",
    "shape_node",
]

#: driver deadline in the matrix: short, so hangs classify fast
MATRIX_DEADLINE = 1.0
#: how long a power action may take to land before it counts as a failure
POWER_TIMEOUT = 1.5

MATRIX_HARDWARE = Hardware(
    power_on_time=0.2,
    power_off_time=0.1,
    soft_off_time=0.3,
    os_boot_time=0.5,
    firmware_update_time=0.3,
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


def _boot_pxe_once(driver: BMCDriver) -> str:
    """A one-time override; the quirks the driver learnt from its read-back."""
    driver.set_boot_device(BootDevice.PXE, persistent=False, deadline=per_call(driver))
    return "ok:" + ",".join(sorted(str(q) for q in driver.quirks))


def _power_on_then_settle(driver: BMCDriver) -> str:
    driver.set_power_state(
        PowerAction.ON, wait=True, timeout=POWER_TIMEOUT, deadline=no_budget(driver)
    )
    time.sleep(0.8)  # longer than the rule's up_for: a crashed boot reads off by now
    return f"ok:{driver.get_power_state(deadline=per_call(driver))}"


def _vmedia_insert(driver: BMCDriver) -> str:
    driver.insert_virtual_media(_media_url(), deadline=per_call(driver))
    return "ok"


def _media_url() -> str:
    """A fresh image each time: an image already inserted is not inserted again."""
    return f"{MEDIA_URL}?{time.monotonic_ns()}"


def _bios_set_reboot_verify(driver: BMCDriver) -> str:
    """Two BIOS settings changed (each to another of its values), the machine
    powered on (the boot that applies them), the change verified."""
    settings = driver.get_bios(deadline=per_call(driver))
    wanted = {
        name: "Disabled" if settings.current.get(name) == "Enabled" else "Enabled"
        for name in ("ProcTurboMode", "ProcHyperthreading")
    }
    driver.set_bios(wanted, deadline=per_call(driver))
    driver.set_power_state(
        PowerAction.ON, wait=True, timeout=POWER_TIMEOUT, deadline=no_budget(driver)
    )
    driver.verify_bios(wanted, deadline=per_call(driver))
    return "ok"


#: the matrix's firmware update: the task read every 0.1 s, at most 2 s; a
#: BMC back after 2 answers 0.3 s apart, within 5 s (update_reboot's is 1 s)
MATRIX_UPDATE = UpdateBounds(task=2.0, poll=0.1, back=5.0, good=2, interval=0.3)


def _firmware_update(driver: BMCDriver) -> str:
    """The BIOS updated to a fresh image, followed to its end and verified."""
    image = f"http://127.0.0.1:9/fw/matrix-{time.monotonic_ns()}.bin"
    driver.update_firmware(
        image,
        targets=("BIOS",),
        deadline=Deadline.after(15.0, clock=driver.clock),
        bounds=MATRIX_UPDATE,
    )
    return "ok"


def _login(driver: BMCDriver) -> str:
    driver.close()  # the next call logs in afresh
    return _read(driver)


#: the image a virtual-media scenario inserts (never fetched by the lab)
MEDIA_URL = "http://127.0.0.1:9/matrix.iso"

ACTIONS: dict[str, Callable[[BMCDriver], str]] = {
    "read": _read,
    "power_on": _power_on,
    "boot_pxe": _boot_pxe,
    "boot_pxe_once": _boot_pxe_once,
    "power_on_then_settle": _power_on_then_settle,
    "vmedia_insert": _vmedia_insert,
    "bios_set_reboot_verify": _bios_set_reboot_verify,
    "firmware_update": _firmware_update,
    "login": _login,
}

#: the operation budget of an outcome run: longer than every incident window
#: (bmaas.fakes.effects.INCIDENT_WINDOW) and a firmware-update reboot in the matrix
OUTCOME_BUDGET = 8.0
#: bmaas's retry for an outcome run: the defaults, but "briefly" spans 3 s
#: (4 attempts 1 s apart), longer than the matrix's firmware-update reboot --
#: what an operator whose BMCs reboot to update sets to ride it out
OUTCOME_LIMITS = RetryLimits(bmc_timeout=1.0, unreachable_attempts=4)


def _retried(driver: BMCDriver, action: str, deadline: Deadline, calls: list[str]) -> str:
    """``action`` through bmaas's operation retry (:class:`RetryingDriver`),
    within ``deadline``, counting the driver calls it makes in ``calls``."""

    def counted(name: str) -> Callable[..., Any]:
        method = getattr(driver, name)

        def call(*args: Any, **kw: Any) -> Any:
            calls.append(name)
            return method(*args, **kw)

        return call

    retrying = RetryingDriver(_Counting(driver, counted), OUTCOME_LIMITS)  # type: ignore[arg-type]
    if action == "power_on":
        state = retrying.set_power_state(
            PowerAction.ON, wait=True, timeout=POWER_TIMEOUT, deadline=deadline
        )
        return f"ok:{state}"
    if action == "boot_pxe":
        retrying.set_boot_device(BootDevice.PXE, persistent=True, deadline=deadline)
        return "ok"
    if action == "vmedia_insert":
        retrying.insert_virtual_media(_media_url(), deadline=deadline)
        return "ok"
    if action == "login":
        driver.close()
    return f"ok:{retrying.get_power_state(deadline=deadline)}"


class _Counting:
    """A driver whose BMC calls are counted (a view for the outcome run)."""

    def __init__(self, driver: BMCDriver, counted: Callable[[str], Callable[..., Any]]) -> None:
        self._driver = driver
        self._counted = counted

    def __getattr__(self, name: str) -> Any:
        if name in _COUNTED:
            return self._counted(name)
        return getattr(self._driver, name)


_COUNTED = frozenset(
    {"get_power_state", "request_power", "set_boot_device", "insert_virtual_media", "probe"}
)

#: every effect's matrix cases, as :data:`bmaas.fakes.effects.EFFECTS` defines them
SCENARIOS: tuple[Scenario, ...] = tuple(
    dataclasses.replace(case, rule={"effect": str(effect), **case.rule})
    for effect, spec in EFFECTS.items()
    for case in spec.cases
) + tuple(
    dataclasses.replace(case, rule={"effect": "incident", **case.rule}) for case in incident_cases()
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
    #: through bmaas's retry within a budget: what was expected, what came
    #: (a fault that is not retried says how many BMC calls it took: "x1")
    outcome_expected: str = ""
    outcome: str = ""
    outcome_seconds: float = 0.0
    #: the vendor shape of the Redfish BMC ("": the protocol's own node)
    shape: str = ""

    @property
    def passed(self) -> bool:
        return self.seen == self.expected and self.outcome == self.outcome_expected

    @property
    def unclassified(self) -> bool:
        return self.seen == "UnclassifiedFault"

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "passed": self.passed}


def shape_node(shape: str) -> str:
    """The matrix node that serves ``shape``."""
    return f"matrix-redfish-{shape}"


def matrix_spec(protocols: Iterable[str], shapes: Iterable[str] = ()) -> LabSpec:
    """One healthy machine per protocol, and one Redfish machine per vendor
    shape; the matrix adds rules as it goes."""
    return LabSpec(
        nodes=tuple(
            NodeSpec(name=f"matrix-{p}", protocols=(p,), hardware=MATRIX_HARDWARE)
            for p in protocols
        )
        + tuple(
            NodeSpec(name=shape_node(s), protocols=("redfish",), hardware=MATRIX_HARDWARE, shape=s)
            for s in shapes
        )
    )


#: the calls a shape may lack: the action -> what the shape must have for it
_NEEDS: dict[str, Callable[[Any], bool]] = {
    "vmedia_insert": lambda shape: shape.has_cd,
    "boot_pxe": lambda shape: shape.boot_override,
    "boot_pxe_once": lambda shape: shape.boot_override,
}


def offered(shape: str, scenario: Scenario) -> bool:
    """Whether ``shape`` offers the call ``scenario`` makes (Redfish only)."""
    need = _NEEDS.get(scenario.action)
    return "redfish" in scenario.expected and (need is None or need(SHAPES[shape]))


def run_matrix(
    lab: Lab,
    *,
    protocols: Iterable[str] = ("ipmi", "redfish"),
    scenarios: Iterable[Scenario] = SCENARIOS,
    deadline_s: float = MATRIX_DEADLINE,
    progress: Callable[[Result], None] | None = None,
    shapes: Iterable[str] = (),
    workers: int = 4,
) -> list[Result]:
    """Run ``scenarios`` on ``lab``'s ``matrix-<protocol>`` nodes, then the
    Redfish ones on each of ``shapes``' node (``workers`` shapes at once)."""
    inventory = {n["name"]: n for n in lab.inventory()["nodes"]}
    scenarios = tuple(scenarios)
    results: list[Result] = []
    for scenario in scenarios:
        for protocol in protocols:
            if protocol not in scenario.expected:
                continue  # a vendor incident of the other protocol
            node = f"matrix-{protocol}"
            result = _run_one(lab, inventory[node], protocol, scenario, deadline_s)
            results.append(result)
            if progress is not None:
                progress(result)
    lock = threading.Lock()

    def one_shape(shape: str) -> list[Result]:
        record = inventory[shape_node(shape)]
        found = []
        for scenario in (s for s in scenarios if offered(shape, s)):
            result = dataclasses.replace(
                _run_one(lab, record, "redfish", scenario, deadline_s), shape=shape
            )
            found.append(result)
            if progress is not None:
                with lock:
                    progress(result)
        return found

    shapes = tuple(shapes)
    if shapes:
        with concurrent.futures.ThreadPoolExecutor(max(1, workers)) as pool:
            for found in pool.map(one_shape, shapes):
                results += found
    return results


def _run_one(
    lab: Lab, record: dict[str, Any], protocol: str, scenario: Scenario, deadline_s: float
) -> Result:
    node = record["name"]
    lab.clear_faults(node)
    lab.power(node, "on" if scenario.start_on else "off")
    driver = _quick(build_driver(node, protocol, record["driver_info"], bmc_timeout=deadline_s))
    try:
        _arm(lab, node, driver, scenario, power=scenario.rule.get("effect") == "incident")
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
    outcome_expected = scenario.outcome.get(protocol, "")
    outcome, outcome_seconds = "", 0.0
    if outcome_expected:
        outcome, outcome_seconds = _outcome(lab, record, protocol, scenario, deadline_s)
    return Result(
        scenario.name,
        protocol,
        expected,
        seen,
        round(seconds, 3),
        message,
        outcome_expected,
        outcome,
        round(outcome_seconds, 3),
    )


def _outcome(
    lab: Lab, record: dict[str, Any], protocol: str, scenario: Scenario, deadline_s: float
) -> tuple[str, float]:
    """The scenario again, from the start, through bmaas's operation retry."""
    node = record["name"]
    driver = _quick(build_driver(node, protocol, record["driver_info"], bmc_timeout=deadline_s))
    calls: list[str] = []
    try:
        _arm(lab, node, driver, scenario, power=True)
        start = time.monotonic()
        try:
            outcome = _retried(driver, scenario.action, Deadline.after(OUTCOME_BUDGET), calls)
        except BmaasError as exc:
            wire = [c for c in calls if c != "get_power_state" or scenario.action == "read"]
            outcome = f"{type(exc).__name__} x{len(wire)}"
        return outcome, time.monotonic() - start
    finally:
        driver.close()
        lab.clear_faults(node)


def _arm(lab: Lab, node: str, driver: BMCDriver, scenario: Scenario, *, power: bool) -> None:
    """A live session first (faults then hit a real command); ``power``: the
    transition again after it (a window opens at the last one), then the rule."""
    probe_until_up(driver)
    if power:
        lab.power(node, "on" if scenario.start_on else "off")
    lab.add_faults(node, [dict(scenario.rule)])
    if scenario.prime:
        with contextlib.suppress(BmaasError):
            driver.get_power_state(deadline=per_call(driver))


def _quick(driver: BMCDriver) -> BMCDriver:
    """``driver`` polling as often as the matrix's short deadlines need: power
    every 0.1 s, a virtual media read-back (iDRAC 10's slot reads empty for two
    reads after an insert) every 0.05 s."""
    driver.poll_interval = 0.1
    if hasattr(driver, "vmedia_poll_interval"):
        setattr(driver, "vmedia_poll_interval", 0.05)  # noqa: B010 (Redfish only)
    return driver


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
