"""hwlab's EventService, the parts without a socket: ``$filter``, the
records a power change makes, and which fault rules meet the event path."""

from __future__ import annotations

import pytest

from bmaas.driver import PowerState
from bmaas.fakes.faults import FaultPlan, FaultRule
from bmaas.fakes.machine import FakeMachine
from bmaas.hwlab.redfish.bmc import Bmc
from bmaas.hwlab.redfish.events import EventFilter, health_records, power_records


def _bmc(name: str = "f1") -> Bmc:
    return Bmc(FakeMachine(name), username="u", password="p")


def test_filter_terms_and_what_they_take() -> None:
    records = power_records(_bmc(), PowerState.OFF, 0.0)
    assert EventFilter.parse("").accepts(records)
    assert EventFilter.parse("EventFormatType eq 'Event'").accepts(records)
    assert not EventFilter.parse("EventFormatType eq 'MetricReport'").accepts(records)
    assert EventFilter.parse("RegistryPrefixes eq 'ResourceEvent'").accepts(records)
    assert not EventFilter.parse("RegistryPrefixes eq 'iLOEvents'").accepts(records)
    both = "OriginResource eq '/redfish/v1/Systems/f1' and ResourceTypes eq 'ComputerSystem'"
    assert EventFilter.parse(both).accepts(records)
    assert not EventFilter.parse("OriginResource eq '/redfish/v1/Systems/f2'").accepts(records)
    for bad in ("Bogus eq 'x'", "OriginResource ne 'x'", "OriginResource eq x"):
        with pytest.raises(ValueError, match="cannot filter"):
            EventFilter.parse(bad)


def test_a_power_change_is_powered_off_and_resource_changed_about_the_system() -> None:
    records = power_records(_bmc(), PowerState.OFF, 1.5)
    assert [r["MessageId"] for r in records] == [
        "ResourceEvent.1.3.0.ResourcePoweredOff",
        "ResourceEvent.1.3.0.ResourceChanged",
    ]
    assert {r["OriginOfCondition"]["@odata.id"] for r in records} == {"/redfish/v1/Systems/f1"}
    health = health_records(_bmc(), "Critical")
    assert health[0]["MessageId"] == "ResourceEvent.1.3.0.ResourceStatusChangedCritical"


def test_only_rules_that_name_the_event_path_meet_it() -> None:
    plan = FaultPlan(
        [
            FaultRule.from_dict({"effect": "drop", "operation": "*"}),
            FaultRule.from_dict({"effect": "delay", "seconds": 1, "operation": "power.*"}),
            FaultRule.from_dict({"effect": "duplicate", "operation": "event.*"}),
        ]
    )
    assert [str(f.effect) for f in plan.evaluate("event.power")] == ["duplicate"]
    assert sorted(str(f.effect) for f in plan.evaluate("power.get")) == ["delay", "drop"]
    with pytest.raises(Exception, match="acts only on"):
        FaultRule.from_dict({"effect": "power_stuck", "operation": "event.power"})


def test_the_machine_tells_its_watchers_every_landing_whoever_made_it() -> None:
    machine = FakeMachine("w1", power=PowerState.ON)
    seen: list[tuple[PowerState, str]] = []
    machine.watchers.append(lambda power, health, age: seen.append((power, health)))
    machine.force_power(PowerState.OFF)
    machine.set_health("Warning")
    machine.set_health("Warning")  # no change: not told
    assert seen == [(PowerState.OFF, "OK"), (PowerState.OFF, "Warning")]


def test_a_scheduled_transition_says_when_it_lands() -> None:
    from bmaas.driver import PowerAction
    from bmaas.fakes.clock import FakeClock

    clock = FakeClock()
    machine = FakeMachine("w2", clock=clock)
    seen: list[PowerState] = []
    machine.watchers.append(lambda power, health, age: seen.append(power))
    assert machine.next_change_in() is None
    machine.set_power(PowerAction.ON)  # accepted: told (still off), lands in 2 s
    assert seen == [PowerState.OFF]
    assert machine.next_change_in() == pytest.approx(2.0)
    clock.advance(2.5)
    assert machine.next_change_in() is None  # looking lands it: told
    assert seen == [PowerState.OFF, PowerState.ON]
