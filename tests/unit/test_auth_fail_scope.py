"""``auth_fail``'s ``scope`` parameter: credentials rejected, or a session that expires."""

from __future__ import annotations

import pytest

from bmaas.driver import PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.fleet import FakeFleet
from bmaas.faults import BMCAuthError, InputError
from tests.budgets import ask


def test_scope_defaults_to_credentials_and_is_omitted() -> None:
    rule = FaultRule.from_dict({"effect": "auth_fail"})
    assert "scope" not in rule.params  # old plans read and print as before
    assert FaultRule.from_dict({"effect": "auth_fail", "scope": "session"}).params == {
        "scope": "session"
    }


def test_unknown_scope_is_named() -> None:
    with pytest.raises(InputError) as info:
        FaultRule.from_dict({"effect": "auth_fail", "scope": "token"}, source="lab.yaml")
    assert info.value.field == "rule.scope"
    assert "credentials, session" in str(info.value)


def test_fake_driver_renews_an_expired_session_like_a_real_driver() -> None:
    fleet = FakeFleet(clock=FakeClock())
    fleet.add("n1", rules=[{"effect": "auth_fail", "scope": "session", "operation": "power.get"}])
    fleet.add("n2", rules=[{"effect": "auth_fail", "operation": "power.get"}])
    assert ask(FakeDriver("n1", fleet=fleet).get_power_state) is PowerState.OFF
    with pytest.raises(BMCAuthError):
        ask(FakeDriver("n2", fleet=fleet).get_power_state)
