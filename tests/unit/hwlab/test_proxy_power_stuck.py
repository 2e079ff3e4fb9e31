"""``power_stuck`` on a proxy (issue 38): the one hardware effect a proxy
carries out, by answering the power request as accepted in the BMC's place
and never relaying it -- what a client meets when a BMC acknowledges a power
action that never lands (vbmc's natural one). Redfish: a 204 to the Reset;
IPMI: completion code 0 to Chassis Control, forged with the session keys, so
an IPMI proxy takes the rule only with the BMC credentials."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bmaas.fakes.effects import Firing, decide
from bmaas.fakes.faults import Effect, FaultRule
from bmaas.faults import InputError
from bmaas.hwlab.answers import IPMI_ACCEPTED, ipmi_code, redfish_answer
from bmaas.hwlab.ipmi_action import Served, carry_out
from bmaas.hwlab.proxy.effects import (
    ACKNOWLEDGED,
    SUPPORTED,
    check_rule,
    expected_fault,
    ipmi_needs_credentials,
)

STUCK = FaultRule.from_dict({"name": "psu", "effect": "power_stuck", "operation": "power.set"})


def firing(effect: Effect) -> Firing:
    return Firing(0.0, "n1", "redfish", "power.set", effect, "r", {})


def test_both_proxies_take_the_rule_ipmi_only_with_the_credentials() -> None:
    check_rule(STUCK, "redfish", credentials=True, where="rules[0]")
    check_rule(STUCK, "ipmi", credentials=True, where="rules[0]")
    assert ipmi_needs_credentials(STUCK)
    with pytest.raises(InputError, match=r"rule 'psu'.*session keys"):
        check_rule(STUCK, "ipmi", credentials=False, where="rules[0]")
    assert Effect.POWER_STUCK in SUPPORTED["redfish"]
    assert Effect.POWER_STUCK in SUPPORTED["ipmi"]
    # every other hardware effect is still refused on both
    for effect in (Effect.POWER_LOST, Effect.SLOW_POWER, Effect.BOOT_CRASH):
        assert effect not in SUPPORTED["redfish"]
        assert effect not in SUPPORTED["ipmi"]


def test_the_ipmi_answer_is_completion_code_0_and_the_request_is_not_served() -> None:
    stuck = Firing(0.0, "n1", "ipmi", "power.set", Effect.POWER_STUCK, "r", {})
    action = decide([stuck], machine=False, acknowledge=ACKNOWLEDGED["ipmi"])
    assert action.answer is stuck
    assert ipmi_code(stuck) == IPMI_ACCEPTED == 0
    sent: list[object] = []

    class Wire:
        def later(self, seconds: float, send: Callable[[], None]) -> None:
            send()

        def answer(self, code: int) -> None:
            sent.append(("answer", code))

        def malformed(self, copies: int) -> None:
            sent.append("malformed")

        def serve(self, copies: int) -> Served:
            sent.append("served")
            return Served(0, lambda: None)

    assert carry_out(action, Wire())
    assert sent == [("answer", 0)]  # answered in the BMC's place, never relayed
    assert expected_fault(Effect.POWER_STUCK, "ipmi", "power.set") is None


def test_decided_as_an_answer_in_the_bmcs_place_and_never_served() -> None:
    action = decide(
        [firing(Effect.POWER_STUCK)], machine=False, acknowledge=ACKNOWLEDGED["redfish"]
    )
    assert action.answer is not None
    assert action.answer.effect is Effect.POWER_STUCK
    assert [f.effect for f in action.carried] == [Effect.POWER_STUCK]
    assert action.skipped == []
    assert action.hardware == []


def test_without_acknowledge_or_without_forging_it_is_skipped() -> None:
    for kw in ({}, {"acknowledge": ACKNOWLEDGED["redfish"], "forge": False}):
        action = decide([firing(Effect.POWER_STUCK)], machine=False, **kw)  # type: ignore[arg-type]
        assert action.answer is None
        assert [f.effect for f, _ in action.skipped] == [Effect.POWER_STUCK]


def test_an_emulated_machine_still_gets_it_as_hardware() -> None:
    action = decide([firing(Effect.POWER_STUCK)], acknowledge=ACKNOWLEDGED["redfish"])
    assert [f.effect for f in action.hardware] == [Effect.POWER_STUCK]
    assert action.answer is None


def test_the_answer_is_an_accepted_reset_and_the_call_succeeds() -> None:
    response = redfish_answer(firing(Effect.POWER_STUCK), "POST")
    assert response is not None
    assert response.status == 204
    assert not response.body
    # the call succeeds; the wait for power is what fails (PowerFailure)
    assert expected_fault(Effect.POWER_STUCK, "redfish", "power.set") is None
