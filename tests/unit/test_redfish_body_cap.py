"""The Redfish transport reads no body larger than the node's cap.

A tiny server on 127.0.0.1 answers with an announced length over the cap,
an endless chunked body, or a small body; the transport refuses the first
two (``BodyTooLarge``, ``BMCProtocolError`` after the driver's mapping)
without reading them whole, and reads the third as usual."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest
import requests

from bmaas.deadline import Deadline
from bmaas.driver_info import DEFAULT_MAX_BODY_BYTES
from bmaas.drivers.redfish.faults import BodyTooLarge, map_exception
from bmaas.drivers.redfish.transport import DeadlineAdapter, ExchangeDeadline
from bmaas.faults import BMCProtocolError, InputError
from bmaas.registry import build_driver

CAP = 64 * 1024
#: more than the loopback socket buffers can hold: an endless body the client
#: had read whole would have made the server send far more than this
SENT_BOUND = 64 * 1024 * 1024


class Server:
    """Answers every connection with ``head`` and then ``body()``'s chunks,
    counting what it managed to send before the client hung up."""

    def __init__(self, head: bytes, body: Iterator[bytes]) -> None:
        self.head, self.body = head, body
        self.sent = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(10)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            conn, _ = self.sock.accept()
            with conn:
                conn.settimeout(10)
                conn.recv(65536)  # the request
                conn.sendall(self.head)
                for chunk in self.body:
                    conn.sendall(chunk)
                    self.sent += len(chunk)

    def close(self) -> None:
        self.sock.close()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()


@contextlib.contextmanager
def serving(head: bytes, body: Iterator[bytes]) -> Iterator[Server]:
    server = Server(head, body)
    try:
        yield server
    finally:
        server.close()


def get(port: int, *, cap: int = CAP) -> requests.Response:
    session = requests.Session()
    session.trust_env = False
    session.mount("http://", DeadlineAdapter(max_body=cap))
    try:
        deadline = Deadline.after(20.0)
        url = f"http://127.0.0.1:{port}/redfish/v1"
        return session.get(url, timeout=ExchangeDeadline(deadline))  # type: ignore[arg-type]
    finally:
        session.close()


def endless_chunks() -> Iterator[bytes]:
    piece = b"x" * 16384
    frame = b"%x\r\n" % len(piece) + piece + b"\r\n"
    while True:
        yield frame


def test_an_announced_length_over_the_cap_is_refused_unread() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    too_large = r"1073741824-byte body is over the 65536-byte cap"
    with (
        serving(head % (1 << 30), iter([b"{" + b" " * 1024])) as server,
        pytest.raises(BodyTooLarge, match=too_large),
    ):
        get(server.port)


def test_an_endless_chunked_body_stops_at_the_cap() -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    with (
        serving(head, endless_chunks()) as server,
        pytest.raises(BodyTooLarge, match="passed the 65536-byte cap"),
    ):
        get(server.port)
    # the client hung up: the server could not push the endless body into it
    assert server.sent < SENT_BOUND


def test_a_body_under_the_cap_is_read() -> None:
    body = b'{"Id": "RootService"}'
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    with serving(head % len(body), iter([body])) as server:
        assert get(server.port).json() == {"Id": "RootService"}


def test_too_large_maps_to_a_protocol_error() -> None:
    def build(cls: type, message: str, **kw: object) -> BMCProtocolError:
        assert cls is BMCProtocolError
        return BMCProtocolError(message)

    fault = map_exception(BodyTooLarge("GET /redfish/v1: too big"), build, node="n1")
    assert isinstance(fault, BMCProtocolError)


INFO = {"redfish_address": "https://10.0.0.9", "redfish_username": "a", "redfish_password": "b"}


def _cap_of(driver: object) -> int:
    session = driver._service().conn._session  # type: ignore[attr-defined]
    adapter = session.get_adapter("https://10.0.0.9")
    assert isinstance(adapter, DeadlineAdapter)
    return adapter.max_body


def test_the_cap_is_set_per_node_in_driver_info() -> None:
    assert _cap_of(build_driver("n1", "redfish", INFO)) == DEFAULT_MAX_BODY_BYTES
    small = build_driver("n2", "redfish", {**INFO, "redfish_max_body_bytes": 131072})
    assert _cap_of(small) == 131072


@pytest.mark.parametrize("value", [0, 1024, 2 << 30, 1.5, float("nan"), "lots"])
def test_a_cap_out_of_range_is_refused(value: object) -> None:
    with pytest.raises(InputError, match="redfish_max_body_bytes"):
        build_driver("n1", "redfish", {**INFO, "redfish_max_body_bytes": value})


def test_a_power_read_against_an_endless_body_is_a_protocol_error() -> None:
    """The whole chain: driver_info's cap reaches the transport, and the
    driver's one mapping makes the refusal a BMCProtocolError."""
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    with serving(head, endless_chunks()) as server:
        info = {
            **INFO,
            "redfish_address": f"http://127.0.0.1:{server.port}",
            "redfish_max_body_bytes": CAP,
        }
        driver = build_driver("n1", "redfish", info)
        try:
            with pytest.raises(BMCProtocolError, match="65536-byte cap"):
                driver.get_power_state(deadline=Deadline.after(20.0))
        finally:
            driver.close()
    assert server.sent < SENT_BOUND


def test_a_body_is_held_once_while_it_is_read() -> None:
    """The body read grows one buffer that becomes the response's content:
    the allocations peak near the body's size, not twice it (a list of
    chunks joined at the end held it twice)."""
    import tracemalloc

    from bmaas.drivers.redfish.transport import _read_body

    size = 8 * 1024 * 1024

    class Streamed:
        headers: dict[str, str] = {}  # no Content-Length: read until the end

        def iter_content(self, chunk: int) -> Iterator[bytes]:
            for _ in range(size // chunk):
                yield b"x" * chunk

        def close(self) -> None:
            raise AssertionError("a body under the cap is read whole")

    response = Streamed()
    tracemalloc.start()
    try:
        _read_body(response, Deadline.after(30), "GET /big", size)  # type: ignore[arg-type]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(response._content) == size  # type: ignore[attr-defined]
    assert bytes(response._content[:4]) == b"xxxx"  # type: ignore[attr-defined]
    assert peak < 1.4 * size, f"peak {peak / size:.2f}x the body"
