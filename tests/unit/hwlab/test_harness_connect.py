"""The harness's Ironic connection sends a request again when the API closed
its connection unanswered (cheroot's keep-alive expiry, which a loaded runner
runs late): the observer's connection is not what a test measures."""

from __future__ import annotations

import contextlib
import inspect
import json
import socket
import threading
from collections.abc import Iterator

import openstack.proxy
import pytest
from keystoneauth1 import exceptions as ks_exc

from bmaas.hwlab.harness.ironic import OBSERVER_CONNECT_RETRIES, connect

pytestmark = [
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK50Warning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK60Warning"),
]


class _Api:
    """An Ironic API stand-in on 127.0.0.1 that closes the first ``closes``
    node reads unanswered; version discovery is answered."""

    def __init__(self, closes: int) -> None:
        self.closes = closes
        self.requests: list[str] = []
        self.open: list[socket.socket] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(10)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        with self.sock:
            while True:
                try:
                    conn, _ = self.sock.accept()
                except OSError:  # closed by the test, or its 10 s ran out
                    return
                self.open.append(conn)
                with conn, contextlib.suppress(OSError):  # the test shut it
                    self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        for _ in range(20):  # requests on one keep-alive connection
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            line = data.split(b"\r\n", 1)[0].decode()
            self.requests.append(line)
            if "/nodes/" in line and self.closes:
                self.closes -= 1
                return  # closed without an answer
            conn.sendall(_response(self._document(line)))

    def _document(self, line: str) -> dict[str, object]:
        if "/nodes/" in line:
            return {"uuid": "n-1", "name": "node-001", "provision_state": "available"}
        v1 = {
            "id": "v1",
            "links": [{"href": f"{self.url}/v1/", "rel": "self"}],
            "status": "CURRENT",
            "min_version": "1.1",
            "version": "1.99",
        }
        return {"versions": [v1], "default_version": v1}


def _response(document: dict[str, object]) -> bytes:
    body = json.dumps(document).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    return head.encode() + b"\r\n\r\n" + body


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr("keystoneauth1.session.time.sleep", slept.append)
    return slept


def _api(closes: int) -> Iterator[_Api]:
    api = _Api(closes)
    api.thread.start()
    try:
        yield api
    finally:
        with contextlib.suppress(OSError):  # wakes the accept (Linux)
            api.sock.shutdown(socket.SHUT_RDWR)
        for conn in api.open:  # the client's pool may keep one open
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        api.thread.join(timeout=10)
        assert not api.thread.is_alive()


def _node_reads(api: _Api) -> list[str]:
    return [r for r in api.requests if "/nodes/" in r]


def test_a_read_the_api_closed_unanswered_is_sent_again(sleeps: list[float]) -> None:
    for api in _api(closes=1):
        node = connect(api.url).baremetal.get_node("n-1")
        assert node.name == "node-001"
        assert _node_reads(api) == ["GET /v1/nodes/n-1 HTTP/1.1"] * 2
    assert sleeps == [0.5]


def test_an_api_that_keeps_closing_ends_in_connect_failure(sleeps: list[float]) -> None:
    for api in _api(closes=OBSERVER_CONNECT_RETRIES + 1):
        with pytest.raises(ks_exc.ConnectFailure):
            connect(api.url).baremetal.get_node("n-1")
        retries = _retries_per_request()
        assert len(_node_reads(api)) == retries + 1
    assert sleeps == [0.5, 1.0, 2.0][:retries]


def _retries_per_request() -> int:
    """openstacksdk 4.1.0 (the floor) gives each proxy request
    ``connect_retries=1`` of its own, over the connection's setting; 4.22.0
    (the newest tested) leaves it None, and the connection's applies."""
    own = inspect.signature(openstack.proxy.Proxy.request).parameters["connect_retries"].default
    return OBSERVER_CONNECT_RETRIES if own is None else int(own)
