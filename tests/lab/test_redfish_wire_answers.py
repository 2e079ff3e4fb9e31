"""One executor for Redfish (hwlab.answers.carry_out): every BMC-layer effect
reaches a client as the same HTTP answer from an emulated node (hwlab/redfish)
and a proxied one (hwlab/proxy in front of an emulated node with no rules):
the same status, ``@Message.ExtendedInfo`` MessageId and ``Retry-After``."""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bmaas.secrets import Secret
from fakes.faults import FaultRule
from fakes.machine import FakeMachine
from hwlab.proxy import ProxyHost, ProxySpec
from hwlab.redfish import RedfishServer
from tests.lab.redfish_support import HARDWARE, PASSWORD, USERNAME

pytestmark = pytest.mark.lab

Start = Callable[..., ProxyHost]

#: (effect, parameters, method): each BMC effect, on a read and on a change
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("busy", {}, "GET"),
    ("busy", {"retry_after": 3}, "GET"),
    ("internal_error", {}, "GET"),
    ("unsupported", {}, "GET"),
    ("unsupported", {}, "POST"),
    ("auth_fail", {}, "GET"),
    ("malformed_reply", {}, "GET"),
]


@pytest.fixture(scope="module")
def server() -> Iterator[RedfishServer]:
    with RedfishServer() as s:
        yield s


def _ask(port: int, method: str, name: str) -> tuple[int | None, Any, str | None]:
    """One request, as a client sees it: status (None: not HTTP), MessageId, Retry-After."""
    auth = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        path = f"/redfish/v1/Systems/{name}"
        body = None
        if method == "POST":
            path += "/Actions/ComputerSystem.Reset"
            body = json.dumps({"ResetType": "On"})
        headers = {"Authorization": f"Basic {auth}", "Content-Type": "application/json"}
        conn.request(method, path, body=body, headers=headers)
        try:
            reply = conn.getresponse()
        except http.client.HTTPException:
            return None, None, None  # not HTTP at all
        raw = reply.read()
        try:
            message = json.loads(raw)["error"]["@Message.ExtendedInfo"][0]["MessageId"]
        except (ValueError, KeyError, IndexError, TypeError):
            message = "cut" if reply.status == 200 else None
        return reply.status, message, reply.getheader("Retry-After")
    finally:
        conn.close()


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
    operation = "power.get" if method == "GET" else "power.set"
    rule = {"effect": effect, "operation": operation, **params}
    emulated = FakeMachine(f"emu-{effect}-{method}-{len(params)}", HARDWARE)
    emulated.plan.add(FaultRule.from_dict(rule))
    real = FakeMachine(f"real-{effect}-{method}-{len(params)}", HARDWARE)
    emulated_port = server.add(emulated, username=USERNAME, password=PASSWORD)
    real_port = server.add(real, username=USERNAME, password=PASSWORD)
    spec = ProxySpec(
        "rf1",
        "redfish",
        "127.0.0.1",
        real_port,
        username=USERNAME,
        password=Secret(PASSWORD),
        tls=False,
    )
    proxied_port = proxy_host(spec, [rule]).endpoints["rf1"]["redfish"]
    from_emulator = _ask(emulated_port, method, emulated.name)
    from_proxy = _ask(proxied_port, method, real.name)
    assert from_emulator == from_proxy
    assert from_emulator[0] != 200 or from_emulator[1] == "cut"
