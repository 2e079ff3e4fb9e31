"""The lean read's own HTTP/1.1: one GET on a kept socket, the answer framed by hand.

Through ``requests`` a kept-connection GET costs about 1 ms of client CPU
(measured on hwlab, 2 cores): urllib3's pool lookup, ``Retry`` and
``Timeout`` objects, URL re-parsing, proxy selection, and ``http.client``
parsing the answer's headers with :mod:`email.parser` -- three quarters of a
pooled power read, to learn one field of a 300-byte answer. Here a GET is
pre-built request bytes, one ``sendall`` and, on a kept connection, usually
one ``recv``; the status line and headers are split by hand.

The guarantees of :class:`~bmaas.drivers.redfish.transport.DeadlineAdapter` hold:

* **total deadline**: every blocking step (connect, TLS handshake, send,
  each receive) gets the time left as its socket timeout, and each of those
  is bounded as a whole by Python (``sendall`` and ``SSLSocket`` operations
  count from their start), so the exchange ends by the deadline however the
  server dribbles -- no watchdog thread needed; a timeout once the deadline
  has passed is :class:`~bmaas.drivers.redfish.faults.DeadlineExceeded`;
* **body cap**: a ``Content-Length`` over ``max_body`` is refused unread, a
  chunked body or one read to the close is dropped as soon as it passes it
  (:class:`~bmaas.drivers.redfish.faults.BodyTooLarge`);
* **one attempt**: nothing is retried, except a GET sent on a *reused*
  socket the server had already closed (nothing at all came back): that is
  :class:`StaleConnection`, and the caller sends it once more on a new
  connection -- the request never reached the service, and a GET is
  idempotent anyway;
* failures below HTTP raise what :mod:`bmaas.drivers.redfish.faults` maps: the
  stdlib's socket and TLS errors, ``http.client`` exceptions for a reply
  that is not HTTP, :class:`~bmaas.drivers.redfish.faults.ConnectFailed` for a
  connection never made.

Sockets are moved above ``select()``'s reach like urllib3's
(:mod:`bmaas.drivers.redfish.descriptors`). No message or repr here holds a
request's bytes: they carry the session token or basic-auth credentials.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import http.client
import itertools
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from bmaas.deadline import Deadline
from bmaas.drivers.redfish.descriptors import move_high
from bmaas.drivers.redfish.faults import ConnectFailed, DeadlineExceeded
from bmaas.drivers.redfish.framing import Reader, left, read_body, read_head
from bmaas.tlspolicy import TLSPolicy, client_context

__all__ = [
    "KEEP_FOR",
    "Answer",
    "IdleSockets",
    "KeptConnections",
    "StaleConnection",
    "Target",
    "connect",
    "exchange",
    "header_bytes",
    "request_bytes",
]

#: idle sockets kept per service (requests' pool default, 10); the BMC's
#: gate caps requests in flight per service well below it
MAX_IDLE = 10
#: seconds a kept socket waits idle for its service's next GET before it is
#: closed, and the longest gap between two GETs of a service for the second
#: to ask to keep its socket: above a 60 s polling interval (the sync's and
#: Ironic's power sync default), below the 300 s between a streamed node's
#: liveness reads. A session is held for minutes; its socket is not (10,000
#: streamed nodes kept a socket each beside their stream's: EMFILE at 20,000)
KEEP_FOR = 90.0
#: characters that would end a request line or header early
_ILLEGAL = ("\r", "\n", "\0")


class StaleConnection(Exception):
    """A reused socket brought nothing back: the server had closed it."""


@dataclasses.dataclass(frozen=True)
class Target:
    """Where a service's lean GETs go, and how TLS is checked there."""

    host: str
    port: int
    #: the ``Host`` header's value
    authority: str
    tls: ssl.SSLContext | None

    @classmethod
    def of(cls, base: str, *, verify: bool | str, tls: TLSPolicy | None = None) -> Target:
        """The target of a service URL (``https://bmc:8443``), verifying TLS
        as requests does with the same ``verify`` (CA file or directory,
        certifi's bundle for ``True``, no check for ``False``), under the
        node's TLS policy (:mod:`bmaas.tlspolicy`: TLS 1.2 at least)."""
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) service URL: {parts.scheme}://{parts.hostname}")
        context = client_context(verify, tls or TLSPolicy()) if parts.scheme == "https" else None
        default = 443 if context is not None else 80
        port = parts.port or default
        host = parts.hostname
        shown = f"[{host}]" if ":" in host else host
        authority = shown if port == default else f"{shown}:{port}"
        return cls(host, port, authority, context)


@dataclasses.dataclass(frozen=True)
class Answer:
    """A whole HTTP answer: status, headers (lower-case names, repeats
    joined by ``", "``) and body."""

    status: int
    reason: str
    headers: dict[str, str]
    body: bytes


class IdleSockets:
    """When each idle kept socket of the process falls due to close.

    A socket given back idle is noted with the time it falls due (its
    service's ``keep_for`` later); every GET, of any service, first closes
    the sockets due (:meth:`close_due`): a process holding thousands of
    sessions for reads minutes apart holds no socket between them, without
    a thread of its own. What it keeps after its last GET is what the GETs
    of the last ``keep_for`` seconds left. Thread-safe; entries of a
    service that is gone are skipped.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._due: list[tuple[float, int, weakref.ref[KeptConnections]]] = []
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._due)

    def note(self, at: float, kept: KeptConnections) -> None:
        """``kept`` gave a socket back that falls due at ``at``."""
        with self._lock:
            heapq.heappush(self._due, (at, next(self._order), weakref.ref(kept)))

    def close_due(self, now: float) -> int:
        """Close every idle socket due by ``now``; returns how many."""
        closed = 0
        while True:
            with self._lock:
                if not self._due or self._due[0][0] > now:
                    return closed
                kept = heapq.heappop(self._due)[2]()
            if kept is not None:
                closed += kept.close_idle(now)


#: the process's idle kept sockets (one book, as the descriptors are one)
IDLE_SOCKETS = IdleSockets()


class KeptConnections:
    """The idle sockets of one service, and GETs sent on them.

    A socket is kept only between GETs that come often (:meth:`keeps`: the
    caller asks the server to keep it, by the request's own headers), and
    closed once idle ``keep_for`` seconds (:class:`IdleSockets`): a service
    read every minute keeps one socket; one read every five minutes (a
    streamed node's liveness read) holds none between its reads.
    Thread-safe: a socket is used by one GET at a time (taken from the idle
    list, given back only after a whole answer that lets it be kept).
    """

    def __init__(
        self,
        target: Target,
        *,
        max_idle: int = MAX_IDLE,
        keep_for: float = KEEP_FOR,
        clock: Callable[[], float] = time.monotonic,
        idle: IdleSockets = IDLE_SOCKETS,
    ) -> None:
        self.target = target
        self._max_idle = max_idle
        self.keep_for = keep_for
        self._clock = clock
        self._book = idle
        #: idle sockets, and when each was given back (oldest first)
        self._idle: list[tuple[socket.socket, float]] = []
        self._lock = threading.Lock()
        self._closed = False
        self._last_get: float | None = None
        #: connections opened (for tests and benches)
        self.opened = 0

    def __repr__(self) -> str:
        return f"KeptConnections({self.target.authority}, idle={len(self._idle)})"

    def keeps(self) -> bool:
        """Whether a GET now should ask to keep its socket: the service's
        previous GET was within ``keep_for`` seconds (the first of a burst,
        and a read minutes after the last, ask for a close)."""
        last = self._last_get
        return last is not None and self._clock() - last <= self.keep_for

    def get(
        self,
        request: bytes,
        deadline: Deadline,
        *,
        what: str,
        max_body: int,
        keep: bool,
        fresh: bool = False,
    ) -> Answer:
        """Send ``request`` (a whole GET) and read its answer by ``deadline``.

        ``keep``: the request asks to keep the connection; the socket is kept
        if the answer allows it too. ``fresh``: on a new connection, not an
        idle one. ``what`` names the request in errors (never its bytes).
        Raises :class:`StaleConnection` when a reused socket had been closed
        by the server; the idle ones are dropped with it (a BMC that closed
        one has likely closed all), and the caller may send once more, fresh.
        The process's idle sockets due to close are closed first.
        """
        now = self._clock()
        self._last_get = now
        self._book.close_due(now)
        sock = None if fresh else self._take()
        reused = sock is not None
        if sock is None:
            sock = self._connect(deadline, what)
        try:
            answer, reusable = _exchange(sock, request, deadline, what, max_body, reused=reused)
        except StaleConnection:
            _close(sock)
            self._drop_idle()
            raise
        except BaseException:
            _close(sock)
            raise
        if keep and reusable:
            self._give_back(sock)
        else:
            _close(sock)
        return answer

    def close(self) -> None:
        """Close every idle socket; one in use closes when its GET ends."""
        self._closed = True
        self._drop_idle()

    def close_idle(self, now: float) -> int:
        """Close the sockets idle ``keep_for`` seconds by ``now``; returns how many."""
        cut = now - self.keep_for
        with self._lock:
            due = [sock for sock, since in self._idle if since <= cut]
            if due:
                self._idle = [(sock, since) for sock, since in self._idle if since > cut]
        for sock in due:
            _close(sock)
        return len(due)

    def _drop_idle(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for sock, _ in idle:
            _close(sock)

    def _take(self) -> socket.socket | None:
        """The most recently kept idle socket (those due were closed first)."""
        with self._lock:
            return self._idle.pop()[0] if self._idle else None

    def _give_back(self, sock: socket.socket) -> None:
        now = self._clock()
        with self._lock:
            kept = not self._closed and len(self._idle) < self._max_idle
            if kept:
                self._idle.append((sock, now))
        if kept:
            self._book.note(now + self.keep_for, self)
        else:
            _close(sock)

    def _connect(self, deadline: Deadline, what: str) -> socket.socket:
        sock = connect(self.target, deadline, what)
        self.opened += 1
        return sock


def connect(target: Target, deadline: Deadline, what: str) -> socket.socket:
    """A new connection to ``target`` (TLS under its policy), by ``deadline``:
    the one way bmaas's own HTTP reaches a Redfish service."""
    try:
        sock = _open(target.host, target.port, deadline, what)
    except OSError as exc:
        if deadline.expired:
            raise DeadlineExceeded(f"{what}: no connection by the deadline") from exc
        raise ConnectFailed(f"{what}: {type(exc).__name__}") from exc
    try:
        sock = move_high(sock)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if target.tls is not None:
            sock.settimeout(left(deadline, what))  # the handshake, as a whole
            sock = target.tls.wrap_socket(sock, server_hostname=target.host)
    except ssl.SSLError:
        _close(sock)
        raise  # mapped as a TLS failure (never delivered)
    except OSError as exc:
        _close(sock)
        if deadline.expired:
            raise DeadlineExceeded(f"{what}: no TLS session by the deadline") from exc
        raise ConnectFailed(f"{what}: TLS handshake: {type(exc).__name__}") from exc
    except BaseException:
        _close(sock)
        raise
    return sock


def exchange(
    target: Target, request: bytes, deadline: Deadline, *, what: str, max_body: int
) -> Answer:
    """One request (any method, its body in ``request``) on a connection of
    its own, closed after: the whole answer by ``deadline``, whatever its
    status (the events client's EventService read and subscriptions)."""
    sock = connect(target, deadline, what)
    try:
        return _exchange(sock, request, deadline, what, max_body, reused=False)[0]
    finally:
        _close(sock)


def header_bytes(headers: Any) -> bytes:
    """``Name: value`` lines; a value that could end the header (CR, LF,
    NUL) is refused, as ``http.client`` refuses it (without echoing it)."""
    out = []
    for name, value in headers:
        text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        if any(c in text or c in name for c in _ILLEGAL) or ":" in name:
            raise ValueError(f"invalid value for header {name!r}")
        out.append(f"{name}: {text}\r\n")
    return "".join(out).encode("latin-1")


def request_bytes(
    method: str, target: Target, path: str, headers: dict[str, str], body: bytes | None = None
) -> bytes:
    """A whole HTTP/1.1 request: ``path`` (with its query) on ``target``,
    ``headers``, and ``body`` (its ``Content-Length`` added)."""
    if any(c in path for c in (*_ILLEGAL, " ")) or not path.startswith("/"):
        raise ValueError("the resource path is not a valid request target")
    fields = dict(headers)
    if body is not None:
        fields["Content-Length"] = str(len(body))
    line = f"{method} {path} HTTP/1.1\r\nHost: {target.authority}\r\n".encode("latin-1")
    return line + header_bytes(fields.items()) + b"\r\n" + (body or b"")


def _open(host: str, port: int, deadline: Deadline, what: str) -> socket.socket:
    """A TCP connection to the first address of ``host`` that takes one, each
    try bounded by what is left (``socket.create_connection`` would give
    every address the whole timeout). The name lookup itself is not bounded,
    as it is not through urllib3."""
    error: OSError = ConnectionRefusedError("no address")
    for family, kind, proto, _, address in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(left(deadline, what))
            sock.connect(address)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    raise error


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()


def _exchange(
    sock: socket.socket,
    request: bytes,
    deadline: Deadline,
    what: str,
    max_body: int,
    *,
    reused: bool,
) -> tuple[Answer, bool]:
    """One GET on ``sock``: the answer, and whether the socket may be kept."""
    try:
        sock.settimeout(left(deadline, what))
        sock.sendall(request)
    except (BrokenPipeError, ConnectionResetError) as exc:
        if reused:
            raise StaleConnection(what) from exc
        raise
    except TimeoutError as exc:
        if deadline.expired:
            raise DeadlineExceeded(f"{what} was not sent by the deadline") from exc
        raise
    reader = Reader(sock, deadline, what)
    try:
        status, reason, version, headers = read_head(reader)
        while 100 <= status < 200 and status != 101:  # interim answers: the real one follows
            status, reason, version, headers = read_head(reader)
    except (http.client.RemoteDisconnected, ConnectionResetError) as exc:
        if reused and reader.received == 0:
            raise StaleConnection(what) from exc
        raise
    body, framed = read_body(reader, status, headers, what, max_body)
    connection = headers.get("connection", "").lower()
    # HTTP/1.1 keeps a connection unless told not to; HTTP/1.0 only if told to
    keep = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
    return Answer(status, reason, headers, body), keep and framed and not reader.buf
