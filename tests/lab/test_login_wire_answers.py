"""One wire engine for IPMI logins: every login-phase effect reaches a client
as the same answer from an emulated node (hwlab/ipmi) and from a proxied one
(hwlab/proxy in front of an emulated BMC with no rules), the answer
:data:`hwlab.answers.IPMI_LOGIN_ANSWERS` names: the RMCP+ status or
completion code the bmaas IPMI driver reports (``fault.status``) and the
fault class it classifies it to."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bmaas.faults import BMCFault
from bmaas.secrets import Secret
from fakes.faults import Effect
from hwlab.answers import IPMI_LOGIN_ANSWERS, LoginPhase
from hwlab.proxy import ProxyHost, ProxySpec, expected_fault
from tests.budgets import ask
from tests.lab.conftest import PASSWORD, USER, Lab

pytestmark = pytest.mark.lab

Start = Callable[..., ProxyHost]

#: every effect with a login answer in the table, and malformed_reply (the
#: BMC's own RAKP2 cut short: no status, the same fault); but session_limit,
#: which fires only where the server knows the sessions it holds (never in a
#: proxy: fakes.effects), and which tests/lab/test_session_limit.py drives
LOGIN_EFFECTS = [
    *sorted((e for e in IPMI_LOGIN_ANSWERS if e is not Effect.SESSION_LIMIT), key=str),
    Effect.MALFORMED_REPLY,
]


def _status(effect: Effect) -> str | None:
    answer = IPMI_LOGIN_ANSWERS.get(effect)
    if answer is None:
        return None
    if answer.phase is LoginPhase.CHANNEL_AUTH:
        return f"0x{answer.code:02X}"
    return f"rmcp 0x{answer.code:02X}"


def _login_fault(lab: Lab, name: str, **overrides: object) -> BMCFault:
    driver = lab.driver(name, bmc_timeout=1.5, **overrides)
    with pytest.raises(BMCFault) as info:
        ask(driver.get_power_state)
    return info.value


@pytest.mark.parametrize("effect", LOGIN_EFFECTS, ids=str)
def test_a_login_effect_is_the_same_answer_emulated_and_proxied(
    lab: Lab, proxy_host: Start, effect: Effect
) -> None:
    rule = {"effect": str(effect), "operation": "login"}
    emulated = lab.machine("emu")
    lab.rule(emulated, **rule)
    lab.machine("real")  # no rules: the proxy answers in its place
    spec = ProxySpec(
        "real",
        "ipmi",
        "127.0.0.1",
        lab.server.endpoints["real"],
        username=USER,
        password=Secret(PASSWORD),
    )
    port = proxy_host(spec, [rule]).endpoints["real"]["ipmi"]
    from_emulator = _login_fault(lab, "emu")
    from_proxy = _login_fault(lab, "real", ipmi_port=port)

    assert (type(from_emulator), from_emulator.status) == (type(from_proxy), from_proxy.status)
    assert from_emulator.status == _status(effect)
    expected = expected_fault(effect, "ipmi", "login")
    assert expected is not None
    assert isinstance(from_emulator, expected)
