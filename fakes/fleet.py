"""A set of simulated machines sharing one clock.

Code that builds drivers through the entry point (``build_driver(node, "fake",
{...})``) has no machine to hand over; :class:`FakeDriver` then looks its
machine up here by ``driver_info.fake_machine`` or node name, creating a
healthy one on first use. Tests make their own ``FakeFleet`` with a
:class:`~bmaas.fakes.clock.FakeClock` so nothing sleeps for real, and a driver on
it with ``FakeDriver(name, fleet=fleet)`` (its clock, its machine).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

from bmaas.driver import PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.faults import FaultPlan, FaultRule
from bmaas.fakes.machine import FakeMachine, Hardware

__all__ = ["DEFAULT_FLEET", "FakeFleet"]


class FakeFleet:
    def __init__(self, *, clock: FakeClock | None = None, seed: int | str = 0) -> None:
        self.clock = clock or FakeClock()
        self.seed = seed
        self._machines: dict[str, FakeMachine] = {}
        self._lock = threading.Lock()

    def add(
        self,
        name: str,
        *,
        hardware: Hardware | None = None,
        rules: Iterable[FaultRule | dict[str, Any]] = (),
        power: PowerState = PowerState.OFF,
    ) -> FakeMachine:
        """Create (or replace) a machine with its own fault plan."""
        parsed = [r if isinstance(r, FaultRule) else FaultRule.from_dict(r) for r in rules]
        plan = FaultPlan(parsed, seed=self.seed, node=name, clock=self.clock.monotonic)
        machine = FakeMachine(name, hardware, clock=self.clock.monotonic, plan=plan, power=power)
        with self._lock:
            self._machines[name] = machine
        return machine

    def machine(self, name: str) -> FakeMachine:
        """The machine called ``name``, created healthy on first use."""
        with self._lock:
            found = self._machines.get(name)
        return found if found is not None else self.add(name)

    def __iter__(self) -> Iterator[FakeMachine]:
        with self._lock:
            return iter(list(self._machines.values()))


#: the fleet behind ``build_driver(..., "fake", ...)``
DEFAULT_FLEET = FakeFleet()
