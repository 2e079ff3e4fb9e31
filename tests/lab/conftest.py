"""Fixtures for lab tests: emulated BMCs on 127.0.0.1 and a leak check."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pyghmi.ipmi.private import session as pyghmi_session

from bmaas.driver import PowerState
from bmaas.driver_info import DriverInfo
from bmaas.drivers.ipmi import IPMIDriver
from bmaas.fakes.faults import Effect, FaultRule
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.faults import BMCTimeout, BMCUnreachable
from bmaas.hwlab.ipmi import IPMIServer
from bmaas.hwlab.proxy.stock import StockVbmc
from tests.budgets import HEALTHY_BMC_TIMEOUT
from tests.lab import pyghmi_state
from tests.lab.proxy_support import proxy_host, stock_sushy, stock_vbmc

__all__ = ["proxy_host", "stock_sushy", "stock_vbmc"]  # fixtures for the proxy tests


def _have_virtualbmc() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("libvirt", "virtualbmc"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that start a stock vbmcd are marked ``vbmc``: they need the
    ``bmaas[virtualbmc]`` extra (libvirt-python), which CI installs and a
    default setup does not. Without it they are deselected, with one line
    saying so, unless ``BMAAS_REQUIRE_VBMC=1`` (CI), where they run and fail."""
    for item in items:
        if "stock_vbmc" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.vbmc)
    if os.environ.get("BMAAS_REQUIRE_VBMC") == "1" or _have_virtualbmc():
        return
    dropped = [i for i in items if i.get_closest_marker("vbmc")]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if not i.get_closest_marker("vbmc")]
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"deselected {len(dropped)} 'vbmc' test(s): bmaas[virtualbmc] is not installed "
                "(BMAAS_SETUP_EXTRAS=virtualbmc bash scripts/setup.sh)"
            )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A test that failed because a BMC stayed silent gets a report section
    on pyghmi's client state (:mod:`tests.lab.pyghmi_state`): silence that is
    the client's own shows there."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    silent = (BMCUnreachable, BMCTimeout, AssertionError)
    if report.failed and call.excinfo is not None and call.excinfo.errisinstance(silent):
        report.sections.append(("pyghmi client state", pyghmi_state.describe()))


@pytest.fixture(autouse=True)
def _vbmc_needs_its_marker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run-time half of the extras guard (tests/conftest.py has the
    collection half): a test not marked ``vbmc`` that reaches a stock vbmcd
    (through a helper, a proxy lab spec with ``stock: vbmc``, ...) fails here,
    with the extra installed or not."""
    if request.node.get_closest_marker("vbmc") is not None:
        return

    def refuse(*_args: object, **_kw: object) -> None:
        pytest.fail(f"{request.node.nodeid} starts a stock vbmcd: mark it @pytest.mark.vbmc")

    monkeypatch.setattr(StockVbmc, "start", refuse)


#: quick transitions so real-time tests converge in well under a second
LAB_HARDWARE = Hardware(power_on_time=0.2, power_off_time=0.1, soft_off_time=0.3, os_boot_time=0.5)
USER = "admin"
PASSWORD = "Lab-Secret-7f3a"


def open_fds() -> set[int]:
    """This process's file descriptors, minus pyghmi's pooled client sockets
    (pyghmi keeps them for the life of the process, by design)."""
    pooled = {s.fileno() for s in pyghmi_session.iosockets if s.fileno() >= 0}
    return {int(fd) for fd in os.listdir("/proc/self/fd")} - pooled


def live_threads() -> set[threading.Thread]:
    """Threads now, minus pyghmi's one process-wide IO thread (its design)."""
    return set(threading.enumerate()) - {pyghmi_session.iothread}


@pytest.fixture
def no_leaks() -> Iterator[None]:
    """Fail the test if it leaves a thread or a file descriptor behind."""
    threads, fds = live_threads(), open_fds()
    yield
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and (live_threads() - threads or open_fds() - fds):
        time.sleep(0.02)  # a stopping thread may need a moment to finish
    assert not live_threads() - threads, f"threads left behind: {live_threads() - threads}"
    assert not open_fds() - fds, f"file descriptors left behind: {open_fds() - fds}"


class Lab:
    """An IPMIServer plus the drivers a test made, all cleaned up after it."""

    def __init__(self, server: IPMIServer) -> None:
        self.server = server
        self.drivers: list[IPMIDriver] = []

    def machine(
        self,
        name: str = "n1",
        *,
        power: PowerState = PowerState.OFF,
        hardware: Hardware = LAB_HARDWARE,
        **add: Any,
    ) -> FakeMachine:
        machine = FakeMachine(name, hardware, power=power)
        self.server.add(machine, username=USER, password=PASSWORD, **add)
        return machine

    def info(self, name: str = "n1", **overrides: Any) -> DriverInfo:
        raw = {
            "ipmi_address": "127.0.0.1",
            "ipmi_port": self.server.endpoints[name],
            "ipmi_username": USER,
            "ipmi_password": PASSWORD,
            **overrides,
        }
        return DriverInfo.parse(raw)

    def driver(
        self, name: str = "n1", *, bmc_timeout: float = HEALTHY_BMC_TIMEOUT, **overrides: Any
    ) -> IPMIDriver:
        """A driver for lab node ``name``. Its bound is the healthy one: a test
        that means a BMC to time out, or times a call, passes its own
        ``bmc_timeout`` (a login to the emulator took over 2 s at load 24)."""
        driver = IPMIDriver(name, self.info(name, **overrides), bmc_timeout=bmc_timeout)
        driver.poll_interval = 0.05
        self.drivers.append(driver)
        return driver

    @staticmethod
    def rule(machine: FakeMachine, **rule: Any) -> None:
        machine.plan.add(FaultRule.from_dict(rule))

    @staticmethod
    def counter(machine: FakeMachine, operation: str) -> str:
        """Count requests for ``operation`` that reach the BMC: a rule whose
        effect is a zero delay fires on every one. Returns its name."""
        name = f"count-{operation}"
        machine.plan.add(
            FaultRule(effect=Effect.DELAY, operation=operation, params={"seconds": 0.0}, name=name)
        )
        return name


@pytest.fixture
def lab(no_leaks: None) -> Iterator[Lab]:
    with IPMIServer() as server:
        lab = Lab(server)
        try:
            yield lab
        finally:
            for driver in lab.drivers:
                driver.close()


@pytest.fixture
def sse_services(
    request: pytest.FixtureRequest,
) -> Iterator[tuple[subprocess.Popen[str], list[int]]]:
    """:mod:`tests.lab.sse_fleet`'s services in a process of their own, for
    the event-stream fleet tests alike: ``request.param`` is ``(COUNT,)``
    or ``(COUNT, "push")`` (indirect parametrization); the process and the
    services' ports."""
    from tests.lab import sse_fleet

    with sse_fleet.running(*request.param) as running:
        yield running
