"""hwlab's Redfish EventService as a client that is not ours sees it.

Events for every change whoever made it (the control API's console
power-off, a Redfish reset landing later, health), over SSE with filters and
to push subscriptions, and the event path's faults: a dropped event, a
stream that closes, a delayed or duplicated event, no EventService at all.
Every wait is bounded; nothing asserts wall time.
"""

from __future__ import annotations

import base64
import http.client
import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bmaas.driver import PowerState
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.machine import FakeMachine
from bmaas.hwlab.redfish import RedfishServer
from bmaas.hwlab.redfish import events as hub_events
from tests.lab.redfish_support import HARDWARE, PASSWORD, USERNAME

pytestmark = pytest.mark.lab

AUTH = {"Authorization": "Basic " + base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()}


@pytest.fixture(scope="module")
def server() -> Iterator[RedfishServer]:
    with RedfishServer() as s:
        yield s


class Stream:
    """A bare SSE reader: frames as dicts, comments skipped."""

    def __init__(self, port: int, query: str = "") -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        self.conn.request("GET", hub_events.SSE_PATH + query, headers=AUTH)
        self.response = self.conn.getresponse()
        self.buffer = b""

    def next(self) -> dict[str, Any]:
        while True:
            if b"\n\n" in self.buffer:
                frame, self.buffer = self.buffer.split(b"\n\n", 1)
                data = [ln[5:].strip() for ln in frame.split(b"\n") if ln.startswith(b"data:")]
                if data:
                    return dict(json.loads(b"\n".join(data)))
                continue
            chunk = self.response.read1(65536)
            if not chunk:
                raise EOFError("the stream ended")
            self.buffer += chunk

    def close(self) -> None:
        self.conn.close()


def _get(port: int, path: str) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path, headers=AUTH)
        response = conn.getresponse()
        body = response.read()
        return response.status, json.loads(body) if body else None
    finally:
        conn.close()


def _send(port: int, method: str, path: str, body: Any) -> tuple[int, Any, str | None]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        headers = {**AUTH, "Content-Type": "application/json"}
        conn.request(method, path, body=json.dumps(body), headers=headers)
        response = conn.getresponse()
        data = response.read()
        return response.status, json.loads(data) if data else None, response.getheader("Location")
    finally:
        conn.close()


def _machine(server: RedfishServer, name: str, **kw: Any) -> tuple[FakeMachine, int]:
    machine = FakeMachine(name, HARDWARE, **kw)
    return machine, server.add(machine, username=USERNAME, password=PASSWORD)


def _ids(event: dict[str, Any]) -> list[str]:
    return [e["MessageId"] for e in event["Events"]]


def test_the_service_root_links_the_event_service_and_it_offers_sse(
    server: RedfishServer,
) -> None:
    _, port = _machine(server, "ev-root")
    assert _get(port, "/redfish/v1")[1]["EventService"] == {"@odata.id": hub_events.PREFIX}
    status, service = _get(port, hub_events.PREFIX)
    assert status == 200
    assert service["ServiceEnabled"] is True
    assert service["ServerSentEventUri"] == hub_events.SSE_PATH
    assert service["Actions"]["#EventService.SubmitTestEvent"]["target"].endswith(
        "EventService.SubmitTestEvent"
    )


def test_a_console_power_off_a_landed_reset_and_health_are_each_an_event(
    server: RedfishServer,
) -> None:
    machine, port = _machine(server, "ev-console", power=PowerState.ON)
    stream = Stream(port, "?$filter=EventFormatType%20eq%20'Event'")
    try:
        machine.force_power(PowerState.OFF)  # the control API's console power-off
        event = stream.next()
        assert _ids(event) == [
            "ResourceEvent.1.3.0.ResourcePoweredOff",
            "ResourceEvent.1.3.0.ResourceChanged",
        ]
        origins = {e["OriginOfCondition"]["@odata.id"] for e in event["Events"]}
        assert origins == {"/redfish/v1/Systems/ev-console"}
        # a Redfish power-on lands 0.2 s after it was accepted: the event says
        # when it landed, though nobody read the system meanwhile
        status, _, _ = _send(
            port, "POST", "/redfish/v1/Systems/ev-console/Actions/ComputerSystem.Reset",
            {"ResetType": "On"},
        )  # fmt: skip
        assert status == 204
        assert _ids(stream.next())[0] == "ResourceEvent.1.3.0.ResourcePoweredOn"
        machine.set_health("Warning")
        health = stream.next()["Events"][0]
        assert health["MessageId"] == "ResourceEvent.1.3.0.ResourceStatusChangedWarning"
        assert health["MessageArgs"][1] == "Warning"
    finally:
        stream.close()


def test_a_dropped_event_is_lost_and_the_next_one_arrives(server: RedfishServer) -> None:
    machine, port = _machine(server, "ev-drop")
    machine.plan.add(FaultRule.from_dict({"effect": "drop", "operation": "event.power", "nth": 1}))
    stream = Stream(port)
    try:
        machine.force_power(PowerState.ON)  # lost
        machine.force_power(PowerState.OFF)
        assert _ids(stream.next())[0].endswith("ResourcePoweredOff")
    finally:
        stream.close()


def test_drop_on_the_stream_closes_it(server: RedfishServer) -> None:
    machine, port = _machine(server, "ev-close")
    machine.plan.add(FaultRule.from_dict({"effect": "drop", "operation": "event.stream", "nth": 2}))
    stream = Stream(port)
    try:
        machine.force_power(PowerState.ON)
        assert _ids(stream.next())[0].endswith("ResourcePoweredOn")
        machine.force_power(PowerState.OFF)  # the stream closes with it
        with pytest.raises((EOFError, ConnectionError)):
            stream.next()
    finally:
        stream.close()
    again = Stream(port)  # a new stream works
    try:
        machine.force_power(PowerState.ON)
        assert _ids(again.next())[0].endswith("ResourcePoweredOn")
    finally:
        again.close()


def test_hang_on_the_stream_stalls_it_open_and_silent(server: RedfishServer) -> None:
    machine, port = _machine(server, "ev-stall")
    machine.plan.add(FaultRule.from_dict({"effect": "hang", "operation": "event.stream", "nth": 2}))
    stream = Stream(port)
    try:
        machine.force_power(PowerState.ON)
        assert _ids(stream.next())[0].endswith("ResourcePoweredOn")
        stream.response.fp.raw._sock.settimeout(0.5)  # type: ignore[union-attr]
        machine.force_power(PowerState.OFF)  # held back: the stream stalls here
        with pytest.raises(TimeoutError):
            stream.next()
    finally:
        stream.close()


@pytest.fixture(scope="module")
def chatty() -> Iterator[RedfishServer]:
    """A service whose idle streams send a keepalive every 0.2 s."""
    with RedfishServer(sse_keepalive=0.2) as s:
        yield s


def _silent_for(stream: Stream, seconds: float) -> bool:
    """Whether ``stream`` sends nothing at all (no event, no keepalive) for ``seconds``."""
    stream.response.fp.raw._sock.settimeout(seconds)  # type: ignore[union-attr]
    try:
        stream.response.read1(65536)
    except TimeoutError:
        return True
    return False


def _hangs(port: int, path: str) -> bool:
    """Whether a GET of ``path`` gets no answer within 0.5 s."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=0.5)
    try:
        conn.request("GET", path, headers=AUTH)
        conn.getresponse()
    except TimeoutError:
        return True
    finally:
        conn.close()
    return False


def test_a_hang_of_the_api_only_leaves_its_event_stream_alive(chatty: RedfishServer) -> None:
    """A wedged API behind a live stream (issue 48): reads hang, the stream
    keeps its keepalives and its events."""
    machine, port = _machine(chatty, "ev-api-hang")
    machine.plan.add(FaultRule.from_dict({"effect": "hang", "scope": "api"}))
    stream = Stream(port)
    try:
        assert _hangs(port, "/redfish/v1/Systems/ev-api-hang")
        assert not _silent_for(stream, 2.0)  # a keepalive within 0.2 s
        machine.force_power(PowerState.ON)
        stream.response.fp.raw._sock.settimeout(5)  # type: ignore[union-attr]
        assert _ids(stream.next())[0].endswith("ResourcePoweredOn")
    finally:
        stream.close()


def test_a_hang_of_the_whole_service_silences_its_stream(chatty: RedfishServer) -> None:
    machine, port = _machine(chatty, "ev-all-hang")
    stream = Stream(port)  # opened before the hang: a new one would hang too
    try:
        assert not _silent_for(stream, 2.0)
        machine.plan.add(FaultRule.from_dict({"effect": "hang", "scope": "all"}))
        machine.force_power(PowerState.ON)  # held back: the stream stalls
        stream.buffer = b""
        deadline = time.monotonic() + 5.0
        while not _silent_for(stream, 1.0):  # what was in flight, then silence
            assert time.monotonic() < deadline, "the stream kept talking"
        assert _hangs(port, hub_events.SSE_PATH)
    finally:
        stream.close()


def test_a_duplicated_and_a_delayed_event_arrive_out_of_order(server: RedfishServer) -> None:
    machine, port = _machine(server, "ev-dup")
    delay = {"effect": "delay", "operation": "event.power", "nth": 1, "seconds": 0.3}
    machine.plan.add(FaultRule.from_dict(delay))
    duplicate = {"effect": "duplicate", "operation": "event.power", "nth": 2}
    machine.plan.add(FaultRule.from_dict(duplicate))
    stream = Stream(port)
    try:
        machine.force_power(PowerState.ON)  # delayed
        machine.force_power(PowerState.OFF)  # twice
        seen = [_ids(stream.next())[0].rsplit(".", 1)[1] for _ in range(3)]
        assert seen == ["ResourcePoweredOff", "ResourcePoweredOff", "ResourcePoweredOn"]
    finally:
        stream.close()


def test_unsupported_on_subscribe_is_a_bmc_without_an_event_service(
    server: RedfishServer,
) -> None:
    machine, port = _machine(server, "ev-absent")
    machine.plan.add(FaultRule.from_dict({"effect": "unsupported", "operation": "event.subscribe"}))
    assert _get(port, hub_events.PREFIX)[0] == 404
    assert _get(port, hub_events.SSE_PATH)[0] == 404


def test_a_rule_on_every_operation_never_meets_the_event_path(server: RedfishServer) -> None:
    machine, port = _machine(server, "ev-star")
    machine.plan.add(FaultRule.from_dict({"effect": "drop", "operation": "*", "nth": 5}))
    stream = Stream(port)
    try:
        for state in (PowerState.ON, PowerState.OFF, PowerState.ON):
            machine.force_power(state)
            assert _ids(stream.next())[0].endswith("Powered" + state.value.capitalize())
    finally:
        stream.close()


def test_a_filter_on_origin_takes_one_system_of_a_shared_service(server: RedfishServer) -> None:
    a, b = FakeMachine("ev-sh-a", HARDWARE), FakeMachine("ev-sh-b", HARDWARE)
    port = server.add_service([a, b], username=USERNAME, password=PASSWORD)
    query = "?$filter=OriginResource%20eq%20'/redfish/v1/Systems/ev-sh-b'"
    stream = Stream(port, query)
    try:
        a.force_power(PowerState.ON)  # not ours
        b.force_power(PowerState.ON)
        event = stream.next()
        assert event["Events"][0]["OriginOfCondition"]["@odata.id"].endswith("/ev-sh-b")
    finally:
        stream.close()
    assert _get(port, hub_events.SSE_PATH + "?$filter=Bogus%20eq%20'x'")[0] == 400


class _Listener(http.server.BaseHTTPRequestHandler):
    received: list[dict[str, Any]]
    status = 200

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.received.append(json.loads(self.rfile.read(length)))
        self.send_response(self.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[tuple[str, list[dict[str, Any]], threading.Event]]:
    received: list[dict[str, Any]] = []
    arrived = threading.Event()

    class Handler(_Listener):
        def do_POST(self) -> None:
            super().do_POST()
            arrived.set()

    Handler.received = received
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/events", received, arrived
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def test_a_push_subscription_gets_power_and_test_events(
    server: RedfishServer, listener: tuple[str, list[dict[str, Any]], threading.Event]
) -> None:
    url, received, arrived = listener
    machine, port = _machine(server, "ev-push")
    status, _body, location = _send(
        port, "POST", hub_events.SUBSCRIPTIONS,
        {"Destination": url, "Protocol": "Redfish", "Context": "bmaas-1"},
    )  # fmt: skip
    assert status == 201
    assert location is not None
    assert _get(port, location)[1]["Destination"] == url
    machine.force_power(PowerState.ON)
    assert arrived.wait(5)
    assert received[0]["Context"] == "bmaas-1"
    assert _ids(received[0])[0].endswith("ResourcePoweredOn")
    arrived.clear()
    test = {"MessageId": "Base.1.0.Success", "Message": "hello"}
    assert _send(port, "POST", hub_events.TEST_ACTION, test)[0] == 204
    assert arrived.wait(5)
    assert received[1]["Events"][0]["Message"] == "hello"
    assert _send(port, "DELETE", location, {})[0] == 204
    assert _get(port, hub_events.SUBSCRIPTIONS)[1]["Members"] == []


def test_a_subscription_whose_listener_is_gone_is_terminated_after_its_retries(
    server: RedfishServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub_events, "RETRY_INTERVAL", 0.01)
    machine, port = _machine(server, "ev-gone")
    dead = "http://127.0.0.1:9/nobody"  # discard port: refused
    status, _, location = _send(port, "POST", hub_events.SUBSCRIPTIONS, {"Destination": dead})
    assert status == 201
    assert location is not None
    machine.force_power(PowerState.ON)
    for _ in range(200):  # bounded: 4 refused attempts, 10 ms apart
        if _get(port, location)[0] == 404:
            break
        threading.Event().wait(0.02)
    assert _get(port, location)[0] == 404
