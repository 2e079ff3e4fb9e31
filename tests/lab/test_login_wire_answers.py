"""One wire engine for IPMI logins: every login-phase effect reaches a client
as the same answer from an emulated node (hwlab/ipmi) and from a proxied one
(hwlab/proxy in front of an emulated BMC with no rules), the answer
:data:`bmaas.hwlab.answers.IPMI_LOGIN_ANSWERS` names: the RMCP+ status or
completion code the bmaas IPMI driver reports (``fault.status``) and the
fault class it classifies it to. A login that meets silence (hang, drop, a
BMC reboot, an overload) is the same fault from either; a late, trickled or
duplicated login the same reading, a delay past the deadline the same
fault; a vendor incident at login its RMCP+ status. :data:`COVERED` is held
equal to what a proxy carries out (:data:`bmaas.hwlab.proxy.effects.SUPPORTED`);
not here: ``session_limit``, which a proxy refuses (it cannot count the
BMC's sessions) and tests/lab/test_session_limit.py drives on the emulator."""

from __future__ import annotations

import pytest

from bmaas.driver import PowerState
from bmaas.fakes.faults import Effect
from bmaas.fakes.incidents import INCIDENTS
from bmaas.faults import BMCFault
from bmaas.hwlab.answers import IPMI_LOGIN_ANSWERS, LoginPhase
from bmaas.hwlab.proxy import expected_fault
from bmaas.hwlab.proxy.effects import SUPPORTED
from tests.budgets import ask
from tests.lab.conftest import Lab
from tests.lab.ipmi_wire_support import Start, pair, read_fault

pytestmark = pytest.mark.lab


#: every effect with a login answer in the table, and malformed_reply (the
#: BMC's own RAKP2 cut short: no status, the same fault); but session_limit,
#: which fires only where the server knows the sessions it holds (a proxy
#: refuses it), and which tests/lab/test_session_limit.py drives
LOGIN_EFFECTS = [
    *sorted((e for e in IPMI_LOGIN_ANSWERS if e is not Effect.SESSION_LIMIT), key=str),
    Effect.MALFORMED_REPLY,
]

#: (effect, parameters): silence at the login's first packet; a window
#: outlasts the login that sets it off
SILENT: list[tuple[Effect, dict[str, object]]] = [
    (Effect.HANG, {}),
    (Effect.DROP, {}),
    (Effect.BMC_REBOOT, {"duration": 2.0, "times": 1}),
    (Effect.OVERLOAD, {"max_rate": 0, "duration": 2.0, "times": 1}),
]

#: wire effects a login meets only in its timing, or not at all
LATE: list[tuple[Effect, dict[str, object]]] = [
    (Effect.DELAY, {"seconds": 0.2}),
    (Effect.TRICKLE, {"bytes": 16, "every": 0.02}),
    (Effect.DUPLICATE, {"copies": 1}),
]

#: every vendor incident an IPMI BMC answers a login with (an RMCP+ status)
INCIDENT_NAMES = sorted(
    n for n, i in INCIDENTS.items() if "ipmi" in i.protocols and i.trigger.operation == "login"
)

#: every effect driven here, emulated against proxied; power_stuck fires on
#: power.set only, never at a login (tests/lab/test_session_wire_answers.py)
COVERED = (
    set(LOGIN_EFFECTS)
    | {e for e, _ in [*SILENT, *LATE]}
    | ({Effect.INCIDENT} if INCIDENT_NAMES else set())
    | {Effect.POWER_STUCK}
)


def test_every_effect_a_proxy_carries_out_at_login_is_driven_here() -> None:
    assert SUPPORTED["ipmi"] == COVERED


def _status(effect: Effect) -> str | None:
    answer = IPMI_LOGIN_ANSWERS.get(effect)
    if answer is None:
        return None
    if answer.phase is LoginPhase.CHANNEL_AUTH:
        return f"0x{answer.code:02X}"
    return f"rmcp 0x{answer.code:02X}"


def _faults(
    lab: Lab, proxy_host: Start, rule: dict[str, object], *, silent: bool = False
) -> tuple[BMCFault, BMCFault]:
    """The fault a power read's login meets with ``rule`` (on the login)
    from an emulated node, and from a proxied one; ``silent``: the test
    waits the bound out."""
    emulator, proxied = pair(lab, proxy_host, {**rule, "operation": "login"}, silent=silent)
    return read_fault(emulator), read_fault(proxied)


@pytest.mark.parametrize("effect", LOGIN_EFFECTS, ids=str)
def test_a_login_effect_is_the_same_answer_emulated_and_proxied(
    lab: Lab, proxy_host: Start, effect: Effect
) -> None:
    from_emulator, from_proxy = _faults(lab, proxy_host, {"effect": str(effect)})
    assert (type(from_emulator), from_emulator.status) == (type(from_proxy), from_proxy.status)
    assert from_emulator.status == _status(effect)
    expected = expected_fault(effect, "ipmi", "login")
    assert expected is not None
    assert isinstance(from_emulator, expected)


@pytest.mark.parametrize(("effect", "params"), SILENT, ids=[str(e) for e, _ in SILENT])
def test_a_silent_login_is_the_same_fault_emulated_and_proxied(
    lab: Lab, proxy_host: Start, effect: Effect, params: dict[str, object]
) -> None:
    rule = {"effect": str(effect), **params}
    from_emulator, from_proxy = _faults(lab, proxy_host, rule, silent=True)
    assert (type(from_emulator), from_emulator.status) == (type(from_proxy), from_proxy.status)
    assert from_emulator.status is None
    expected = expected_fault(effect, "ipmi", "login")
    assert expected is not None
    assert type(from_emulator) is expected


@pytest.mark.parametrize(("effect", "params"), LATE, ids=[str(e) for e, _ in LATE])
def test_a_late_or_duplicated_login_is_the_same_reading_emulated_and_proxied(
    lab: Lab, proxy_host: Start, effect: Effect, params: dict[str, object]
) -> None:
    rule = {"effect": str(effect), "operation": "login", **params}
    emulator, proxied = pair(lab, proxy_host, rule)
    assert ask(emulator.get_power_state) is ask(proxied.get_power_state) is PowerState.OFF


def test_a_login_delayed_past_the_deadline_is_the_same_fault_emulated_and_proxied(
    lab: Lab, proxy_host: Start
) -> None:
    rule = {"effect": "delay", "seconds": 5.0}
    from_emulator, from_proxy = _faults(lab, proxy_host, rule, silent=True)
    assert type(from_emulator) is type(from_proxy) is expected_fault(Effect.DELAY, "ipmi", "login")


@pytest.mark.parametrize("incident", INCIDENT_NAMES)
def test_a_vendor_incident_at_login_is_the_same_answer_emulated_and_proxied(
    lab: Lab, proxy_host: Start, incident: str
) -> None:
    emulator, proxied = pair(lab, proxy_host, {"effect": "incident", "incident": incident})
    from_emulator = read_fault(emulator)
    from_proxy = read_fault(proxied)

    assert (type(from_emulator), from_emulator.status) == (type(from_proxy), from_proxy.status)
    status = INCIDENTS[incident].rmcp_status
    assert status is not None
    assert from_emulator.status == f"rmcp 0x{status:02X}"
    expected = INCIDENTS[incident].fault
    assert expected is not None
    assert isinstance(from_emulator, expected)
