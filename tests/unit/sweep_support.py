"""A picklable factory for sharded-sweep tests: every worker process builds
the same deterministic fake fleet (power and faults follow the node's name),
so a sharded sweep and an in-process one must return the same results."""

from __future__ import annotations

import threading

from bmaas.driver import BMCDriver, PowerState
from bmaas.ops import DriverFactory
from bmaas.store.records import NodeRecord
from fakes.clock import FakeClock
from fakes.driver import FakeDriver
from fakes.fleet import FakeFleet
from tests.budgets import per_call


def make_factory(*, bmc_timeout: float = 2.0, faulty: tuple[str, ...] = ()) -> DriverFactory:
    fleet = FakeFleet(clock=FakeClock())
    known: set[str] = set()
    lock = threading.Lock()

    def build(record: NodeRecord) -> BMCDriver:
        name = record.name
        with lock:
            if name not in known:
                known.add(name)
                on = int(name.lstrip("n")) % 3 == 0
                rules = (
                    [{"effect": "auth_fail", "operation": "power.get"}] if name in faulty else []
                )
                fleet.add(name, power=PowerState.ON if on else PowerState.OFF, rules=rules)
        return FakeDriver(name, fleet=fleet, bmc_timeout=bmc_timeout)

    return build


def read_power(driver: BMCDriver) -> PowerState:
    return driver.get_power_state(deadline=per_call(driver))
