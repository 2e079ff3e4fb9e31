"""In-session IPMI answers, emulated and proxied alike: every BMC- and
wire-layer effect on a power read reaches a client as the same answer from
an emulated node (hwlab/ipmi) and from a proxied one (hwlab/proxy in front
of an emulated BMC with no rules): the completion code of
:data:`bmaas.hwlab.answers.IPMI_CODES` (or silence, or a reply cut short) and
the fault class the bmaas IPMI driver classifies it to; a late, trickled or
duplicated request is the same answer, and a delay past the deadline the
same timeout; a BMC reboot or an overload loses the request that sets it
off (the same timeout) and is the effect's fault to a call in its window;
every vendor incident an IPMI BMC answers in session is its completion
code. Both carry the effect out with one executor
(:func:`bmaas.hwlab.ipmi_action.carry_out`). :data:`COVERED` is held equal to what
a proxy carries out (:data:`bmaas.hwlab.proxy.effects.SUPPORTED`); not here:
``session_limit``, which fires only at a login and which a proxy refuses (it
cannot count the BMC's sessions). The login phase is
tests/lab/test_login_wire_answers.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bmaas.driver import Operation, PowerAction, PowerState
from bmaas.drivers.ipmi import IPMIDriver
from bmaas.fakes.faults import Effect
from bmaas.fakes.incidents import INCIDENTS
from bmaas.faults import BMCFault, BMCTimeout, PowerFailure
from bmaas.hwlab.answers import IPMI_CODES
from bmaas.hwlab.proxy import ProxySpec, expected_fault
from bmaas.hwlab.proxy.effects import SUPPORTED
from bmaas.secrets import Secret
from tests.budgets import HEALTHY_BMC_TIMEOUT, ask, bound
from tests.lab.conftest import PASSWORD, USER, Lab
from tests.lab.ipmi_wire_support import Start, pair, read_fault

pytestmark = pytest.mark.lab


#: every effect with an in-session completion code, and those a client sees
#: as silence or a broken reply (hang and drop: no answer; malformed_reply:
#: the datagram cut short)
SESSION_EFFECTS = [
    *sorted(IPMI_CODES, key=str),
    Effect.HANG,
    Effect.DROP,
    Effect.MALFORMED_REPLY,
]


#: wire effects a client sees only in the answer's timing, or not at all
LATE = [
    ("delay", {"seconds": 0.2}),
    ("trickle", {"bytes": 16, "every": 0.02}),
    ("duplicate", {"copies": 1}),
]

#: seconds a BMC reboot or an overload lasts: longer than two calls on one
#: node (the lost request that sets it off, then one in its window)
WINDOW = 4.0
#: silence for a window, set off by the request it loses
WINDOWED = {
    Effect.BMC_REBOOT: {"duration": WINDOW, "times": 1},
    Effect.OVERLOAD: {"max_rate": 0, "duration": WINDOW, "times": 1},
}

#: every vendor incident an IPMI BMC answers in session (a completion code)
INCIDENT_NAMES = sorted(
    n for n, i in INCIDENTS.items() if "ipmi" in i.protocols and i.trigger.operation != "login"
)

#: every effect driven here, emulated against proxied (power_stuck: the one
#: hardware effect a proxy carries out, by acknowledging the Chassis Control
#: in the BMC's place, ACKNOWLEDGED)
COVERED = (
    set(SESSION_EFFECTS)
    | {Effect(e) for e, _ in LATE}
    | set(WINDOWED)
    | ({Effect.INCIDENT} if INCIDENT_NAMES else set())
    | {Effect.POWER_STUCK}
)


def test_every_effect_a_proxy_carries_out_in_session_is_driven_here() -> None:
    assert SUPPORTED["ipmi"] == COVERED


@pytest.mark.parametrize("effect", SESSION_EFFECTS, ids=str)
def test_an_in_session_effect_is_the_same_answer_emulated_and_proxied(
    lab: Lab, proxy_host: Start, effect: Effect
) -> None:
    rule = {"effect": str(effect), "operation": "power.get"}
    silent = effect in (Effect.HANG, Effect.DROP)  # waited out
    emulator, proxied = pair(lab, proxy_host, rule, silent=silent)
    from_emulator = read_fault(emulator)
    from_proxy = read_fault(proxied)

    assert (type(from_emulator), from_emulator.status) == (type(from_proxy), from_proxy.status)
    code = IPMI_CODES.get(effect)
    assert from_emulator.status == (f"0x{code:02X}" if code is not None else None)
    expected = expected_fault(effect, "ipmi", "power.get")
    assert expected is not None
    assert isinstance(from_emulator, expected)


@pytest.mark.parametrize(("effect", "params"), LATE, ids=[e for e, _ in LATE])
def test_a_late_or_duplicated_request_is_the_same_answer_emulated_and_proxied(
    lab: Lab, proxy_host: Start, effect: str, params: dict[str, object]
) -> None:
    rule = {"effect": effect, "operation": "power.get", **params}
    emulator, proxied = pair(lab, proxy_host, rule)
    assert ask(emulator.get_power_state) is ask(proxied.get_power_state) is PowerState.OFF


def test_a_delay_past_the_deadline_is_the_same_timeout_emulated_and_proxied(
    lab: Lab, proxy_host: Start
) -> None:
    rule = {"effect": "delay", "operation": "power.get", "seconds": 5.0}
    emulator, proxied = pair(lab, proxy_host, rule, silent=True)
    assert type(read_fault(emulator)) is type(read_fault(proxied)) is BMCTimeout


@pytest.mark.parametrize("effect", sorted(WINDOWED, key=str), ids=str)
def test_a_window_of_silence_is_the_same_emulated_and_proxied(
    lab: Lab, proxy_host: Start, effect: Effect
) -> None:
    rule = {"effect": str(effect), "operation": "power.get", **WINDOWED[effect]}
    emulator, proxied = pair(lab, proxy_host, rule, silent=True)
    # each node: the read that sets it off (lost), then a read in its window
    from_emulator = [read_fault(emulator), read_fault(emulator)]
    from_proxy = [read_fault(proxied), read_fault(proxied)]

    assert [type(f) for f in from_emulator] == [type(f) for f in from_proxy]
    assert type(from_emulator[0]) is BMCTimeout  # sent, never answered
    expected = expected_fault(effect, "ipmi", "power.get")
    assert expected is not None
    assert type(from_emulator[1]) is expected


def _call(driver: IPMIDriver, operation: str) -> BMCFault:
    """The fault a call meeting ``operation`` (an incident's trigger) raises."""
    call: Callable[[], object] = (
        bound(driver.request_power, PowerAction.ON)
        if operation == Operation.POWER_SET
        else bound(driver.get_power_state)
    )
    with pytest.raises(BMCFault) as info:
        call()
    return info.value


@pytest.mark.parametrize("incident", INCIDENT_NAMES)
def test_a_vendor_incident_is_the_same_answer_emulated_and_proxied(
    lab: Lab, proxy_host: Start, incident: str
) -> None:
    # a fresh machine has just changed power: inside any power window; a
    # proxy, with no machine, has none
    emulator, proxied = pair(lab, proxy_host, {"effect": "incident", "incident": incident})
    operation = INCIDENTS[incident].trigger.operation
    from_emulator = _call(emulator, operation)
    from_proxy = _call(proxied, operation)

    assert (type(from_emulator), from_emulator.status) == (type(from_proxy), from_proxy.status)
    assert from_emulator.status == f"0x{INCIDENTS[incident].ipmi_code:02X}"
    expected = INCIDENTS[incident].fault
    assert expected is not None
    assert isinstance(from_emulator, expected)


def test_power_stuck_is_the_same_accepted_power_on_emulated_and_proxied(
    lab: Lab, proxy_host: Start
) -> None:
    """``power_stuck`` on power.set: the emulated node accepts the Chassis
    Control and its machine never moves; the proxy answers it with
    completion code 0 in the BMC's place and never relays it, so the BMC
    behind it never hears of it (its own count of power.set stays 0). To the
    driver both are the same: the request succeeds, the wait for power ends
    ``PowerFailure``. After it, the emulated BMC reports a power control
    fault (it commanded the power); the one behind the proxy reads off."""
    rule = {"effect": "power_stuck", "operation": "power.set"}
    emulated = lab.machine("emu")
    lab.rule(emulated, **rule)
    behind = lab.machine("real")
    counted = lab.counter(behind, "power.set")
    spec = ProxySpec(
        "real",
        "ipmi",
        "127.0.0.1",
        lab.server.endpoints["real"],
        username=USER,
        password=Secret(PASSWORD),
    )
    port = proxy_host(spec, [rule]).endpoints["real"]["ipmi"]
    emulator = lab.driver("emu", bmc_timeout=HEALTHY_BMC_TIMEOUT)
    proxied = lab.driver("real", bmc_timeout=HEALTHY_BMC_TIMEOUT, ipmi_port=port)
    for driver in (emulator, proxied):
        ask(driver.request_power, PowerAction.ON)  # accepted: completion code 0
        with pytest.raises(PowerFailure):
            ask(driver.set_power_state, PowerAction.ON, wait=True, timeout=1.0)
    assert behind.plan.counts()[counted] == 0  # never relayed
    assert emulated.power_state() is behind.power_state() is PowerState.OFF
    # where they differ: the emulated BMC commanded the power and latches a
    # power control fault; the BMC behind the proxy was never asked, reads off
    with pytest.raises(PowerFailure, match="power control fault"):
        ask(emulator.get_power_state)
    assert ask(proxied.get_power_state) is PowerState.OFF
