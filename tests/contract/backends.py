"""The drivers the contract suite runs on, each a factory of ``Target``.

A protocol issue adds its backend here (a factory plus a ``pytest.param`` in
``BACKENDS``); every contract test then runs on it too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator

import pytest

from bmaas.driver import BMCDriver, PowerState
from bmaas.driver_info import DriverInfo
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.fleet import FakeFleet
from bmaas.fakes.machine import FakeMachine, Hardware
from tests.budgets import HEALTHY_BMC_TIMEOUT

#: quick transitions so real-time backends converge in well under a second
CONTRACT_HARDWARE = Hardware(
    power_on_time=0.2, power_off_time=0.1, soft_off_time=0.3, os_boot_time=0.5
)


@dataclasses.dataclass
class Target:
    driver: BMCDriver
    #: the simulated hardware behind the BMC, to arrange and to verify
    machine: FakeMachine
    #: how long a power transition may take to be seen through this driver
    power_timeout: float
    #: let time pass (fake clock: instantly; real backends: a real sleep)
    wait: Callable[[float], None]


class CoreOnlyFakeDriver(FakeDriver):
    """A driver that offers only the required core, to check that missing
    capabilities raise UnsupportedOperation through the base class."""

    capabilities = frozenset(
        {c for c in FakeDriver.capabilities if c.value in ("power", "boot_device", "soft_power")}
    )
    insert_virtual_media = BMCDriver.insert_virtual_media
    eject_virtual_media = BMCDriver.eject_virtual_media
    get_inventory = BMCDriver.get_inventory
    get_boot_progress = BMCDriver.get_boot_progress
    get_firmware_inventory = BMCDriver.get_firmware_inventory
    get_bios = BMCDriver.get_bios
    set_bios = BMCDriver.set_bios


def _fake(cls: type[FakeDriver]) -> Callable[[], contextlib.AbstractContextManager[Target]]:
    @contextlib.contextmanager
    def factory() -> Iterator[Target]:
        fleet = FakeFleet(clock=FakeClock())
        machine = fleet.add("c1", hardware=CONTRACT_HARDWARE, power=PowerState.OFF)
        driver = cls("c1", machine=machine, clock=fleet.clock.monotonic, sleep=fleet.clock.sleep)
        yield Target(driver, machine, power_timeout=5.0, wait=fleet.clock.advance)
        driver.close()

    return factory


@contextlib.contextmanager
def _ipmi() -> Iterator[Target]:
    """IPMIDriver against an hwlab IPMI BMC on 127.0.0.1, real time."""
    from bmaas.drivers.ipmi import IPMIDriver
    from bmaas.hwlab.ipmi import IPMIServer

    machine = FakeMachine("c1", CONTRACT_HARDWARE, power=PowerState.OFF)
    with IPMIServer() as server:
        port = server.add(machine, username="admin", password="contract-pw")
        info = DriverInfo.parse(
            {
                "ipmi_address": "127.0.0.1",
                "ipmi_port": port,
                "ipmi_username": "admin",
                "ipmi_password": "contract-pw",
            }
        )
        driver = IPMIDriver("c1", info, bmc_timeout=HEALTHY_BMC_TIMEOUT)
        driver.poll_interval = 0.05
        try:
            yield Target(driver, machine, power_timeout=3.0, wait=time.sleep)
        finally:
            driver.close()


BACKENDS = [
    pytest.param(_fake(FakeDriver), id="fake"),
    pytest.param(_fake(CoreOnlyFakeDriver), id="fake-core-only"),
    pytest.param(_ipmi, id="ipmi", marks=pytest.mark.lab),
]


# -- Redfish: RedfishDriver against hwlab's emulated BMC over loopback ----------


def _redfish(*, tls: bool) -> Callable[[], contextlib.AbstractContextManager[Target]]:
    @contextlib.contextmanager
    def factory() -> Iterator[Target]:
        import time

        from bmaas.drivers.redfish import RedfishDriver
        from bmaas.hwlab.redfish import RedfishServer

        machine = FakeMachine("c1", CONTRACT_HARDWARE)
        with RedfishServer(tls=tls) as server:
            port = server.add(machine, username="contract", password="contract-pw")
            raw = {
                "redfish_address": server.url(port),
                "redfish_username": "contract",
                "redfish_password": "contract-pw",
                "redfish_system_id": "/redfish/v1/Systems/c1",
            }
            if tls:
                raw["redfish_verify_ca"] = server.ca_path
            info = DriverInfo.parse(raw, required=RedfishDriver.required_info)
            driver = RedfishDriver("c1", info, bmc_timeout=HEALTHY_BMC_TIMEOUT)
            driver.poll_interval = 0.02
            try:
                yield Target(driver, machine, power_timeout=3.0, wait=time.sleep)
            finally:
                driver.close()

    return factory


BACKENDS += [
    pytest.param(_redfish(tls=False), id="redfish", marks=pytest.mark.lab),
    pytest.param(_redfish(tls=True), id="redfish-tls", marks=pytest.mark.lab),
]
