"""Simulated hardware: machines with power physics, seeded fault rules, and an
in-process driver that fails exactly the way real drivers do."""

from bmaas.fakes.clock import FakeClock
from bmaas.fakes.faults import Effect, FaultPlan, FaultRule
from bmaas.fakes.fleet import FakeFleet
from bmaas.fakes.machine import FakeMachine, Hardware

__all__ = ["Effect", "FakeClock", "FakeFleet", "FakeMachine", "FaultPlan", "FaultRule", "Hardware"]
