"""Fault rules and plans: matching, timing, determinism, validation."""

from __future__ import annotations

import pytest

from bmaas.driver import PowerAction
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.faults import Effect, FaultPlan, FaultRule
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.faults import InputError
from bmaas.yamlsrc import load_text

OPS = ["power.get", "power.set", "boot.get", "boot.set", "probe"]


def _sequence(plan: FaultPlan, calls: int = 1000) -> list[tuple[int, str, str]]:
    out = []
    for i in range(calls):
        op = OPS[i % len(OPS)]
        out.extend((i, op, str(f.effect)) for f in plan.evaluate(op, protocol="ipmi"))
    return out


def _chaos_rules() -> list[FaultRule]:
    return [
        FaultRule.from_dict({"effect": "busy", "operation": "power.*", "probability": 0.1}),
        FaultRule.from_dict({"effect": "drop", "rate": 0.3, "probability": 0.5}),
        FaultRule.from_dict(
            {"effect": "internal_error", "operation": "boot.*", "probability": 0.05}
        ),
    ]


def test_same_seed_same_effects_over_1000_calls() -> None:
    a = _sequence(FaultPlan(_chaos_rules(), seed=42, node="n1", clock=FakeClock()))
    b = _sequence(FaultPlan(_chaos_rules(), seed=42, node="n1", clock=FakeClock()))
    assert a == b
    assert len(a) > 50  # the rules really fired


def test_different_seed_or_node_different_effects() -> None:
    a = _sequence(FaultPlan(_chaos_rules(), seed=42, node="n1", clock=FakeClock()))
    assert a != _sequence(FaultPlan(_chaos_rules(), seed=43, node="n1", clock=FakeClock()))
    assert a != _sequence(FaultPlan(_chaos_rules(), seed=42, node="n2", clock=FakeClock()))


def test_adding_a_rule_does_not_reshuffle_the_others() -> None:
    base = _chaos_rules()
    a = FaultPlan(base, seed=1, clock=FakeClock())
    b = FaultPlan(
        [*base, FaultRule(Effect.HANG, operation="nothing.matches")], seed=1, clock=FakeClock()
    )
    assert _sequence(a, 300) == _sequence(b, 300)


def test_glob_protocol_nth_and_times() -> None:
    plan = FaultPlan(
        [
            FaultRule(Effect.BUSY, operation="power.*", protocol="redfish", nth=(2, 4)),
            FaultRule(Effect.HANG, operation="boot.get", times=2),
        ],
        clock=FakeClock(),
    )
    fired = [bool(plan.evaluate("power.get", protocol="redfish")) for _ in range(5)]
    assert fired == [False, True, False, True, False]
    assert plan.evaluate("power.get", protocol="ipmi") == []
    assert [bool(plan.evaluate("boot.get")) for _ in range(4)] == [True, True, False, False]
    assert list(plan.counts().values()) == [2, 2]


def test_time_window_on_the_plan_clock() -> None:
    clock = FakeClock()
    plan = FaultPlan([FaultRule(Effect.AUTH_FAIL, after=10, until=20)], clock=clock)
    seen = []
    for _ in range(6):
        seen.append(bool(plan.evaluate("login")))
        clock.advance(5)
    # t = 0, 5, 10, 15, 20, 25
    assert seen == [False, False, True, True, False, False]


def test_effects_come_wire_first_then_bmc_then_hardware() -> None:
    plan = FaultPlan(
        [
            FaultRule(Effect.POWER_STUCK),
            FaultRule(Effect.BUSY),
            FaultRule(Effect.DELAY, params={"seconds": 1}),
        ],
        clock=FakeClock(),
    )
    assert [f.effect for f in plan.evaluate("power.set")] == [
        Effect.DELAY,
        Effect.BUSY,
        Effect.POWER_STUCK,
    ]


def test_listeners_see_every_firing_with_its_rule_name() -> None:
    plan = FaultPlan([FaultRule(Effect.BUSY, name="busy-all")], node="n3", clock=FakeClock(5))
    events = []
    plan.listeners.append(events.append)
    plan.evaluate("power.get", protocol="ipmi")
    assert [e.to_dict() for e in events] == [
        {
            "time": 5.0,
            "node": "n3",
            "protocol": "ipmi",
            "operation": "power.get",
            "effect": "busy",
            "rule": "busy-all",
            "params": {},
        }
    ]


def test_clear_and_add_at_runtime() -> None:
    plan = FaultPlan([FaultRule(Effect.BUSY)], clock=FakeClock())
    assert plan.evaluate("x")
    plan.clear()
    assert plan.evaluate("x") == []
    plan.add(FaultRule(Effect.HANG))
    assert [f.effect for f in plan.evaluate("x")] == [Effect.HANG]


def test_plan_from_yaml_with_defaults() -> None:
    doc = load_text(
        "seed: 9\nrules:\n  - {effect: busy, operation: 'power.*', retry_after: 2}\n"
        "  - {effect: bmc_reboot}\n  - {effect: slow_power, seconds: 30}\n"
    )
    plan = FaultPlan.from_dict(doc, clock=FakeClock())
    assert plan.seed == 9
    rules = plan.rules
    assert rules[0].params == {"retry_after": 2.0}
    assert rules[1].params == {"duration": 30.0}
    assert rules[2].params == {"seconds": 30.0}
    assert FaultRule.from_dict(rules[0].to_dict()) == rules[0]


@pytest.mark.parametrize(
    ("text", "line", "field", "needle"),
    [
        (
            "rules:\n  - effect: busy\n    probabilty: 0.1\n",
            3,
            "rules[0].probabilty",
            "unknown key",
        ),
        ("rules:\n  - effect: explode\n", 2, "rules[0].effect", "unknown effect 'explode'"),
        ("rules:\n  - {effect: busy}\n  - effect: delay\n", 3, "rules[1].seconds", "is required"),
        (
            "rules:\n  - effect: busy\n    probability: 2\n",
            3,
            "rules[0].probability",
            "from 0 to 1",
        ),
        ("rules:\n  - effect: busy\n    nth: 0\n", 3, "rules[0].nth", "call number"),
        ("rules:\n  - effect: busy\n    after: 5\n    until: 1\n", 4, "rules[0].until", "later"),
        ("rules:\n  - effect: hang\n    protocol: snmp\n", 3, "rules[0].protocol", "ipmi"),
        ("rulez: []\n", 1, "rulez", "unknown key"),
    ],
)
def test_bad_plans_name_file_line_and_field(text: str, line: int, field: str, needle: str) -> None:
    with pytest.raises(InputError) as info:
        FaultPlan.from_dict(load_text(text, source="plan.yaml"), source="plan.yaml")
    err = info.value
    assert (err.source, err.line, err.field) == ("plan.yaml", line, field)
    assert needle in str(err)
    assert str(err).startswith(f"plan.yaml:{line}: ")


def test_yaml_syntax_error_has_a_line() -> None:
    with pytest.raises(InputError) as info:
        load_text("rules:\n  - effect: [busy\n", source="bad.yaml")
    assert info.value.source == "bad.yaml"
    assert info.value.line is not None


def test_bmc_reboot_without_times_says_it_recurs() -> None:
    recurring = FaultRule.from_dict({"effect": "bmc_reboot", "duration": 5})
    assert recurring.describe().endswith("duration=5.0 recurring")
    once = FaultRule.from_dict({"effect": "bmc_reboot", "times": 1})
    assert "recurring" not in once.describe()


def test_an_effect_names_the_operations_it_acts_on() -> None:
    with pytest.raises(InputError, match=r"acts only on power\.set") as info:
        FaultRule.from_dict({"effect": "power_stuck", "operation": "boot.*"})
    assert info.value.field == "rule.operation"
    FaultRule.from_dict({"effect": "power_stuck", "operation": "power.*"})


def test_trickle_parameters_are_checked() -> None:
    rule = FaultRule.from_dict({"effect": "trickle", "bytes": 16, "every": 0.5})
    assert rule.params == {"bytes": 16, "every": 0.5}
    with pytest.raises(InputError, match="must be a number > 0"):
        FaultRule.from_dict({"effect": "trickle", "every": 0})
    with pytest.raises(InputError, match="whole number"):
        FaultRule.from_dict({"effect": "trickle", "bytes": 1.5})


def test_a_power_window_fires_only_while_the_machine_has_been_off_briefly() -> None:
    clock = FakeClock()
    machine = FakeMachine("n1", Hardware(power_on_time=1, power_off_time=1), clock=clock.monotonic)
    rule = FaultRule.from_dict(
        {"effect": "busy", "operation": "power.set", "power": "off", "within": 5}
    )
    machine.plan.add(rule)
    assert [f.effect for f in machine.plan.evaluate("power.set")] == [Effect.BUSY]
    clock.advance(6)  # off for 6 s: the window closed
    assert machine.plan.evaluate("power.set") == []
    machine.set_power(PowerAction.ON)
    clock.advance(2)  # on now: an "off" window never fires
    assert machine.plan.evaluate("power.set") == []
    machine.set_power(PowerAction.OFF)
    clock.advance(1.5)  # landed off 0.5 s ago: open again
    assert len(machine.plan.evaluate("power.set")) == 1


def test_a_changed_window_counts_from_the_last_transition_and_a_proxy_ignores_it() -> None:
    clock = FakeClock()
    machine = FakeMachine("n1", clock=clock.monotonic)
    machine.plan.add(FaultRule.from_dict({"effect": "incident", "incident": "ilo-settling"}))
    assert len(machine.plan.evaluate("power.set")) == 1  # created (a transition) 0 s ago
    clock.advance(6)
    assert machine.plan.evaluate("power.set") == []
    no_machine = FaultPlan(
        [FaultRule.from_dict({"effect": "incident", "incident": "ilo-settling"})]
    )
    assert len(no_machine.evaluate("power.set")) == 1  # a proxy: the other conditions decide
