"""The lean read's own HTTP/1.1 (bmaas.drivers.redfish.wire, through bmaas.drivers.redfish.lean),
against scripted socket servers on 127.0.0.1.

What would break: a read that outlives its deadline against a server that
stalls or dribbles, a body read past its cap, a chunked body misframed, a
kept socket the server closed turned into a failure (it is sent once more,
fresh) or resent when the server did answer, a 401 not handed to the
re-login, a transport failure mapped unlike the requests path, TLS checked
differently from ``verify``, or a credential in an error message.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import sushy.exceptions as sushy_exc

from bmaas.deadline import Deadline
from bmaas.drivers.redfish.faults import (
    BodyTooLarge,
    ConnectFailed,
    DeadlineExceeded,
    map_exception,
)
from bmaas.drivers.redfish.lean import LeanReader
from bmaas.drivers.redfish.wire import (
    KEEP_FOR,
    IdleSockets,
    KeptConnections,
    StaleConnection,
    Target,
)
from bmaas.faults import (
    BMCFault,
    BMCProtocolError,
    BMCTimeout,
    BMCUnreachable,
    InputError,
)
from bmaas.hwlab.tls import make_certificate, server_context
from tests.budgets import CpuWait

SYSTEM = "/redfish/v1/Systems/1"
TOKEN = "tok-3f9a-secret"
BODY = json.dumps({"@odata.id": SYSTEM, "PowerState": "On", "Id": "1"}).encode()
#: how much later than its deadline a failing read may end; the time the
#: test's thread waited for a CPU meanwhile comes on top (CpuWait: at load
#: 30 a 0.4 s dribbled read ended after 1.40 s, issue 50's series)
SLACK = 0.5

#: one connection's script: it gets the socket and the server, returns when done
Script = Callable[[socket.socket, "Server"], None]


class Server:
    """Accepts connections on 127.0.0.1 and runs one script per connection
    (the last one again for any further connection); records every request."""

    def __init__(self, *scripts: Script, tls: Any = None) -> None:
        self.scripts = list(scripts)
        self.requests: list[bytes] = []
        self.connections = 0
        self.stop = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.tls = tls
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        workers = []
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            script = self.scripts[min(self.connections, len(self.scripts) - 1)]
            self.connections += 1
            worker = threading.Thread(target=self._one, args=(conn, script), daemon=True)
            worker.start()
            workers.append(worker)
        for worker in workers:
            worker.join(timeout=5)

    def _one(self, conn: socket.socket, script: Script) -> None:
        with contextlib.suppress(OSError):
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            with conn:
                conn.settimeout(5)
                script(conn, self)

    def request(self, conn: socket.socket) -> bytes:
        """Read one request head (a GET has no body)."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                raise ConnectionError("client closed")
            data += chunk
        self.requests.append(data)
        return data

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()


@contextlib.contextmanager
def serving(*scripts: Script, tls: Any = None) -> Iterator[Server]:
    server = Server(*scripts, tls=tls)
    try:
        yield server
    finally:
        server.close()


def answer(status: int = 200, body: bytes = BODY, *, headers: str = "", keep: bool = True) -> bytes:
    reason = {200: "OK", 304: "Not Modified", 401: "Unauthorized"}.get(status, "X")
    extra = "" if keep else "Connection: close\r\n"
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{extra}{headers}\r\n"
    ).encode() + body


def answers(*replies: bytes, then: Callable[[socket.socket], None] | None = None) -> Script:
    """Answer successive requests on one connection with ``replies``; then
    ``then(conn)`` (default: close)."""

    def script(conn: socket.socket, server: Server) -> None:
        for reply in replies:
            server.request(conn)
            conn.sendall(reply)
        if then is not None:
            then(conn)

    return script


def stall(conn: socket.socket, server: Server) -> None:
    server.request(conn)
    server.stop.wait(5)


_OPEN: list[LeanReader] = []


@pytest.fixture(autouse=True)
def _close_readers() -> Iterator[None]:
    """Kept sockets are closed by their reader's close (the connector's)."""
    yield
    while _OPEN:
        _OPEN.pop().close()


def reader(url: str, *, verify: bool | str = False, max_body: int = 1 << 20, **kw: Any) -> Any:
    session = requests.Session()
    session.headers["X-Auth-Token"] = TOKEN
    lean = LeanReader(
        session,
        url,
        verify=verify,
        after_denial=kw.pop("after_denial", _no_denial),
        max_body=max_body,
    )
    lean.keep_alive = kw.pop("keep_alive", True)
    _OPEN.append(lean)
    return lean


def _no_denial(path: str, error: sushy_exc.AccessError) -> requests.Response:
    raise error


def read(lean: LeanReader, seconds: float = 5.0) -> dict[str, Any]:
    return lean.read(SYSTEM, ("PowerState",), Deadline.after(seconds), headers={}, pace=None)


def mapped(exc: BaseException) -> Any:
    def build(cls: type[BMCFault], message: str, **kw: Any) -> BMCFault:
        return cls(message, node="n1", driver="redfish", operation="power.get", **kw)

    return map_exception(exc, build, node="n1", system=SYSTEM)


# -- the ordinary read ------------------------------------------------------------------


def test_reads_that_come_often_share_one_kept_connection() -> None:
    # the first read of a service asks for a close (no read came before it);
    # the reads after it, each within KEEP_FOR of the last, keep one socket
    with serving(answers(answer()), answers(answer(), answer(), answer())) as server:
        lean = reader(server.url)
        assert [read(lean) for _ in range(4)] == [{"PowerState": "On"}] * 4
        lean.close()
    assert server.connections == 2
    first, head = server.requests[0].decode(), server.requests[1].decode()
    assert "Connection: close\r\n" in first
    assert head.startswith(f"GET {SYSTEM} HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{server.port}\r\n" in head
    assert f"X-Auth-Token: {TOKEN}\r\n" in head
    assert all(b"Connection: close" not in r for r in server.requests[1:])


def test_without_keep_alive_each_read_has_its_connection() -> None:
    with serving(answers(answer(keep=False))) as server:
        lean = reader(server.url, keep_alive=False)
        assert [read(lean) for _ in range(2)] == [{"PowerState": "On"}] * 2
    assert server.connections == 2
    assert all(b"Connection: close\r\n" in r for r in server.requests)


def test_a_chunked_body_is_read_whole() -> None:
    half = len(BODY) // 2
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + f"{half:x};ext=1\r\n".encode()
        + BODY[:half]
        + b"\r\n"
        + f"{len(BODY) - half:X}\r\n".encode()
        + BODY[half:]
        + b"\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    with serving(answers(answer()), answers(chunked, answer())) as server:
        lean = reader(server.url)
        assert read(lean) == {"PowerState": "On"}  # the first: asks for a close
        assert read(lean) == {"PowerState": "On"}  # chunked, on the kept socket
        assert read(lean) == {"PowerState": "On"}  # framed: the socket goes on
    assert server.connections == 2


def test_a_body_to_the_close_is_read_and_the_socket_not_kept() -> None:
    to_close = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + BODY
    with serving(answers(to_close)) as server:
        lean = reader(server.url)
        assert read(lean) == {"PowerState": "On"}
        assert read(lean) == {"PowerState": "On"}
    assert server.connections == 2


def test_an_etag_is_asked_with_if_none_match_and_304_answers() -> None:
    first = answer(headers='ETag: "v1"\r\n')
    with serving(answers(first), answers(answer(304, b""))) as server:
        lean = reader(server.url)
        assert read(lean) == read(lean) == {"PowerState": "On"}
        assert (lean.sent, lean.not_modified) == (2, 1)
    assert b'If-None-Match: "v1"\r\n' in server.requests[1]


def test_an_etag_that_could_end_the_header_is_never_sent_back() -> None:
    first = answer(headers='ETag: "v1"\rX-Evil: 1\r\n')
    with serving(answers(first, answer())) as server:
        lean = reader(server.url)
        read(lean)
        read(lean)
    assert b"If-None-Match" not in server.requests[1]


# -- the deadline -----------------------------------------------------------------------


def test_a_server_that_never_answers_ends_by_the_deadline() -> None:
    with serving(stall) as server:
        lean = reader(server.url)
        start = time.monotonic()
        with CpuWait() as starved, pytest.raises(DeadlineExceeded) as info:
            read(lean, 0.3)
        took = time.monotonic() - start
    assert 0.25 <= took < 0.3 + SLACK + starved.seconds
    assert isinstance(mapped(info.value), BMCTimeout)


def test_a_dribbled_answer_ends_by_the_deadline() -> None:
    def dribble(conn: socket.socket, server: Server) -> None:
        server.request(conn)
        for byte in answer():
            if server.stop.wait(0.05):
                return
            conn.sendall(bytes([byte]))

    with serving(dribble) as server:
        lean = reader(server.url)
        start = time.monotonic()
        with CpuWait() as starved, pytest.raises(DeadlineExceeded):
            read(lean, 0.4)
        took = time.monotonic() - start
    # the whole answer would take over 5 s at a byte every 0.05 s
    assert took < 0.4 + SLACK + starved.seconds, (took, starved.seconds)


def test_a_passed_deadline_sends_nothing() -> None:
    with serving(answers(answer())) as server:
        lean = reader(server.url)
        gone = Deadline(time.monotonic() - 1)
        with pytest.raises(DeadlineExceeded):
            lean.read(SYSTEM, ("PowerState",), gone, headers={}, pace=None)
    assert server.requests == []


# -- the body cap -----------------------------------------------------------------------


def test_an_announced_length_over_the_cap_is_refused_unread() -> None:
    big = b"HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n"
    with serving(answers(big, then=lambda c: time.sleep(0.2))) as server:
        lean = reader(server.url, max_body=1024)
        with pytest.raises(BodyTooLarge) as info:
            read(lean)
    assert isinstance(mapped(info.value), BMCProtocolError)


@pytest.mark.parametrize("framing", ["chunked", "to-close"])
def test_a_body_without_a_length_is_dropped_past_the_cap(framing: str) -> None:
    def endless(conn: socket.socket, server: Server) -> None:
        server.request(conn)
        coding = "Transfer-Encoding: chunked\r\n" if framing == "chunked" else ""
        conn.sendall(f"HTTP/1.1 200 OK\r\n{coding}\r\n".encode())
        piece = b"x" * 4096
        chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if coding else piece
        sent = 0
        while sent < 64 * 1024 * 1024 and not server.stop.is_set():
            conn.sendall(chunk)
            sent += len(chunk)

    with serving(endless) as server:
        lean = reader(server.url, max_body=64 * 1024)
        with pytest.raises(BodyTooLarge):
            read(lean)


# -- a kept connection the server closed -------------------------------------------------


def test_a_kept_socket_the_server_closed_is_sent_once_more_fresh() -> None:
    # Each connection answers once and closes (an idle timeout on the BMC).
    with serving(answers(answer())) as server:
        lean = reader(server.url)
        assert read(lean) == {"PowerState": "On"}  # asks for a close
        assert read(lean) == {"PowerState": "On"}  # kept by the client
        time.sleep(0.05)  # the close has reached the client's socket
        assert read(lean) == {"PowerState": "On"}
        assert lean.sent == 4  # the stale try, and the fresh one
    assert server.connections == 3
    assert len(server.requests) == 3  # the stale try never reached a server


def test_a_fresh_connection_closed_without_an_answer_is_not_resent() -> None:
    def hang_up(conn: socket.socket, server: Server) -> None:
        server.request(conn)

    with serving(hang_up) as server:
        lean = reader(server.url)
        with pytest.raises(sushy_exc.ConnectionError) as info:
            read(lean)
    assert server.connections == 1
    fault = mapped(info.value)
    assert isinstance(fault, BMCTimeout)
    assert "closed without a response" in str(fault)


def test_stale_is_raised_only_for_a_reused_socket_that_got_nothing() -> None:
    with serving(answers(answer())) as server:
        conns = KeptConnections(Target.of(server.url, verify=False))
        request = f"GET {SYSTEM} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        conns.get(request, Deadline.after(5), what="GET", max_body=1 << 20, keep=True)
        assert repr(conns) == f"KeptConnections(127.0.0.1:{server.port}, idle=1)"
        time.sleep(0.05)
        with pytest.raises(StaleConnection):
            conns.get(request, Deadline.after(5), what="GET", max_body=1 << 20, keep=True)
        assert repr(conns).endswith("idle=0)")


# -- a socket is held between reads that come often, never for minutes ------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _get(conns: KeptConnections, *, keep: bool = True) -> None:
    request = f"GET {SYSTEM} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    conns.get(request, Deadline.after(5), what="GET", max_body=1 << 20, keep=keep)


def test_only_a_read_within_keep_for_of_the_last_asks_to_keep_its_socket() -> None:
    clock, book = Clock(), IdleSockets()
    with serving(answers(answer(), answer(), answer())) as server:
        conns = KeptConnections(Target.of(server.url, verify=False), clock=clock, idle=book)
        assert not conns.keeps()  # nothing read yet: the first of a burst
        _get(conns, keep=conns.keeps())
        clock.now += KEEP_FOR
        assert conns.keeps()  # a read every KEEP_FOR seconds (polling) keeps
        _get(conns, keep=conns.keeps())
        clock.now += KEEP_FOR + 1
        assert not conns.keeps()  # a liveness read minutes after the last
        conns.close()


def test_an_idle_socket_is_closed_at_any_services_get_once_it_waited_keep_for() -> None:
    clock, book = Clock(), IdleSockets()
    with serving(answers(answer(), answer())) as server:
        target = Target.of(server.url, verify=False)
        held = KeptConnections(target, clock=clock, idle=book)
        other = KeptConnections(target, clock=clock, idle=book)
        _get(held)
        assert repr(held).endswith("idle=1)")
        assert len(book) == 1
        clock.now += KEEP_FOR - 1
        _get(other, keep=False)  # not due yet: kept
        assert repr(held).endswith("idle=1)")
        clock.now += 1
        _get(other, keep=False)  # due: closed by another service's GET, no thread
        assert repr(held).endswith("idle=0)")
        assert len(book) == 0
    assert server.connections == 3


def test_a_socket_used_again_is_due_from_its_last_use_and_a_gone_service_is_skipped() -> None:
    clock, book = Clock(), IdleSockets()
    with serving(answers(answer(), answer())) as server:
        conns = KeptConnections(Target.of(server.url, verify=False), clock=clock, idle=book)
        _get(conns)
        clock.now += KEEP_FOR / 2
        _get(conns)  # the same socket, given back again
        assert conns.opened == 1
        assert len(book) == 2
        clock.now += KEEP_FOR / 2
        assert book.close_due(clock.now) == 0  # the first note: not due any more
        assert repr(conns).endswith("idle=1)")
        conns.close()
        del conns  # a service gone (its connector closed and dropped)
        clock.now += KEEP_FOR
        assert book.close_due(clock.now) == 0
        assert len(book) == 0


# -- answers that are errors --------------------------------------------------------------


def test_a_401_goes_to_the_re_login_and_its_answer_is_read() -> None:
    denied = answer(401, b'{"error": {"code": "Base.1.0.NoValidSession"}}')
    seen: list[int] = []

    def relogin(path: str, error: sushy_exc.AccessError) -> requests.Response:
        seen.append(error.status_code)
        assert error.response.request.path_url == SYSTEM  # type: ignore[attr-defined]
        again = requests.Response()
        again.status_code, again._content = 200, BODY
        return again

    with serving(answers(denied)) as server:
        lean = reader(server.url, after_denial=relogin)
        assert read(lean) == {"PowerState": "On"}
    assert seen == [401]


def test_a_busy_answer_keeps_its_retry_after_for_the_mapping() -> None:
    busy = answer(503, b'{"error": {"code": "Base.1.0.ServiceTemporarilyUnavailable"}}')
    busy = busy.replace(b"\r\n\r\n", b"\r\nRetry-After: 7\r\n\r\n", 1)
    with serving(answers(busy)) as server:
        lean = reader(server.url)
        with pytest.raises(sushy_exc.HTTPError) as info:
            read(lean)
    fault = mapped(info.value)
    assert type(fault).__name__ == "BMCBusy"
    assert fault.retry_after == 7.0


@pytest.mark.parametrize(
    ("reply", "fault"),
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n", BMCProtocolError),  # not HTTP
        (answer()[:-5], BMCProtocolError),  # truncated body, then closed
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", BMCProtocolError),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", BMCProtocolError),
    ],
)
def test_a_malformed_answer_is_a_protocol_error(reply: bytes, fault: type[BMCFault]) -> None:
    with serving(answers(reply)) as server:
        lean = reader(server.url)
        with pytest.raises(sushy_exc.ConnectionError) as info:
            read(lean)
    assert isinstance(mapped(info.value), fault)
    assert TOKEN not in str(info.value)
    assert TOKEN not in str(info.value.__cause__)


def test_connection_refused_is_unreachable() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    lean = reader(f"http://127.0.0.1:{port}")
    with pytest.raises(sushy_exc.ConnectionError) as info:
        read(lean)
    assert isinstance(mapped(info.value), BMCUnreachable)


# -- TLS ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab_tls(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return make_certificate(Path(tmp_path_factory.mktemp("tls")))


def test_tls_is_checked_against_the_given_ca(lab_tls: Any) -> None:
    scripts = answers(answer()), answers(answer(), answer())
    with serving(*scripts, tls=server_context(lab_tls)) as server:
        lean = reader(server.url, verify=str(lab_tls.ca_path))
        assert read(lean) == read(lean) == read(lean) == {"PowerState": "On"}
    assert server.connections == 2  # the first read asked for a close


def test_tls_from_an_unknown_ca_is_a_configuration_fault(lab_tls: Any) -> None:
    with serving(answers(answer()), tls=server_context(lab_tls)) as server:
        lean = reader(server.url, verify=True)  # certifi's bundle: not the lab's CA
        with pytest.raises(sushy_exc.ConnectionError) as info:
            read(lean)
    fault = mapped(info.value)
    assert isinstance(fault, InputError)  # the node's CA setting, not its hardware
    assert fault.field == "driver_info.redfish_verify_ca"


def test_tls_unchecked_when_verify_is_false(lab_tls: Any) -> None:
    with serving(answers(answer()), tls=server_context(lab_tls)) as server:
        lean = reader(server.url, verify=False)
        assert read(lean) == {"PowerState": "On"}


def _raised_from(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        raise outer from inner
    except BaseException as exc:
        return exc


@pytest.mark.parametrize(
    ("inner", "text"),
    [
        (socket.gaierror(-2, "Name or service not known"), "does not resolve"),
        (OSError(113, "No route to host"), "could not connect"),
        (TimeoutError("timed out"), "could not connect"),
    ],
)
def test_a_connection_never_made_is_unreachable(inner: OSError, text: str) -> None:
    """The lean read's own connect failures map as urllib3's do (never sent)."""
    failed = _raised_from(ConnectFailed("GET /redfish/v1/Systems/1: OSError"), inner)
    wrapped = _raised_from(sushy_exc.ConnectionError(url="http://bmc", error=failed), failed)
    fault = mapped(wrapped)
    assert isinstance(fault, BMCUnreachable)
    assert text in str(fault)
