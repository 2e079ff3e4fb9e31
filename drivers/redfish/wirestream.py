"""An answer read as it arrives: the event stream's side of :mod:`bmaas.drivers.redfish.wire`.

:func:`open_stream` connects (:func:`~bmaas.drivers.redfish.wire.connect`:
TLS under the target's policy), sends the request and reads the status
line and headers, every step bounded by what is left of the *open's*
deadline: a service that dribbles its head ends at the deadline with
:class:`~bmaas.drivers.redfish.faults.DeadlineExceeded`, never later. The
:class:`Stream` it hands back then yields the body as it arrives, without
waiting (:meth:`Stream.read_now`, when a selector says its socket is
readable: the reactor keeps the idle limit), framed by the end of the stream,
``Content-Length`` or chunked transfer coding (decoded incrementally: a
chunk-size line of at most :data:`~bmaas.drivers.redfish.framing.MAX_LINE`
bytes, the data, CRLF). Bytes the head's read already took are the body's
first. :meth:`Stream.close` shuts the socket down, then closes it.

Failures are those of :mod:`~bmaas.drivers.redfish.wire` (the stdlib's socket
and TLS errors, ``http.client``'s for a reply that is not HTTP); a stream
cut inside a framed body is
``http.client.IncompleteRead``.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl

from bmaas.deadline import Deadline
from bmaas.drivers.redfish.faults import DeadlineExceeded
from bmaas.drivers.redfish.framing import MAX_LINE, RECV, Reader, left, read_body, read_head
from bmaas.drivers.redfish.wire import Answer, Target, connect

__all__ = ["KEEPALIVE", "Stream", "open_stream"]

#: TCP keepalive on a stream: first probe after 30 s idle, then every 10 s, 3 lost: dead
KEEPALIVE = (30, 10, 3)


def open_stream(target: Target, request: bytes, deadline: Deadline, *, what: str) -> Stream:
    """Send ``request`` on a new connection and read the answer's head by
    ``deadline``; the body is the :class:`Stream`'s to read (or
    :meth:`Stream.whole`, for an error answer)."""
    sock = connect(target, deadline, what)
    try:
        _keepalive(sock)
        sock.settimeout(left(deadline, what))
        try:
            sock.sendall(request)
        except TimeoutError as exc:
            if deadline.expired:
                raise DeadlineExceeded(f"{what} was not sent by the deadline") from exc
            raise
        reader = Reader(sock, deadline, what)
        status, reason, _, headers = read_head(reader)
        while 100 <= status < 200 and status != 101:  # interim answers: the real one follows
            status, reason, _, headers = read_head(reader)
    except BaseException:
        _shut(sock)
        raise
    return Stream(sock, reader, status, reason, headers)


class Stream:
    """An answer whose head is read and whose body is read as it arrives."""

    def __init__(
        self, sock: socket.socket, reader: Reader, status: int, reason: str, headers: dict[str, str]
    ) -> None:
        self.status, self.reason, self.headers = status, reason, headers
        self._sock = sock
        #: the head's reader (its deadline, the bytes it took past the head)
        self._reader = reader
        self._raw = bytes(reader.buf)
        self._chunked: _Chunked | None = None
        #: body bytes still to come when framed by Content-Length (None: to the close)
        self._left: int | None = None
        self._done = status in (204, 304)
        coding = headers.get("transfer-encoding", "").lower().rsplit(",", 1)[-1].strip()
        length = headers.get("content-length", "").strip()
        if coding == "chunked":
            self._chunked = _Chunked(reader.what)
        elif not coding and length.isdigit():
            self._left = int(length)
            self._done = self._done or self._left == 0

    def __repr__(self) -> str:
        return f"Stream(HTTP {self.status})"

    def whole(self, limit: int) -> Answer:
        """The rest of the answer as one :class:`~bmaas.drivers.redfish.wire.Answer`
        (an error answer's body), read by the open's deadline; the stream is
        closed after."""
        try:
            body, _ = read_body(self._reader, self.status, self.headers, self._reader.what, limit)
        finally:
            self.close()
        return Answer(self.status, self.reason, self.headers, body)

    def fileno(self) -> int:
        """The connection's socket (a selector waits on it: :meth:`read_now`)."""
        return self._sock.fileno()

    def read_now(self) -> bytes | None:
        """Body bytes that have arrived, without waiting (the socket is made
        non-blocking: a selector said it is readable); None when none have
        (a partial TLS record, a chunk's head alone); ``b""`` at the body's
        end. A TLS connection's decrypted bytes a selector cannot see
        (``pending()``) are read here too, up to the end of the record."""
        out = self._take()
        if out or self._done:
            return out
        data = self._recv_now()
        if data is None:
            return None
        if not data:
            if self._left is not None or self._chunked is not None:
                raise http.client.IncompleteRead(b"")  # cut inside a framed body
            self._done = True
            return b""
        self._raw += data
        out = self._take()
        return out if out or self._done else None

    def close(self) -> None:
        """Close the connection."""
        _shut(self._sock)

    def _recv_now(self) -> bytes | None:
        self._sock.setblocking(False)
        got = b""
        try:
            while True:
                data = self._sock.recv(RECV)
                if not data:
                    return got  # the end (after what came with it: the next read says so)
                got += data
                pending = getattr(self._sock, "pending", None)
                if pending is None or not pending():
                    return got
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return got or None
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            return got  # the TLS stream's end, clean or not: framing decides

    def _take(self) -> bytes:
        raw, self._raw = self._raw, b""
        if self._chunked is not None:
            out = self._chunked.feed(raw)
            self._done = self._chunked.done
            return out
        if self._left is not None:
            out = raw[: self._left]  # bytes past the body are not the stream's
            self._left -= len(out)
            self._done = self._left == 0
            return out
        return raw


class _Chunked:
    """Chunked transfer coding, decoded as bytes arrive."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.done = False
        self._buf = bytearray()
        #: "size" (a chunk-size line), "data", "crlf" (after data), "trailer"
        self._state = "size"
        self._left = 0

    def feed(self, data: bytes) -> bytes:
        self._buf += data
        out = bytearray()
        while not self.done and self._step(out):
            pass
        return bytes(out)

    def _step(self, out: bytearray) -> bool:
        """One piece of the coding, if it has arrived whole (False: wait for more)."""
        if self._state == "data":
            if not self._buf:
                return False
            piece = self._buf[: self._left]
            out += piece
            del self._buf[: len(piece)]
            self._left -= len(piece)
            self._state = "data" if self._left else "crlf"
            return True
        if self._state == "crlf":
            if len(self._buf) < 2:
                return False
            if self._buf[:2] != b"\r\n":
                raise http.client.HTTPException(f"{self.what}: chunk not followed by CRLF")
            del self._buf[:2]
            self._state = "size"
            return True
        line = self._line()
        if line is None:
            return False
        if self._state == "trailer":
            self.done = not line  # trailers, up to the empty line
            return True
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise http.client.HTTPException(f"{self.what}: bad chunk size") from None
        self._state, self._left = ("data", size) if size else ("trailer", 0)
        return True

    def _line(self) -> bytes | None:
        at = self._buf.find(b"\r\n", 0, MAX_LINE + 2)
        if at < 0:
            if len(self._buf) > MAX_LINE:
                raise http.client.LineTooLong(f"{self.what}: chunk line")
            return None
        line = bytes(self._buf[:at])
        del self._buf[: at + 2]
        return line


def _keepalive(sock: socket.socket) -> None:
    """TCP keepalive on the stream: a BMC that vanished (power cut, cable)
    is noticed by the kernel within ~60 s at no cost to this process, so the
    read's own idle limit can be long (a quiet BMC sends nothing for
    minutes, and many send no SSE keepalive)."""
    idle, interval, count = KEEPALIVE
    with contextlib.suppress(OSError, AttributeError):  # not every platform has them
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, interval)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, count)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)  # wakes a read blocked in another thread
    with contextlib.suppress(OSError):
        sock.close()
