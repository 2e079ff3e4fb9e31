"""``power_stuck`` on a Redfish proxy (issue 38): the one hardware effect a
proxy carries out, by answering the Reset as accepted in the BMC's place and
never relaying it -- what a client meets when a BMC acknowledges a power
action that never lands (vbmc's natural one). IPMI proxies still refuse it."""

from __future__ import annotations

import pytest

from bmaas.fakes.effects import Firing, decide
from bmaas.fakes.faults import Effect, FaultRule
from bmaas.faults import InputError
from bmaas.hwlab.answers import redfish_answer
from bmaas.hwlab.proxy.effects import (
    ACKNOWLEDGED,
    SUPPORTED,
    check_rule,
    expected_fault,
)

STUCK = FaultRule.from_dict({"name": "psu", "effect": "power_stuck", "operation": "power.set"})


def firing(effect: Effect) -> Firing:
    return Firing(0.0, "n1", "redfish", "power.set", effect, "r", {})


def test_a_redfish_proxy_takes_the_rule_and_an_ipmi_proxy_refuses_it() -> None:
    check_rule(STUCK, "redfish", credentials=True, where="rules[0]")
    with pytest.raises(InputError, match=r"rule 'psu'.*hardware"):
        check_rule(STUCK, "ipmi", credentials=True, where="rules[0]")
    assert Effect.POWER_STUCK in SUPPORTED["redfish"]
    assert Effect.POWER_STUCK not in SUPPORTED["ipmi"]
    # every other hardware effect is still refused on both
    for effect in (Effect.POWER_LOST, Effect.SLOW_POWER, Effect.BOOT_CRASH):
        assert effect not in SUPPORTED["redfish"]


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
