"""The control API answers every request, however malformed, with a status
code and a one-line JSON error; sizes and counts are bounded, the limit named."""

from __future__ import annotations

import json
import select
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from bmaas.hwlab.control import ControlServer
from bmaas.hwlab.lab import Lab

pytestmark = pytest.mark.lab

RULE = '{"rules": [{"effect": "hang"}]}'
TOKEN = "test-token-of-this-module"
#: what every request from the lab's owner carries (bmaas.hwlab.controlauth)
OWNER = ["Host: 127.0.0.1", f"Authorization: Bearer {TOKEN}", "Content-Type: application/json"]


def _post(path: str, body: str, *extra: str) -> bytes:
    head = [f"POST {path} HTTP/1.1", *OWNER, f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n" + body).encode("latin-1")


def _bare(request_line: str) -> bytes:
    return ("\r\n".join([request_line, *OWNER, "Content-Length: 0"]) + "\r\n\r\n").encode()


MALFORMED: dict[str, bytes] = {
    "content-length not a number": b"POST /faults/node-001 HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
    "negative content-length": b"POST /faults/node-001 HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
    "rules that are not mappings": _post("/faults/node-001", '{"rules": [123]}'),
    "rules not a list": _post("/faults/node-001", '{"rules": "hang"}'),
    "body not JSON": _post("/faults/node-001", "{rules"),
    "body a JSON list": _post("/faults/node-001", "[1, 2]"),
    "body not UTF-8": _post("/faults/node-001", "\xff\xfe"),
    "unknown effect": _post("/faults/node-001", '{"rules": [{"effect": "zap"}]}'),
    "bad effect parameter": _post(
        "/faults/node-001", '{"rules": [{"effect": "busy", "retry_after": -1}]}'
    ),
    "unknown node": _post("/faults/nope", RULE),
    "too many rules": _post("/faults/node-001", json.dumps({"rules": [{"effect": "hang"}] * 65})),
    "node name too long": _post("/faults/" + "n" * 300, RULE),
    "bad power state": _post("/power/node-001", '{"state": "maybe"}'),
    "power on unknown node": _post("/power/nope", '{"state": "on"}'),
    "bad health": _post("/health/node-001", '{"health": "Fine"}'),
    "unknown path": _bare("GET /nope HTTP/1.1"),
    "method not allowed": _bare("PUT /status HTTP/1.1"),
    "body too large": b"POST /faults/node-001 HTTP/1.1\r\nContent-Length: 999999999\r\n\r\n",
    "malformed header": b"GET /status HTTP/1.1\r\nno colon here\r\n\r\n",
    "garbage request line": b"GARBAGE\r\n\r\n",
    "bad chunk size": b"POST /faults/node-001 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
}


@pytest.fixture
def control(hwlab_lab: Callable[..., Lab]) -> Iterator[ControlServer]:
    lab = hwlab_lab(nodes=2, protocols="ipmi")
    server = ControlServer(lab, token=TOKEN)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _exchange(server: ControlServer, raw: bytes) -> tuple[int, dict[str, object]]:
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert data.count(b"HTTP/1.1 ") == 1, data
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)


def test_twenty_one_malformed_requests_each_get_a_4xx_and_a_one_line_json_error(
    control: ControlServer,
) -> None:
    assert len(MALFORMED) == 21
    for what, raw in MALFORMED.items():
        status, body = _exchange(control, raw)
        assert 400 <= status < 500, (what, status, body)
        error = body.get("error")
        assert isinstance(error, str), (what, body)
        assert error, what
        assert "\n" not in error, (what, body)
    # The API still works after all that.
    status, body = _exchange(control, _post("/faults/node-001", RULE))
    assert (status, body) == (200, {"rules": 1})


def test_a_body_nested_100k_deep_is_a_4xx_not_a_crash(control: ControlServer) -> None:
    """json's parser gives up with RecursionError: the body's fault (was HTTP 500)."""
    deep = '{"rules": ' + "[" * 100_000 + "]" * 100_000 + "}"
    status, body = _exchange(control, _post("/faults/node-001", deep))
    assert status == 400, body
    assert body == {"error": "body is nested too deeply", "code": "bad_request"}
    status, body = _exchange(control, _post("/faults/node-001", RULE))
    assert (status, body) == (200, {"rules": 1})


@pytest.mark.parametrize(
    ("what", "needle"),
    [
        ("too many rules", "MAX_RULES_PER_CALL"),
        ("node name too long", "MAX_NODE_NAME"),
        ("body too large", "262144"),
    ],
)
def test_limits_are_named_in_the_error(control: ControlServer, what: str, needle: str) -> None:
    assert needle in str(_exchange(control, MALFORMED[what])[1]["error"])


ISSUE_23: dict[str, bytes] = {
    "probability NaN": _post(
        "/faults/node-001", '{"rules": [{"effect": "busy", "probability": NaN}]}'
    ),
    "seconds Infinity": _post(
        "/faults/node-001", '{"rules": [{"effect": "delay", "seconds": Infinity}]}'
    ),
    "after 1e300": _post("/faults/node-001", '{"rules": [{"effect": "hang", "after": 1e300}]}'),
    "nested 100k deep": _post("/faults/node-001", "[" * 100_000 + "]" * 100_000),
}


@pytest.mark.parametrize("what", list(ISSUE_23))
def test_non_finite_numbers_and_deep_bodies_get_a_400(control: ControlServer, what: str) -> None:
    status, body = _exchange(control, ISSUE_23[what])
    assert status == 400, (what, body)
    assert "\n" not in str(body["error"])


def test_stopping_with_a_client_connected_logs_no_traceback(
    control: ControlServer, caplog: pytest.LogCaptureFixture
) -> None:
    """`hwlab down` stops the server from a request on an open keep-alive
    connection: cancelling that connection must end quietly (Python 3.11's
    asyncio logged a CancelledError traceback from its own done-callback)."""
    host, port = control.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as client:
        client.sendall(_bare("GET /status HTTP/1.1"))
        assert client.recv(65536).startswith(b"HTTP/1.1 200")  # kept alive: a task waits on it
        with caplog.at_level("DEBUG", logger="asyncio"):
            control.stop()
    assert "CancelledError" not in caplog.text
    assert "Traceback" not in caplog.text


def test_shutdown_is_answered_before_the_server_stops(
    hwlab_lab: Callable[..., Lab],
) -> None:
    """`hwlab down` sends SIGTERM when its POST /shutdown gets no answer; a
    lab that began stopping before answering lost the answer now and then and
    died of that SIGTERM half-way through its own exit (CI: exit -15). The
    answer is on the client's socket before ``on_shutdown`` runs."""
    readable_when_stopping: list[bool] = []
    client = socket.socket()
    stopped = threading.Event()

    def on_shutdown() -> None:
        readable, _, _ = select.select([client], [], [], 0)
        readable_when_stopping.append(bool(readable))
        stopped.set()

    server = ControlServer(
        hwlab_lab(nodes=1, protocols="ipmi"), token=TOKEN, on_shutdown=on_shutdown
    )
    server.start()
    try:
        port = int(server.url.rsplit(":", 1)[1])
        with client:
            client.settimeout(10)
            client.connect(("127.0.0.1", port))
            client.sendall(_post("/shutdown", "{}"))
            assert stopped.wait(10)
            assert client.recv(65536).startswith(b"HTTP/1.1 200 ")
    finally:
        server.stop()
    assert readable_when_stopping == [True]


def test_a_shutdown_routed_from_an_encoded_path_stops_too(
    hwlab_lab: Callable[..., Lab],
) -> None:
    """The answer and the stopping take the same route: a path the API
    routes to shutdown (``/shut%64own/``) is answered 200 *and* stops the
    lab, never one without the other."""
    stopped = threading.Event()
    server = ControlServer(
        hwlab_lab(nodes=1, protocols="ipmi"), token=TOKEN, on_shutdown=stopped.set
    )
    server.start()
    try:
        status, body = _exchange(server, _post("/shut%64own/", "{}"))
        assert (status, body) == (200, {"stopping": True})
        assert stopped.wait(10)
    finally:
        server.stop()


def test_health_is_set_behind_the_bmc_and_shown_in_status(control: ControlServer) -> None:
    status, body = _exchange(control, _post("/health/node-002", '{"health": "Critical"}'))
    assert (status, body) == (200, {"node": "node-002", "health": "Critical"})
    status, body = _exchange(control, _bare("GET /status HTTP/1.1"))
    assert status == 200
    nodes = body["nodes"]
    assert isinstance(nodes, dict)
    assert (nodes["node-001"].get("health"), nodes["node-002"].get("health")) == (
        "OK",
        "Critical",
    ), nodes
