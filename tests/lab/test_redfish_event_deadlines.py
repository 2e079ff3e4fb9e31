"""The events client's HTTP is bmaas's own engine (issue 45, item 2): every
request ends by the caller's deadline, however the service dribbles.

Against a tiny misbehaving service on 127.0.0.1 (a free port) that answers
each request by a script: whole, one byte every 0.2 s (at most
:data:`DRIBBLE` bytes, then it hangs up, so a client that waits for it
ends too), or as a stream held open. What would break: an open or a
subscription that waits past its deadline for a service that dribbles its
EventService answer, its stream's head or the subscription's answer (each
receive bounded, not the call: ``http.client`` with ``timeout=``); a chunked
or close-delimited stream whose events are lost; an error status mapped
other than by the drivers' one table.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.drivers.redfish.events import PowerNews, ServiceStream
from bmaas.drivers.redfish.framing import MAX_LINE
from bmaas.drivers.redfish.push import PushListener, PushStream
from bmaas.faults import (
    BmaasError,
    BMCAuthError,
    BMCBusy,
    BMCInternalError,
    BMCProtocolError,
    BMCTimeout,
    BMCUnreachable,
    UnsupportedOperation,
)
from bmaas.secrets import Secret
from tests.unit.stepped import read_when_ready

pytestmark = pytest.mark.lab

SERVICE = "/redfish/v1/EventService"
SSE = "/redfish/v1/EventService/SSE"
SUBS = "/redfish/v1/EventService/Subscriptions"
#: the open's deadline in these tests, and how much later than it a failure may end
DEADLINE, SLACK = 1.0, 1.0
#: bytes a dribbling answer sends (one every 0.2 s: 3 s) before it hangs up
DRIBBLE = 15
EVENT = {
    "Events": [
        {
            "MessageId": "ResourceEvent.1.3.0.ResourcePoweredOff",
            "OriginOfCondition": {"@odata.id": "/redfish/v1/Systems/1"},
        }
    ]
}
FRAME = b"data: " + json.dumps(EVENT).encode() + b"\n\n"

#: one answer's script: the connection, and the event that says the test is over
Script = Callable[[socket.socket, threading.Event], None]


def answer(status: int, body: object, *extra: str) -> bytes:
    data = json.dumps(body).encode()
    head = [f"HTTP/1.1 {status} X", "Content-Type: application/json", *extra]
    head += [f"Content-Length: {len(data)}", "Connection: close", "", ""]
    return "\r\n".join(head).encode() + data


SERVICE_DOC = answer(
    200,
    {"ServiceEnabled": True, "ServerSentEventUri": SSE, "Subscriptions": {"@odata.id": SUBS}},
)
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"


def whole(data: bytes) -> Script:
    def script(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(data)

    return script


def dribbled(data: bytes) -> Script:
    def script(conn: socket.socket, stop: threading.Event) -> None:
        for byte in data[:DRIBBLE]:
            if stop.wait(0.2):
                return
            conn.sendall(bytes([byte]))

    return script


def pieces(*parts: bytes, hold: bool = False) -> Script:
    """``parts`` one send each, a moment apart (a decoder must join them);
    ``hold``: then keep the connection open until the test ends."""

    def script(conn: socket.socket, stop: threading.Event) -> None:
        for part in parts:
            conn.sendall(part)
            stop.wait(0.02)
        if hold:
            stop.wait(10.0)

    return script


class Service:
    """Answers each request by the script for its method and path (no query)."""

    def __init__(self, scripts: dict[tuple[str, str], Script]) -> None:
        self.scripts = scripts
        self.stop = threading.Event()
        self.requests: list[tuple[str, str]] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self.port = self._sock.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(5.0)
            data = b""
            while b"\r\n\r\n" not in data:
                more = conn.recv(4096)
                if not more:
                    return
                data += more
            line = data.split(b"\r\n", 1)[0].decode()
            method, target = line.split()[:2]
            path = target.partition("?")[0]
            self.requests.append((method, path))
            script = self.scripts.get((method, path), whole(answer(404, {})))
            script(conn, self.stop)

    def close(self) -> None:
        self.stop.set()
        self._sock.close()
        self._accepting.join(5.0)
        for thread in self._threads:
            thread.join(5.0)


@contextlib.contextmanager
def serving(scripts: dict[tuple[str, str], Script]) -> Iterator[Service]:
    service = Service(scripts)
    try:
        yield service
    finally:
        service.close()


def stream_of(service: Service) -> ServiceStream:
    return ServiceStream(
        f"http://127.0.0.1:{service.port}", "admin", Secret("pw-7c1e"), False, {"*": "n1"}
    )


def ends_by_the_deadline(call: Callable[[Deadline], object]) -> BmaasError:
    started = time.monotonic()
    with pytest.raises(BmaasError) as raised:
        call(Deadline.after(DEADLINE))
    elapsed = time.monotonic() - started
    assert DEADLINE - 0.2 <= elapsed <= DEADLINE + SLACK, elapsed
    return raised.value


def test_a_dribbled_event_service_answer_ends_the_open_by_its_deadline() -> None:
    with serving({("GET", SERVICE): dribbled(SERVICE_DOC)}) as service:
        stream = stream_of(service)
        fault = ends_by_the_deadline(stream.open)
        stream.close()
    assert isinstance(fault, BMCTimeout)
    assert "pw-7c1e" not in str(fault)


def test_a_dribbled_stream_head_ends_the_open_by_its_deadline() -> None:
    head = SSE_HEAD + b"Cache-Control: no-cache\r\nX-Padding: " + b"x" * 64 + b"\r\n\r\n"
    scripts = {("GET", SERVICE): whole(SERVICE_DOC), ("GET", SSE): dribbled(head)}
    with serving(scripts) as service:
        stream = stream_of(service)
        fault = ends_by_the_deadline(stream.open)
        stream.close()
    assert isinstance(fault, BMCTimeout)
    assert service.requests == [("GET", SERVICE), ("GET", SSE)]


def test_a_dribbled_subscription_answer_ends_the_open_by_its_deadline() -> None:
    created = answer(201, {"@odata.id": f"{SUBS}/1"}, f"Location: {SUBS}/1")
    scripts = {
        ("GET", SERVICE): whole(SERVICE_DOC),
        ("GET", SUBS): whole(answer(200, {"Members": []})),
        ("POST", SUBS): dribbled(created),
    }
    listener = PushListener()
    try:
        with serving(scripts) as service:
            push = PushStream(stream_of(service), listener, prefer_push=True)
            fault = ends_by_the_deadline(push.open)
            push.close()
    finally:
        listener.close()
    assert isinstance(fault, BMCTimeout)
    assert ("POST", SUBS) in service.requests


def _news(stream: ServiceStream) -> list[PowerNews]:
    """What the stream carries, read until it ends (a bounded number of reads)."""
    out: list[PowerNews] = []
    for _ in range(50):
        try:
            out += read_when_ready(stream, 5.0)
        except BMCUnreachable:  # the service closed the stream: all was read
            return out
    raise AssertionError("the stream never ended")


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def test_a_chunked_stream_delivers_its_events() -> None:
    body = _chunk(FRAME[:20]) + _chunk(FRAME[20:] + b": keepalive\n\n") + _chunk(FRAME)
    body += b"0\r\nX-Trailer: 1\r\n\r\n"
    # the head and the first bytes in one send, then the rest cut mid chunk-size line
    sse = pieces(SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + body[:7], body[7:30], body[30:])
    with serving({("GET", SERVICE): whole(SERVICE_DOC), ("GET", SSE): sse}) as service:
        stream = stream_of(service)
        stream.open(Deadline.after(5.0))
        news = _news(stream)
    assert [(n.node, n.power) for n in news] == [("n1", PowerState.OFF)] * 2


def test_a_close_delimited_stream_delivers_its_events() -> None:
    sse = pieces(SSE_HEAD + b"\r\n" + FRAME[:10], FRAME[10:] + FRAME)
    with serving({("GET", SERVICE): whole(SERVICE_DOC), ("GET", SSE): sse}) as service:
        stream = stream_of(service)
        stream.open(Deadline.after(5.0))
        news = _news(stream)
    assert [(n.node, n.power) for n in news] == [("n1", PowerState.OFF)] * 2


def test_a_chunk_size_line_past_the_limit_is_a_protocol_error() -> None:
    sse = pieces(SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"0" * (MAX_LINE + 10))
    with serving({("GET", SERVICE): whole(SERVICE_DOC), ("GET", SSE): sse}) as service:
        stream = stream_of(service)
        stream.open(Deadline.after(5.0))
        with pytest.raises(BMCProtocolError):
            read_when_ready(stream, 5.0)


@pytest.mark.parametrize(
    ("path", "status", "cls"),
    [
        (SERVICE, 401, BMCAuthError),
        (SERVICE, 404, UnsupportedOperation),
        (SERVICE, 501, UnsupportedOperation),
        (SERVICE, 503, BMCBusy),
        (SERVICE, 507, BMCInternalError),
        (SSE, 403, BMCAuthError),
        (SSE, 429, BMCBusy),
        (SSE, 500, BMCInternalError),
    ],
)
def test_error_statuses_map_through_the_drivers_one_table(
    path: str, status: int, cls: type[BmaasError]
) -> None:
    scripts = {("GET", SERVICE): whole(SERVICE_DOC)}
    scripts[("GET", path)] = whole(answer(status, {"error": {}}, "Retry-After: 7"))
    with serving(scripts) as service:
        stream = stream_of(service)
        with pytest.raises(BmaasError) as raised:
            stream.open(Deadline.after(5.0))
        stream.close()
    assert type(raised.value) is cls
    if cls is BMCBusy:
        assert raised.value.retry_after == 7.0  # type: ignore[attr-defined]
