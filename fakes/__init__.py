"""Simulated hardware: machines with power physics, seeded fault rules, and an
in-process driver that fails exactly the way real drivers do."""

from fakes.clock import FakeClock
from fakes.faults import Effect, FaultPlan, FaultRule
from fakes.fleet import FakeFleet
from fakes.machine import FakeMachine, Hardware

__all__ = ["Effect", "FakeClock", "FakeFleet", "FakeMachine", "FaultPlan", "FaultRule", "Hardware"]
