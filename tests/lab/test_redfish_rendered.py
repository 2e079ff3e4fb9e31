"""The Redfish emulator keeps the system resource rendered per machine state:
a read of an unchanged machine is answered without sushy-tools' Flask view,
byte for byte what the view would answer, and any change of state (power,
a landed transition, boot override, boot progress) is seen by the next read.
"""

from __future__ import annotations

import base64
import http.client
from collections.abc import Iterator
from typing import Any

import pytest

from bmaas.driver import BootDevice, PowerAction
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.machine import FakeMachine
from bmaas.hwlab.redfish import RedfishServer
from bmaas.hwlab.redfish import answer as answer_mod
from bmaas.hwlab.redfish.bmc import Bmc
from tests.lab.redfish_support import HARDWARE, PASSWORD, USERNAME

pytestmark = pytest.mark.lab

AUTH = "Basic " + base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths sushy-tools' Flask app rendered, in order."""
    seen: list[str] = []
    real = answer_mod.call_app

    def counted(context: Any, environ: dict[str, Any]) -> Any:
        seen.append(environ["PATH_INFO"])
        return real(context, environ)

    monkeypatch.setattr(answer_mod, "call_app", counted)
    return seen


@pytest.fixture
def lab() -> Iterator[tuple[RedfishServer, FakeMachine, FakeClock, int]]:
    clock = FakeClock()
    machine = FakeMachine("cached-node", HARDWARE, clock=clock.monotonic)
    with RedfishServer() as server:
        port = server.add(machine, username=USERNAME, password=PASSWORD)
        yield server, machine, clock, port


def _get(port: int, path: str) -> tuple[int, bytes, dict[str, str]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path, headers={"Authorization": AUTH})
        response = conn.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        conn.close()


def test_unchanged_reads_render_once_and_every_change_is_seen(
    lab: tuple[RedfishServer, FakeMachine, FakeClock, int], renders: list[str]
) -> None:
    server, machine, clock, port = lab
    bmc = server.bmc(port)
    path = "/redfish/v1/Systems/cached-node"

    def read() -> bytes:
        status, body, headers = _get(port, path)
        assert status == 200
        assert headers["Content-Type"] == "application/json"
        assert headers["OData-Version"] == "4.0"
        return body

    def fresh() -> bytes:
        """What the Flask view answers now, with nothing kept."""
        bmc._rendered.clear()
        return read()

    states = []
    for change in (
        lambda: None,
        lambda: machine.set_power(PowerAction.ON),  # PoweringOn
        lambda: clock.advance(HARDWARE.power_on_time),  # On, OSBootStarted
        lambda: clock.advance(HARDWARE.os_boot_time),  # OSRunning
        lambda: machine.set_boot_device(BootDevice.PXE, persistent=False),
        lambda: machine.set_boot_device(BootDevice.CDROM, persistent=True),
        lambda: machine.set_power(PowerAction.OFF),
        lambda: clock.advance(HARDWARE.power_off_time),
    ):
        change()
        before = len(renders)
        kept = [read() for _ in range(4)]
        assert len(renders) == before + 1, renders  # rendered once for this state
        assert kept == [kept[0]] * 4
        assert kept[0] == fresh()  # byte for byte what the view renders
        states.append(kept[0])
    assert len(set(states)) == len(states)  # each change showed in the next read
    assert b'"PowerState": "PoweringOn"' in states[1]
    assert b'"LastState": "OSRunning"' in states[3]
    assert b'"BootSourceOverrideEnabled": "Once"' in states[4]


def test_other_resources_are_rendered_as_before_and_the_uuid_path_redirects(
    lab: tuple[RedfishServer, FakeMachine, FakeClock, int], renders: list[str]
) -> None:
    server, _machine, _clock, port = lab
    bmc = server.bmc(port)
    by_uuid = f"/redfish/v1/Systems/{bmc.uuid}"
    first, second = _get(port, by_uuid), _get(port, by_uuid)
    # one id per system: the UUID path points at it, nothing is rendered
    assert first[0] == second[0] == 308
    assert first[2]["Location"] == "/redfish/v1/Systems/cached-node"
    assert renders == []
    for _ in range(2):
        assert _get(port, "/redfish/v1/Systems")[0] == 200
    assert renders.count("/redfish/v1/Systems") == 2  # collections: rendered every time


def test_an_answer_rendered_while_the_state_moved_is_not_kept() -> None:
    clock = FakeClock()
    machine = FakeMachine("moving", HARDWARE, clock=clock.monotonic)
    bmc = Bmc(machine, username=USERNAME, password=PASSWORD)
    machine.set_power(PowerAction.ON)
    calls = []

    def render() -> tuple[int, list[tuple[str, str]], bytes]:
        calls.append(1)
        clock.advance(HARDWARE.power_on_time)  # the power-on lands mid-render
        return 200, [], b"rendered"

    path = "/redfish/v1/Systems/moving"
    bmc.rendered(path, render)  # PoweringOn when asked, On once rendered: not kept
    bmc.rendered(path, render)  # On (OSBootStarted) before and after: kept
    assert len(calls) == 2
    assert bmc.rendered(path, lambda: (200, [], b"again"))[2] == b"rendered"
    clock.advance(HARDWARE.os_boot_time)  # OSRunning: a new state, rendered anew
    assert bmc.rendered(path, lambda: (200, [], b"again"))[2] == b"again"
