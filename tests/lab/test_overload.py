"""hwlab's ``overload`` effect against clients side by side: a BMC that
stops answering for a while when it gets more than 2 requests at once or
more than 5 a second. Bare clients in parallel (requests/sushy-style threads,
ipmitool processes as Ironic runs them) set it off; bmaas, with the BMC's
limits in its gate (``bmc_max_requests: 2``, ``bmc_min_interval: 0.25``),
reads the same nodes as many times and never does. The trigger firings are
the event log's overload events. Issue 24 (the small, single-process form
of its 200-node scenario)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import shutil
import subprocess
from collections.abc import Iterator

import pytest
import requests

from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver
from bmaas.fakes.faults import FaultRule, Firing
from bmaas.fakes.machine import FakeMachine
from bmaas.hwlab.redfish import RedfishServer
from bmaas.registry import build_driver
from tests.lab.conftest import PASSWORD, USER
from tests.lab.conftest import Lab as IpmiLab
from tests.lab.redfish_support import HARDWARE
from tests.lab.redfish_support import PASSWORD as RF_PASSWORD
from tests.lab.redfish_support import USERNAME as RF_USERNAME

pytestmark = pytest.mark.lab

OVERLOAD = {"effect": "overload", "max_concurrent": 2, "max_rate": 5, "duration": 1.0}
#: what bmaas is told about such a BMC (per node, in driver_info)
LIMITS = {"bmc_max_requests": 2, "bmc_min_interval": 0.25}
SYSTEMS = 4
READS = 3  # passes over every system


def triggers(machines: list[FakeMachine]) -> list[Firing]:
    seen: list[Firing] = []
    for machine in machines:
        machine.plan.add(FaultRule.from_dict(OVERLOAD))
        machine.plan.listeners.append(seen.append)
    return seen


def overloads(seen: list[Firing]) -> int:
    return sum(1 for f in seen if "trigger" in f.params)


@pytest.fixture
def service() -> Iterator[tuple[RedfishServer, list[FakeMachine], int]]:
    machines = [FakeMachine(f"ov-{i}", HARDWARE) for i in range(SYSTEMS)]
    with RedfishServer() as server:
        port = server.add_service(machines, username=RF_USERNAME, password=RF_PASSWORD)
        yield server, machines, port


def test_bare_threads_overload_a_redfish_service_bmaas_does_not(
    service: tuple[RedfishServer, list[FakeMachine], int],
) -> None:
    server, machines, port = service
    seen = triggers(machines)
    url = server.url(port)

    def bare(path: str) -> None:
        for _ in range(READS):
            with contextlib.suppress(requests.RequestException):  # silent BMC: timed out
                requests.get(f"{url}{path}", auth=(RF_USERNAME, RF_PASSWORD), timeout=0.5)

    paths = [f"/redfish/v1/Systems/{m.name}" for m in machines] * 2  # 8 threads
    with concurrent.futures.ThreadPoolExecutor(len(paths)) as threads:
        list(threads.map(bare, paths))
    bare_overloads = overloads(seen)
    assert bare_overloads > 0  # reported, not a number to hold
    seen.clear()
    for machine in machines:  # let the BMC come back before bmaas's turn
        machine.plan.clear()
        machine.plan.add(FaultRule.from_dict(OVERLOAD))

    drivers = [
        build_driver(
            m.name,
            "redfish",
            {
                "redfish_address": url,
                "redfish_system_id": f"/redfish/v1/Systems/{m.name}",
                "redfish_username": RF_USERNAME,
                "redfish_password": RF_PASSWORD,
                **LIMITS,
            },
            bmc_timeout=10.0,
        )
        for m in machines
    ]

    def bmaas(driver: BMCDriver) -> None:
        for _ in range(READS):
            driver.get_power_state(deadline=Deadline.after(10))

    try:
        with concurrent.futures.ThreadPoolExecutor(8) as threads:  # the same 8 threads
            list(threads.map(bmaas, drivers * 2))
    finally:
        for driver in drivers:
            driver.close()
    assert overloads(seen) == 0
    print(f"overload events: bare threads x8 {bare_overloads}, bmaas 0")


def _ipmitool(lab: IpmiLab, *args: str) -> int:
    tool = shutil.which("ipmitool") or pytest.fail("ipmitool is not installed")
    command = [tool, "-I", "lanplus", "-H", "127.0.0.1", "-p", str(lab.server.endpoints["n1"])]
    command += ["-U", USER, "-P", PASSWORD, "-C", "17", "-N", "1", "-R", "1", *args]
    return subprocess.run(command, capture_output=True, timeout=15, check=False).returncode


def test_ipmitool_times_eight_overloads_an_ipmi_bmc_bmaas_does_not(lab: IpmiLab) -> None:
    machine = lab.machine()
    seen = triggers([machine])
    with concurrent.futures.ThreadPoolExecutor(8) as threads:  # as Ironic's power sync
        list(threads.map(lambda _: _ipmitool(lab, "power", "status"), range(8)))
    bare_overloads = overloads(seen)
    assert bare_overloads > 0
    machine.plan.clear()
    machine.plan.add(FaultRule.from_dict(OVERLOAD))
    seen.clear()
    driver = lab.driver(bmc_timeout=5.0, **LIMITS)
    for _ in range(12):
        driver.get_power_state(deadline=Deadline.after(5))
    assert overloads(seen) == 0, [(f.time, f.operation, dict(f.params)) for f in seen]
    print(f"overload events: ipmitool x8 {bare_overloads}, bmaas 0")
