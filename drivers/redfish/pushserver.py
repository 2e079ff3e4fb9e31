"""The push listener's HTTP server: one thread, one selector, every peer bounded.

Anyone who can reach the listener's port may connect, and nothing a peer
sends is trusted until its Event carries a ``Context`` of ours. So the
server costs an unauthenticated peer little and lets no peer stop the rest
(issue 46, findings 3 and 4):

* **One thread, no thread per connection**: every socket non-blocking in
  one selector; idle connections cost no thread.
* **TLS off the accept path**: the handshake is driven by the selector like
  any read, so a peer that never finishes one delays nobody.
* **One deadline a connection** (:attr:`Limits.timeout`): handshake, head
  and body together, so a dribbling peer is cut like a silent one.
* **Caps** (:class:`Limits`): past the connection cap the oldest connection
  not yet answered is closed (a delivery takes milliseconds); per peer, a
  cap at once and a rate of new ones, past which it is closed unread.
* **Strict framing**: one request a connection, the body's size decided
  from the head.
* **No traceback, ever**: each refusal counted by class
  (:attr:`Server.refusals`) and logged at most once a window
  (:class:`RefusalLog`); an exception closes that connection only.

The numbers and status codes: docs/operator.md (the push listener's
"Limits").

What the body means (its ``Context``, then the Event) is the caller's
``answer``: bytes in, an HTTP status out (:meth:`PushListener.deliver
<bmaas.drivers.redfish.push.PushListener.deliver>`).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import errno
import logging
import selectors
import socket
import ssl
import time
from collections.abc import Callable
from http import HTTPStatus

from bmaas.events import TokenBucket
from bmaas.ratelog import RateLog

__all__ = ["KINDS", "Limits", "RefusalLog", "Server"]

LOG = logging.getLogger("bmaas.drivers.redfish.push")

#: refusal classes: what each logged line says was refused
KINDS: dict[str, str] = {
    "context": "Events without a Context of ours (403)",
    "body": "bodies that are not a JSON Event (400)",
    "framing": "malformed requests: head, Content-Length or Transfer-Encoding (400/411/431)",
    "too_large": "bodies over the size cap (413)",
    "path": "requests for another path or method (404/405)",
    "timeout": "connections not over within the exchange timeout",
    "tls": "failed TLS handshakes",
    "busy": "connections closed at the connection cap",
    "peer_busy": "connections past their peer's concurrent limit",
    "rate": "connections past their peer's rate",
    "error": "requests that met an internal error (500)",
}
#: the classes that count as a refused request (``PushListener.refused``)
REQUESTS = frozenset({"context", "body", "framing", "too_large"})


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one listener gives its peers (documented in docs/operator.md)."""

    #: seconds a connection has for its TLS handshake, head and body together
    timeout: float = 10.0
    #: connections open at once
    max_connections: int = 64
    #: connections open at once from one source address
    per_peer: int = 8
    #: new connections a second from one source address, and the burst
    peer_rate: float = 20.0
    peer_burst: float = 100.0
    #: the largest body read
    max_body: int = 1024 * 1024
    #: the largest request line and headers
    max_head: int = 16 * 1024
    #: source addresses remembered for their rate (those with no open
    #: connection are forgotten past it: memory stays bounded)
    max_peers: int = 4096


class RefusalLog:
    """Counts refusals by class (:data:`KINDS`) and logs them through
    :class:`bmaas.ratelog.RateLog`: one line per class per
    :data:`bmaas.ratelog.INTERVAL` (10 s) at most, the next one saying how
    many were not logged one by one; :meth:`flush` (when the server stops)
    says it for a class that went quiet. Nothing of a request is logged."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        #: refusals by class, since the start
        self.counts: collections.Counter[str] = collections.Counter()
        self._log = RateLog(LOG, "push listener refused", clock=clock)

    def __call__(self, kind: str) -> None:
        self.counts[kind] += 1
        self._log.note(kind, KINDS.get(kind, kind))

    def flush(self) -> None:
        self._log.flush()


@dataclasses.dataclass(eq=False)
class _Conn:
    sock: socket.socket
    peer: str
    deadline: float
    handshaking: bool
    buf: bytearray = dataclasses.field(default_factory=bytearray)
    #: the body's length, once the head is read
    length: int | None = None
    #: the answer being written (None: still reading)
    out: bytes | None = None


@dataclasses.dataclass(eq=False)
class _Peer:
    bucket: TokenBucket
    open: int = 0


class Server:
    """Serves ``answer`` on ``listening`` (bound and listening) until :meth:`close`;
    :meth:`serve` is the one thread."""

    def __init__(
        self,
        listening: socket.socket,
        answer: Callable[[bytes], int],
        *,
        path: str,
        tls: ssl.SSLContext | None = None,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.monotonic,
        refusals: RefusalLog | None = None,
    ) -> None:
        self._listening, self._answer, self._path, self._tls = listening, answer, path, tls
        self.limits = limits or Limits()
        self._clock = clock
        self.refusals = refusals or RefusalLog(clock=clock)
        self._selector = selectors.DefaultSelector()
        listening.setblocking(False)
        self._selector.register(listening, selectors.EVENT_READ, None)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        #: open connections, oldest first
        self._conns: dict[socket.socket, _Conn] = {}
        self._peers: dict[str, _Peer] = {}
        self._closing = False
        #: accepting is paused until then (the process is out of descriptors)
        self._paused_until: float | None = None

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    def serve(self) -> None:
        try:
            while not self._closing:
                try:
                    self._once()
                except Exception as exc:  # a bug of ours: one line, never a dead listener
                    self.refusals("error")
                    LOG.error("push listener: %s in its loop (%s)", type(exc).__name__, exc)
                    time.sleep(0.05)  # not a hot loop if it repeats
        finally:
            self._shut()

    def close(self) -> None:
        """From another thread: end :meth:`serve` at once."""
        self._closing = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # -- the loop -----------------------------------------------------------

    def _once(self) -> None:
        now = self._clock()
        timeout = None
        if self._conns:  # all have the same timeout: the oldest is due first
            timeout = max(0.0, next(iter(self._conns.values())).deadline - now)
        if self._paused_until is not None:
            if now >= self._paused_until:
                self._paused_until = None
                self._selector.register(self._listening, selectors.EVENT_READ, None)
            else:
                left = self._paused_until - now
                timeout = left if timeout is None else min(timeout, left)
        for key, _ in self._selector.select(timeout):
            if key.data is None:
                self._accept()
            elif key.data == "wake":
                with contextlib.suppress(OSError):
                    self._wake_r.recv(64)
            elif key.fileobj in self._conns:  # not closed earlier in this round
                self._step(key.data)
        now = self._clock()
        for conn in [c for c in self._conns.values() if c.deadline <= now]:
            self._drop(conn, "timeout")

    def _accept(self) -> None:
        for _ in range(self.limits.max_connections):  # then the others get a turn
            try:
                sock, address = self._listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self._selector.unregister(self._listening)
                    self._paused_until = self._clock() + 0.1
                    self.refusals("busy")
                return
            self._admit(sock, str(address[0]))

    def _admit(self, sock: socket.socket, peer: str) -> None:
        limits = self.limits
        known = self._peers.get(peer)
        if known is None:
            if len(self._peers) >= limits.max_peers:
                self._peers = {a: p for a, p in self._peers.items() if p.open}
            known = self._peers[peer] = _Peer(
                TokenBucket(limits.peer_rate, limits.peer_burst, self._clock)
            )
        refused = None
        if not known.bucket.take():
            refused = "rate"
        elif known.open >= limits.per_peer:
            refused = "peer_busy"
        elif len(self._conns) >= limits.max_connections and not self._evict_oldest():
            refused = "busy"
        if refused is not None:
            self.refusals(refused)
            sock.close()
            return
        sock.setblocking(False)
        try:
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        except (OSError, ValueError):
            sock.close()
            return
        conn = _Conn(sock, peer, self._clock() + limits.timeout, self._tls is not None)
        self._conns[sock] = conn
        known.open += 1
        self._selector.register(sock, selectors.EVENT_READ, conn)

    def _evict_oldest(self) -> bool:
        """Close the oldest connection not yet answered (at the cap)."""
        for conn in self._conns.values():
            if conn.out is None:
                self._drop(conn, "busy")
                return True
        return False

    # -- one connection -----------------------------------------------------

    def _step(self, conn: _Conn) -> None:
        try:
            if conn.handshaking:
                conn.sock.do_handshake()  # type: ignore[attr-defined]
                conn.handshaking = False
            if conn.out is None:
                self._read(conn)
            if conn.out is not None:
                self._write(conn)
        except ssl.SSLWantReadError:
            self._want(conn, selectors.EVENT_READ)
        except ssl.SSLWantWriteError:
            self._want(conn, selectors.EVENT_WRITE)
        except BlockingIOError:  # level-triggered: the selector says when there is more
            if conn.out:
                self._want(conn, selectors.EVENT_WRITE)
        except ssl.SSLError:
            self._drop(conn, "tls" if conn.handshaking else None)
        except OSError:
            self._drop(conn, None)  # the peer went away
        except Exception as exc:  # one connection's problem, never the listener's
            LOG.debug("push listener: %s on a connection", type(exc).__name__)
            self._drop(conn, "error")

    def _want(self, conn: _Conn, events: int) -> None:
        if self._selector.get_key(conn.sock).events != events:
            self._selector.modify(conn.sock, events, conn)

    def _read(self, conn: _Conn) -> None:
        while conn.out is None:
            data = conn.sock.recv(64 * 1024)
            if not data:
                self._drop(conn, None)  # the peer closed before its request was whole
                return
            conn.buf += data
            self._parse(conn)
            pending = getattr(conn.sock, "pending", None)
            if pending is None or not pending():  # no TLS record left decrypted
                return

    def _parse(self, conn: _Conn) -> None:
        if conn.length is None:
            end = conn.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(conn.buf) > self.limits.max_head:
                    self._respond(conn, 431, "framing")
                return
            if end > self.limits.max_head:
                self._respond(conn, 431, "framing")
                return
            head = bytes(conn.buf[:end])
            del conn.buf[: end + 4]
            status, kind, length, expect = self._head(head)
            if status:
                self._respond(conn, status, kind)
                return
            conn.length = length
            if expect and len(conn.buf) < length:
                # the client waits for this before its body (the old
                # http.server sent it too); a full buffer on a fresh
                # connection is not worth waiting for: it sends after its wait
                with contextlib.suppress(BlockingIOError, ssl.SSLWantWriteError):
                    conn.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        if len(conn.buf) < conn.length:
            return
        body = bytes(conn.buf[: conn.length])
        try:
            status = self._answer(body)
        except Exception as exc:  # a sink's fault: one class, one line
            LOG.debug("push listener: %s while answering", type(exc).__name__)
            status = 500
        self._respond(conn, status, {400: "body", 403: "context", 500: "error"}.get(status))

    def _head(self, head: bytes) -> tuple[int, str | None, int, bool]:
        """(status to answer at once or 0, its refusal class, the body's
        length, whether the client expects ``100 Continue``)."""
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return 400, "framing", 0, False
        method, target = parts[0], parts[1]
        lengths, coded, expect = [], False, False
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip() or line[:1] in (" ", "\t"):
                return 400, "framing", 0, False  # no obsolete line folding either
            name = name.lower()
            if name == "content-length":
                lengths.append(value.strip())
            elif name == "transfer-encoding":
                coded = True
            elif name == "expect":
                expect = value.strip().lower() == "100-continue"
        if target.partition("?")[0] != self._path:
            return 404, "path", 0, False
        if method != "POST":
            return 405, "path", 0, False
        if len(lengths) > 1 or (coded and lengths):
            return 400, "framing", 0, False  # two lengths, or two framings: which is meant?
        if not lengths:
            return 411, "framing", 0, False
        if not lengths[0].isascii() or not lengths[0].isdigit() or len(lengths[0]) > 12:
            return 400, "framing", 0, False
        length = int(lengths[0])
        if length > self.limits.max_body:
            return 413, "too_large", 0, False
        return 0, None, length, expect

    def _respond(self, conn: _Conn, status: int, kind: str | None) -> None:
        if kind is not None:
            self.refusals(kind)
        reason = HTTPStatus(status).phrase
        conn.out = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ).encode("ascii")
        conn.buf.clear()

    def _write(self, conn: _Conn) -> None:
        assert conn.out is not None
        while conn.out:
            sent = conn.sock.send(conn.out)
            conn.out = conn.out[sent:]
        self._drop(conn, None)

    def _drop(self, conn: _Conn, kind: str | None) -> None:
        if kind is not None:
            self.refusals(kind)
        if self._conns.pop(conn.sock, None) is None:
            return
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn.sock)
        conn.sock.close()
        peer = self._peers.get(conn.peer)
        if peer is not None:
            peer.open -= 1

    def _shut(self) -> None:
        for conn in list(self._conns.values()):
            self._drop(conn, None)
        self.refusals.flush()
        self._selector.close()
        for sock in (self._listening, self._wake_r, self._wake_w):
            sock.close()
