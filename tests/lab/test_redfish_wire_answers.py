"""One executor for Redfish (bmaas.hwlab.answers.carry_out): every effect a Redfish
proxy carries out reaches a client as the same wire answer from an emulated
node (hwlab/redfish) and a proxied one (hwlab/proxy in front of an emulated
node with no rules). An answer is the same status, ``@Message.ExtendedInfo``
MessageId (or PowerState) and ``Retry-After``; silence is the same thing
seen on the socket (a timeout, a TCP reset, a refused connection), request
after request while a window lasts; a late, trickled or duplicated request
is the same answer; every vendor incident that applies to Redfish is its
vendor's same answer; ``power_stuck`` the same accepted Reset and a machine
that never moves; each firmware update effect the same update followed to
the same end. :data:`COVERED` is held equal to what a proxy carries
out (:data:`bmaas.hwlab.proxy.effects.SUPPORTED`), so a new effect without a case
here fails the suite. Not here: ``session_limit``, which a proxy refuses (it
cannot count the sessions the BMC holds; tests/unit/hwlab/test_proxy_config.py).
"""

from __future__ import annotations

import base64
import dataclasses
import http.client
import itertools
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bmaas.driver import PowerState
from bmaas.fakes.faults import Effect, FaultRule
from bmaas.fakes.incidents import INCIDENTS
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.hwlab.proxy import ProxyHost, ProxySpec
from bmaas.hwlab.proxy.effects import SUPPORTED
from bmaas.hwlab.proxy.updates import UPDATE_TIME
from bmaas.hwlab.redfish import RedfishServer
from bmaas.secrets import Secret
from tests.lab.redfish_support import HARDWARE, PASSWORD, USERNAME

pytestmark = pytest.mark.lab

Start = Callable[..., ProxyHost]
#: what a client sees of one request: (status, MessageId or PowerState,
#: Retry-After) for an HTTP answer, else (what the socket said, None, None)
Seen = tuple[int | str, Any, str | None]

#: (effect, parameters, method): each BMC effect, on a read and on a change
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("busy", {}, "GET"),
    ("busy", {"retry_after": 3}, "GET"),
    ("internal_error", {}, "GET"),
    ("unsupported", {}, "GET"),
    ("unsupported", {}, "POST"),
    ("auth_fail", {}, "GET"),
    ("malformed_reply", {}, "GET"),
    ("malformed_reply", {}, "POST"),
]

#: (effect, parameters, method): wire effects a client sees only in the
#: answer's timing, or not at all
LATE: list[tuple[str, dict[str, Any], str]] = [
    ("delay", {"seconds": 0.2}, "GET"),
    ("trickle", {"bytes": 512, "every": 0.01}, "GET"),
    ("duplicate", {"copies": 1}, "GET"),
    ("duplicate", {"copies": 2}, "POST"),
]

#: (effect, parameters, requests a client makes): silence, as each request
#: of a client meets it -- the one that sets it off, then one in its window
SILENT: list[tuple[str, dict[str, Any], int]] = [
    ("hang", {}, 2),
    ("drop", {}, 2),
    ("bmc_reboot", {"duration": 1.0, "times": 1}, 2),
    ("overload", {"max_rate": 0, "duration": 1.0, "times": 1}, 2),
]

#: (effect, parameters): the firmware update effects (issue 51), each on
#: one SimpleUpdate of the BIOS
UPDATES: list[tuple[str, dict[str, Any]]] = [
    ("task_hang", {}),
    ("update_rejected", {}),
    ("version_unchanged", {}),
    ("update_reboot", {"duration": 1.0}),
    ("update_reboot", {"duration": 1.0, "version": "old"}),
]

#: every vendor incident a Redfish BMC answers
INCIDENT_NAMES = sorted(n for n, i in INCIDENTS.items() if "redfish" in i.protocols)

#: every effect driven here, emulated against proxied (power_stuck: the one
#: hardware effect a Redfish proxy carries out, ACKNOWLEDGED)
COVERED = {Effect(e) for e, _, _ in [*CASES, *LATE, *SILENT]} | {
    Effect.INCIDENT,
    Effect.POWER_STUCK,
    *(Effect(e) for e, _ in UPDATES),
}

#: seconds a client waits for an answer that may never come
PATIENCE = 0.5

_names = itertools.count(1)


def test_every_effect_a_redfish_proxy_carries_out_is_driven_here() -> None:
    assert SUPPORTED["redfish"] == COVERED
    assert INCIDENT_NAMES  # the registry has Redfish incidents to drive


@pytest.fixture(scope="module")
def server() -> Iterator[RedfishServer]:
    with RedfishServer() as s:
        yield s


def _request(kind: str, name: str) -> tuple[str, str, dict[str, Any] | None]:
    """(method, path, body) of a request of ``kind``: an HTTP method on the
    system, or the operation an incident's trigger names."""
    system = f"/redfish/v1/Systems/{name}"
    media = f"/redfish/v1/Managers/{name}/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia"
    requests: dict[str, tuple[str, str, dict[str, Any] | None]] = {
        "GET": ("GET", system, None),
        "POST": ("POST", f"{system}/Actions/ComputerSystem.Reset", {"ResetType": "On"}),
        "power.set": ("POST", f"{system}/Actions/ComputerSystem.Reset", {"ResetType": "On"}),
        "boot.set": (
            "PATCH",
            system,
            {"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}},
        ),
        "vmedia.insert": ("POST", media, {"Image": "http://127.0.0.1:1/boot.iso"}),
        "vmedia.*": ("POST", media, {"Image": "http://127.0.0.1:1/boot.iso"}),
        "login": (
            "POST",
            "/redfish/v1/SessionService/Sessions",
            {"UserName": USERNAME, "Password": PASSWORD},
        ),
    }
    return requests[kind]


def _ask(
    port: int, kind: str, name: str, *, timeout: float = 5.0, token: str | None = None
) -> Seen:
    """One request of ``kind`` (with a session ``token``, else Basic auth),
    as a client sees it."""
    method, path, body = _request(kind, name)
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["X-Auth-Token"] = token
    else:
        auth = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
        headers["Authorization"] = f"Basic {auth}"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=json.dumps(body) if body else None, headers=headers)
        reply = conn.getresponse()
        raw = reply.read()
    except TimeoutError:
        return "timeout", None, None
    except ConnectionRefusedError:
        return "refused", None, None
    except http.client.RemoteDisconnected:
        return "closed", None, None  # a FIN before any answer
    except ConnectionResetError:
        return "reset", None, None  # a TCP reset
    except http.client.HTTPException:
        return "not http", None, None
    finally:
        conn.close()
    try:
        document = json.loads(raw) if raw else {}
    except ValueError:
        return reply.status, "cut", reply.getheader("Retry-After")
    if "error" in document:
        shown = document["error"]["@Message.ExtendedInfo"][0]["MessageId"]
    else:
        shown = document.get("PowerState")
    return reply.status, shown, reply.getheader("Retry-After")


def _pair(
    server: RedfishServer,
    proxy_host: Start,
    rule: dict[str, Any],
    *,
    power: PowerState = PowerState.OFF,
    hardware: Hardware = HARDWARE,
) -> tuple[tuple[int, str], tuple[int, str]]:
    """(port, system name) of an emulated node with ``rule``, and of a
    proxied one: the proxy, with the same rule, in front of an emulated node
    with none."""
    n = next(_names)
    emulated = FakeMachine(f"emu-{n}", hardware, power=power)
    emulated.plan.add(FaultRule.from_dict(rule))
    real = FakeMachine(f"real-{n}", hardware, power=power)
    emulated_port = server.add(emulated, username=USERNAME, password=PASSWORD)
    real_port = server.add(real, username=USERNAME, password=PASSWORD)
    spec = ProxySpec(
        f"rf{n}",
        "redfish",
        "127.0.0.1",
        real_port,
        username=USERNAME,
        password=Secret(PASSWORD),
        tls=False,
    )
    proxied_port = proxy_host(spec, [rule]).endpoints[spec.node]["redfish"]
    return (emulated_port, emulated.name), (proxied_port, real.name)


def _operation(method: str) -> str:
    return "power.get" if method == "GET" else "power.set"


def _same_answer(
    server: RedfishServer, proxy_host: Start, effect: str, params: dict[str, Any], method: str
) -> Seen:
    """One request with ``effect`` on an emulated and a proxied node: the
    answer, asserted the same from both."""
    rule = {"effect": effect, "operation": _operation(method), **params}
    emulated, proxied = _pair(server, proxy_host, rule)
    from_emulator = _ask(emulated[0], method, emulated[1])
    assert _ask(proxied[0], method, proxied[1]) == from_emulator
    return from_emulator


@pytest.mark.parametrize(
    ("effect", "params", "method"), CASES, ids=[f"{e}-{m}-{len(p)}" for e, p, m in CASES]
)
def test_an_effect_is_the_same_answer_emulated_and_proxied(
    server: RedfishServer,
    proxy_host: Start,
    effect: str,
    params: dict[str, Any],
    method: str,
) -> None:
    from_emulator = _same_answer(server, proxy_host, effect, params, method)
    assert from_emulator[0] != 200 or from_emulator[1] == "cut"


def test_power_stuck_is_the_same_acknowledged_reset_emulated_and_proxied(
    server: RedfishServer, proxy_host: Start
) -> None:
    """The Reset On is accepted (204) by both, and neither machine moves:
    the emulated one holds its power, the proxy never relayed the request.
    A control machine with no rule, sent the same Reset, reads On first."""
    rule = {"effect": "power_stuck", "operation": "power.set"}
    stuck = _pair(server, proxy_host, rule)
    control = FakeMachine(f"control-{next(_names)}", HARDWARE)
    control_port = server.add(control, username=USERNAME, password=PASSWORD)
    answers = [_ask(port, "POST", name) for port, name in stuck]
    assert answers[0] == answers[1]
    assert answers[0][0] == 204
    assert _ask(control_port, "POST", control.name)[0] == 204
    for _ in range(100):  # bounded: the control lands in power_on_time (0.2 s)
        if _ask(control_port, "GET", control.name)[1] == "On":
            break
        time.sleep(0.05)
    assert _ask(control_port, "GET", control.name)[1] == "On"
    assert [_ask(port, "GET", name)[:2] for port, name in stuck] == [(200, "Off"), (200, "Off")]


def _login(port: int) -> str:
    """A session token, from a login the rules let through."""
    _, path, body = _request("login", "")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        reply = conn.getresponse()
        reply.read()
        token = reply.getheader("X-Auth-Token")
    finally:
        conn.close()
    assert reply.status == 201
    assert token
    return token


def test_an_expired_session_is_the_same_answer_emulated_and_proxied(
    server: RedfishServer, proxy_host: Start
) -> None:
    """auth_fail scope=session: a 401 to the request with a token, every
    token dead from then on, Basic auth (no session to lose) served."""
    rule = {"effect": "auth_fail", "scope": "session", "operation": "power.get", "times": 1}
    seen = []
    for port, name in _pair(server, proxy_host, rule):
        token = _login(port)
        seen.append(
            [
                _ask(port, "GET", name, token=token),
                _ask(port, "GET", name, token=token),
                _ask(port, "GET", name),
                _ask(port, "GET", name, token=_login(port)),
            ]
        )
    from_emulator, from_proxy = seen
    assert from_emulator == from_proxy
    assert [status for status, _, _ in from_emulator] == [401, 401, 200, 200]
    assert {shown for _, shown, _ in from_emulator[:2]} == {"Base.1.8.NoValidSession"}


@pytest.mark.parametrize(("effect", "params", "method"), LATE, ids=[f"{e}-{m}" for e, _, m in LATE])
def test_a_late_or_duplicated_request_is_the_same_answer_emulated_and_proxied(
    server: RedfishServer,
    proxy_host: Start,
    effect: str,
    params: dict[str, Any],
    method: str,
) -> None:
    from_emulator = _same_answer(server, proxy_host, effect, params, method)
    assert from_emulator[0] in (200, 202, 204)


def test_a_delay_past_the_deadline_is_the_same_timeout_emulated_and_proxied(
    server: RedfishServer, proxy_host: Start
) -> None:
    rule = {"effect": "delay", "operation": "power.get", "seconds": 3.0}
    emulated, proxied = _pair(server, proxy_host, rule)
    from_emulator = _ask(emulated[0], "GET", emulated[1], timeout=PATIENCE)
    from_proxy = _ask(proxied[0], "GET", proxied[1], timeout=PATIENCE)
    assert from_emulator == from_proxy == ("timeout", None, None)


def _back(port: int, name: str, *, within: float = 5.0) -> Seen:
    """The first HTTP answer a client gets, polling until ``within`` seconds pass."""
    deadline = time.monotonic() + within
    seen = _ask(port, "GET", name, timeout=PATIENCE)
    while not isinstance(seen[0], int) and time.monotonic() < deadline:
        time.sleep(0.05)
        seen = _ask(port, "GET", name, timeout=PATIENCE)
    return seen


@pytest.mark.parametrize(("effect", "params", "requests"), SILENT, ids=[e for e, _, _ in SILENT])
def test_silence_is_the_same_on_the_socket_emulated_and_proxied(
    server: RedfishServer,
    proxy_host: Start,
    effect: str,
    params: dict[str, Any],
    requests: int,
) -> None:
    rule = {"effect": effect, "operation": "power.get", **params}
    emulated, proxied = _pair(server, proxy_host, rule)
    start = time.monotonic()
    from_emulator = [_ask(emulated[0], "GET", emulated[1], timeout=PATIENCE)]
    from_proxy = [_ask(proxied[0], "GET", proxied[1], timeout=PATIENCE)]
    for _ in range(requests - 1):
        from_emulator.append(_ask(emulated[0], "GET", emulated[1], timeout=PATIENCE))
        from_proxy.append(_ask(proxied[0], "GET", proxied[1], timeout=PATIENCE))
    assert from_emulator == from_proxy
    assert all(isinstance(status, str) for status, _, _ in from_emulator)
    assert time.monotonic() - start < 4 * requests * PATIENCE + 2.0
    if "duration" in params:  # a window: over, both answer as before
        assert _back(emulated[0], emulated[1]) == _back(proxied[0], proxied[1])
        assert _back(emulated[0], emulated[1])[:2] == (200, "Off")


@pytest.mark.parametrize("incident", INCIDENT_NAMES)
def test_a_vendor_incident_is_the_same_answer_emulated_and_proxied(
    server: RedfishServer, proxy_host: Start, incident: str
) -> None:
    trigger = INCIDENTS[incident].trigger
    # the emulated machine inside the incident's power window (a fresh
    # machine has just changed power); a proxy, with no machine, has none
    power = PowerState.ON if trigger.power == "on" else PowerState.OFF
    rule = {"effect": "incident", "incident": incident}
    emulated, proxied = _pair(server, proxy_host, rule, power=power)
    from_emulator = _ask(emulated[0], trigger.operation, emulated[1])
    from_proxy = _ask(proxied[0], trigger.operation, proxied[1])
    assert from_emulator == from_proxy
    reply = INCIDENTS[incident].redfish
    assert reply is not None
    assert from_emulator[:2] == (reply.status, reply.message_ids[0])


#: the emulated machines' update takes as long as a proxy's (UPDATE_TIME)
QUICK = dataclasses.replace(HARDWARE, firmware_update_time=UPDATE_TIME)
_BIOS = "/redfish/v1/UpdateService/FirmwareInventory/BIOS"
_SIMPLE_UPDATE = "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate"


def _http(
    port: int, method: str, path: str, body: dict[str, Any] | None = None
) -> tuple[int, str | None, dict[str, Any]] | None:
    """(status, Location, JSON body) of one request with Basic auth; None:
    the BMC did not answer (refused, reset)."""
    auth = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    headers = {"Content-Type": "application/json", "Authorization": f"Basic {auth}"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request(method, path, body=json.dumps(body) if body else None, headers=headers)
        reply = conn.getresponse()
        raw = reply.read()
    except (ConnectionError, http.client.RemoteDisconnected):
        return None
    finally:
        conn.close()
    return reply.status, reply.getheader("Location"), json.loads(raw) if raw else {}


def _updated(port: int, within: float) -> tuple[Any, ...]:
    """One SimpleUpdate of the BIOS, its task read every 0.05 s until it
    ends or ``within`` seconds pass, as a client sees it: the POST's
    status, whether the BMC was away meanwhile, the task's last state and
    MessageId, and the BIOS's version after."""
    body = {"ImageURI": "http://127.0.0.1:9/fw/bios-2.0.bin", "Targets": [_BIOS]}
    taken = _http(
        port, "POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", body
    )
    assert taken is not None
    assert taken[1] is not None
    away, task = False, {}
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        seen = _http(port, "GET", taken[1])
        away = away or seen is None
        task = seen[2] if seen is not None else task
        if task.get("TaskState") in ("Completed", "Exception"):
            break
        time.sleep(0.05)
    after = _http(port, "GET", _BIOS)
    assert after is not None
    last = task["Messages"][-1]["MessageId"]
    return taken[0], away, task["TaskState"], last, after[2]["Version"]


@pytest.mark.parametrize(("effect", "params"), UPDATES, ids=[f"{e}-{len(p)}" for e, p in UPDATES])
def test_a_firmware_update_effect_is_the_same_update_emulated_and_proxied(
    server: RedfishServer, proxy_host: Start, effect: str, params: dict[str, Any]
) -> None:
    """The proxy answers the update with a task of its own (never relayed;
    ``update_reboot`` with the new version: relayed, then its port refused);
    an emulated node's machine takes it: the client follows the same update
    to the same end either way."""
    rule = {"effect": effect, "operation": "firmware.update", **params}
    emulated, proxied = _pair(server, proxy_host, rule, hardware=QUICK)
    within = UPDATE_TIME + float(params.get("duration", 0.0)) + 1.5
    from_emulator = _updated(emulated[0], within)
    assert _updated(proxied[0], within) == from_emulator
    assert from_emulator[0] == 202
    assert from_emulator[1] == (effect == "update_reboot")
