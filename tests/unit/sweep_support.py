"""A picklable factory for sharded-sweep tests: every worker process builds
the same deterministic fake fleet (power and faults follow the node's name),
so a sharded sweep and an in-process one must return the same results."""

from __future__ import annotations

import gc
import os
import signal
import threading

from bmaas.driver import BMCDriver, PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.fleet import FakeFleet
from bmaas.ops import DriverFactory
from bmaas.store.records import NodeRecord
from bmaas.sweep import shard_of
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


def die_in_shard_zero(driver: BMCDriver) -> PowerState:
    """Kill the worker process itself on a shard-0 node (of two): a worker
    that dies mid-sweep, every time. A SIGKILL sent from the test between
    sweeps races the sweeper's liveness check: on a loaded machine the death
    is noticed first, the worker replaced, and nothing is lost."""
    if shard_of(driver.bmc_label, 2) == 0:  # sweeps shard by BMC (bmaas.gate.bmc_of)
        os.kill(os.getpid(), signal.SIGKILL)
    return driver.get_power_state(deadline=per_call(driver))


def frozen_objects(driver: BMCDriver) -> int:
    """How many objects the worker process's collector has frozen
    (:mod:`bmaas.heap`): 0 until a pass that opened sessions was settled."""
    driver.get_power_state(deadline=per_call(driver))
    return gc.get_freeze_count()
