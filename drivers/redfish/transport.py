"""HTTP exchanges that end by a deadline, however slowly the server answers.

``requests`` (urllib3 below it) applies a read timeout to each socket
receive, not to the exchange: a BMC that dribbles its reply one byte every
0.3 s, or sends headers and stalls, holds a "1 s" call for as long as it
likes (measured: 14.5 s for a 1 s deadline). Here the whole exchange --
connect, TLS, send, status line, headers, every byte of the body -- ends by
the call's :class:`~bmaas.deadline.Deadline`:

* the deadline travels as requests' ``timeout=`` value
  (:class:`ExchangeDeadline`), from the connector down to
  :class:`DeadlineAdapter`, explicitly, through sushy and requests, which
  both pass ``timeout`` through untouched;
* each socket operation's own timeout is the time left when the exchange
  starts (so connect and TLS are bounded as before);
* the body is streamed and the deadline checked between reads;
* a shared :class:`_Watchdog` thread shuts the exchange's socket down at the
  deadline, which wakes a receive blocked on a server that sends nothing
  more (half-open, slow loris, stalled headers). The exchange then raises
  :class:`~bmaas.drivers.redfish.faults.DeadlineExceeded`, which the driver's one
  mapping turns into ``BMCTimeout``.

The body is also capped (``max_body``, from the node's
``redfish_max_body_bytes``, 16 MiB by default): a ``Content-Length`` over the
cap is refused before a byte of the body is read, and a body without one
(chunked, or read to the close) is counted as it streams and dropped the
moment it passes the cap, with :class:`~bmaas.drivers.redfish.faults.BodyTooLarge`
(``BMCProtocolError`` after the driver's mapping). Measured before the cap: a
"BMC" sending a 1 GiB body took one power read to 2.09 GiB of memory.

TLS: every HTTPS connection uses one :class:`ssl.SSLContext` made for the
node's CA setting and TLS policy (:func:`bmaas.tlspolicy.client_context`:
TLS 1.2 at least, the node's ciphers), given to urllib3 as its pools'
``ssl_context``, not urllib3's per-connection default.

One exchange is one attempt: the adapter retries nothing (``max_retries=0``),
and the connector tells sushy the same (see :mod:`bmaas.drivers.redfish.connector`).
So a kept connection is never reused once it has sat idle :data:`KEEP_IDLE`
seconds: a server closes an idle kept connection on its own clock (Ironic's
API under cheroot after 10 s, Apache after 5), and a request sent as that
close is on its way is sent and never answered -- outcome unknown, a fault
for a request nothing was wrong with (RFC 9112 section 9.3.1). Measured: a
bench's Ironic observer lost a node read so (Ironic 39, load 20). Such a
connection is closed and a new one opened instead, as httpx does (its
``keepalive_expiry``, 5 s by default). Prevention, not a resend: this engine
carries POSTs and PATCHes, which must not go twice. (The lean power read's
own wire, :mod:`bmaas.drivers.redfish.wire`, keeps sockets 90 s across
polling intervals and sends a GET once more on a socket found stale: a GET
may go twice.)
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import socket
import ssl
import threading
import time
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from bmaas import threads
from bmaas.deadline import Deadline
from bmaas.driver_info import DEFAULT_MAX_BODY_BYTES
from bmaas.drivers.redfish.descriptors import move_high
from bmaas.drivers.redfish.faults import BodyTooLarge, DeadlineExceeded, NotSent

__all__ = ["KEEP_IDLE", "DeadlineAdapter", "ExchangeDeadline"]

#: bytes read from a body between two looks at the deadline
_CHUNK = 16 * 1024
#: seconds the watchdog thread lingers with nothing to watch before it exits
_IDLE = 0.5
#: seconds a kept connection may sit idle and still carry the next request:
#: under the idle close of the servers met so far (Apache's 5 s, cheroot's
#: 10 s under Ironic's API). A server that closes sooner is raced only when
#: a reuse falls just at its close: urllib3 drops a connection whose close
#: has already arrived
KEEP_IDLE = 4.0
#: the clock idle time is read on (tests set it)
_clock = time.monotonic


class ExchangeDeadline:
    """requests' ``timeout=`` value that carries an HTTP exchange's Deadline
    to :class:`DeadlineAdapter` (any other adapter would reject it)."""

    __slots__ = ("deadline",)

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline

    def __repr__(self) -> str:
        return f"ExchangeDeadline({self.deadline!r})"


class _Exchange:
    """The sockets one exchange uses, and whether the watchdog cut them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self.cut_off = False
        self.finished = False

    def watch(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            if self.cut_off:
                _shut(sock)
            elif not self.finished:
                self._socks.append(sock)

    def cut(self) -> None:
        with self._lock:
            if self.finished:
                return
            self.cut_off = True
            for sock in self._socks:
                _shut(sock)

    def finish(self) -> None:
        with self._lock:
            self.finished = True
            self._socks.clear()


def _shut(sock: socket.socket) -> None:
    # socket.socket.shutdown, not SSLSocket.shutdown (which drops the TLS state
    # under a reader in another thread): a blocked recv() returns at once.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Watchdog:
    """One thread for every exchange in the process: cuts each one still
    running at its deadline. It exits when it has had nothing to watch for
    :data:`_IDLE` seconds, and comes back with the next exchange."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Exchange]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, exchange: _Exchange, seconds: float) -> None:
        entry = (time.monotonic() + seconds, next(self._seq), exchange)
        with self._cond:
            heapq.heappush(self._heap, entry)
            if self._thread is None:
                self._thread = threads.spawn(self._run, "bmaas-redfish-watchdog")
            elif self._heap[0] is entry:
                self._cond.notify()  # earlier than what the thread waits for

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].finished:
                    heapq.heappop(self._heap)
                if not self._heap:
                    if not self._cond.wait(_IDLE) and not self._heap:
                        self._thread = None
                        return
                    continue
                at, _, exchange = self._heap[0]
                wait = at - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                exchange.cut()


_WATCHDOG = _Watchdog()
#: the exchange the calling thread is running (set only inside DeadlineAdapter.send)
_CURRENT = threading.local()


def _watch(sock: socket.socket | None) -> None:
    exchange: _Exchange | None = getattr(_CURRENT, "exchange", None)
    if exchange is not None:
        exchange.watch(sock)


class _WatchedHTTPConnection(HTTPConnection):
    """Hands its socket to the running exchange: when created (TCP connect),
    once connected, and when reused for another request. A new socket is
    moved above ``select()``'s reach (:mod:`bmaas.drivers.redfish.descriptors`).
    Reused only within :data:`KEEP_IDLE` seconds of its last answer."""

    #: when this connection's last answer (status line and headers) came
    _answered_at: float | None = None

    def _new_conn(self) -> socket.socket:
        sock = move_high(super()._new_conn())
        _watch(sock)
        return sock

    def connect(self) -> None:
        super().connect()
        _watch(self.sock)

    def request(self, *args: Any, **kwargs: Any) -> None:
        answered = self._answered_at
        if self.sock is not None and answered is not None and _clock() - answered > KEEP_IDLE:
            # idle long enough that the server may be closing it this moment
            self.close()
            self.connect()
        _watch(self.sock)
        super().request(*args, **kwargs)

    def getresponse(self) -> Any:  # urllib3's own HTTPResponse
        response = super().getresponse()
        self._answered_at = _clock()
        return response


class _WatchedHTTPSConnection(_WatchedHTTPConnection, HTTPSConnection):
    """The same over TLS: ``connect`` watches the TLS socket that replaced
    the TCP one (HTTPSConnection's ``connect`` runs inside ours)."""


class _WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


class DeadlineAdapter(HTTPAdapter):
    """A requests transport that ends every exchange by its deadline
    (given as ``timeout=ExchangeDeadline(deadline)``), reads no body larger
    than ``max_body`` bytes, and never retries."""

    def __init__(
        self, *, max_body: int = DEFAULT_MAX_BODY_BYTES, tls: ssl.SSLContext | None = None
    ) -> None:
        #: the context every HTTPS connection uses (the node's TLS policy,
        #: :mod:`bmaas.tlspolicy`); set before requests builds the pool manager
        self.tls = tls
        super().__init__(max_retries=0)
        self.max_body = max_body

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        if self.tls is not None:
            kwargs["ssl_context"] = self.tls  # urllib3 drops it for http:// pools
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": _WatchedHTTPPool,
            "https": _WatchedHTTPSPool,
        }

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: Any = None,
        verify: bool | str = True,
        cert: Any = None,
        proxies: Any = None,
    ) -> requests.Response:
        if not isinstance(timeout, ExchangeDeadline):
            return super().send(request, stream, timeout, verify, cert, proxies)
        deadline = timeout.deadline
        what = f"{request.method} {request.path_url}"
        left = deadline.left()
        if left <= 0:
            raise NotSent(f"deadline passed before {what}")
        exchange = _Exchange()
        previous = getattr(_CURRENT, "exchange", None)
        _CURRENT.exchange = exchange
        _WATCHDOG.arm(exchange, left)
        try:
            response = super().send(request, True, (left, left), verify, cert, proxies)
            if not stream:
                _read_body(response, deadline, what, self.max_body)
        except Exception as exc:
            if exchange.cut_off or deadline.expired:
                raise DeadlineExceeded(f"{what} was not over by the deadline") from exc
            raise
        finally:
            exchange.finish()
            _CURRENT.exchange = previous
        if exchange.cut_off:
            # The cut can look like a normal end of a body without a length.
            raise DeadlineExceeded(f"{what} was not over by the deadline")
        return response


def _read_body(response: requests.Response, deadline: Deadline, what: str, limit: int) -> None:
    """Read the whole body, looking at the deadline between reads and
    keeping at most ``limit`` bytes: an announced length over it is refused
    unread, a body without one is dropped as soon as it passes it."""
    announced = response.headers.get("Content-Length", "")
    if announced.strip().isdigit() and int(announced) > limit:
        response.close()
        raise BodyTooLarge(f"{what}: a {int(announced)}-byte body is over the {limit}-byte cap")
    # One growing buffer, handed to requests as the content itself: a list
    # of chunks joined at the end held the body twice (a 1 GiB cap cost
    # 3.1 GiB with the decode after it). requests reads content as bytes-like
    # (.text, .json() decode it), which a bytearray is.
    body = bytearray()
    for chunk in response.iter_content(_CHUNK):
        if len(body) + len(chunk) > limit:
            response.close()
            raise BodyTooLarge(f"{what}: the body passed the {limit}-byte cap")
        body += chunk
        if deadline.expired:
            response.close()
            raise DeadlineExceeded(f"{what}: the body was still coming at the deadline")
    response._content = body  # type: ignore[assignment]
    response._content_consumed = True
