"""In-session IPMI answers, emulated and proxied alike: every BMC- and
wire-layer effect on a power read reaches a client as the same answer from
an emulated node (hwlab/ipmi) and from a proxied one (hwlab/proxy in front
of an emulated BMC with no rules): the completion code of
:data:`hwlab.answers.IPMI_CODES` (or silence, or a reply cut short) and
the fault class the bmaas IPMI driver classifies it to. The login phase is
tests/lab/test_login_wire_answers.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bmaas.faults import BMCFault
from bmaas.secrets import Secret
from fakes.faults import Effect
from hwlab.answers import IPMI_CODES
from hwlab.proxy import ProxyHost, ProxySpec, expected_fault
from tests.budgets import ask
from tests.lab.conftest import PASSWORD, USER, Lab

pytestmark = pytest.mark.lab

Start = Callable[..., ProxyHost]

#: every effect with an in-session completion code, and those a client sees
#: as silence or a broken reply (hang and drop: no answer; malformed_reply:
#: the datagram cut short)
SESSION_EFFECTS = [
    *sorted(IPMI_CODES, key=str),
    Effect.HANG,
    Effect.DROP,
    Effect.MALFORMED_REPLY,
]


def _read_fault(lab: Lab, name: str, **overrides: object) -> BMCFault:
    driver = lab.driver(name, bmc_timeout=1.5, **overrides)
    with pytest.raises(BMCFault) as info:
        ask(driver.get_power_state)
    return info.value


@pytest.mark.parametrize("effect", SESSION_EFFECTS, ids=str)
def test_an_in_session_effect_is_the_same_answer_emulated_and_proxied(
    lab: Lab, proxy_host: Start, effect: Effect
) -> None:
    rule = {"effect": str(effect), "operation": "power.get"}
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
    from_emulator = _read_fault(lab, "emu")
    from_proxy = _read_fault(lab, "real", ipmi_port=port)

    assert (type(from_emulator), from_emulator.status) == (type(from_proxy), from_proxy.status)
    code = IPMI_CODES.get(effect)
    assert from_emulator.status == (f"0x{code:02X}" if code is not None else None)
    expected = expected_fault(effect, "ipmi", "power.get")
    assert expected is not None
    assert isinstance(from_emulator, expected)
