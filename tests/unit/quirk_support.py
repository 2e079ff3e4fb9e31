"""A picklable factory of fake drivers that learn the IPMI cipher suite 3
downgrade as bmaas's IPMI driver does (at their first BMC call, when
``ipmi_cipher_suite: auto`` let the session fall back), for tests of who
records it: in-process passes, sharded workers, shared workers."""

from __future__ import annotations

import threading
from typing import Any

from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver, PowerState, Quirk
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.fleet import FakeFleet
from bmaas.ops import DriverFactory
from bmaas.store.records import NodeRecord

#: the nodes whose BMC refuses suite 17 (by name, in every process alike)
DOWNGRADED = ("n02", "n05")


class SuiteThreeDriver(FakeDriver):
    """Logs in (its first call) with suite 3 when its BMC refuses 17."""

    def __init__(self, node: str, *, downgraded: bool, **kw: Any) -> None:
        super().__init__(node, **kw)
        self.downgraded = downgraded

    def get_power_state(self, *, deadline: Deadline) -> PowerState:
        if self.downgraded:
            self.quirks.add(Quirk.IPMI_SUITE_3)  # what the IPMI driver's login does
        return super().get_power_state(deadline=deadline)


def make_factory(
    *,
    bmc_timeout: float = 2.0,
    downgraded: tuple[str, ...] = DOWNGRADED,
    fail: tuple[str, ...] = (),
) -> DriverFactory:
    """Each process's own fleet; ``fail``: nodes whose read then hangs (the
    quirk was learned at login all the same)."""
    fleet = FakeFleet(clock=FakeClock())
    known: set[str] = set()
    lock = threading.Lock()

    def build(record: NodeRecord) -> BMCDriver:
        with lock:
            if record.name not in known:
                known.add(record.name)
                rules = (
                    [{"effect": "hang", "operation": "power.get"}] if record.name in fail else []
                )
                fleet.add(record.name, rules=rules)
        return SuiteThreeDriver(
            record.name,
            fleet=fleet,
            bmc_timeout=bmc_timeout,
            downgraded=record.name in downgraded,
        )

    return build
