"""HTTP/1.1 answers framed by hand, for the lean read (:mod:`bmaas.drivers.redfish.wire`).

The status line and headers are split without :mod:`email.parser` (which is
most of ``http.client``'s cost on a 300-byte answer), the body is framed by
``Content-Length``, chunked transfer coding or the end of the stream, and
every receive is bounded by what is left of the exchange's deadline. The
body cap is applied as the bytes arrive. Errors are those ``http.client``
raises for the same faults, so :mod:`bmaas.drivers.redfish.faults` maps them as
it maps urllib3's.

:func:`loads_bounded` is the one way bytes a peer sent become JSON here: the
size and nesting depth are checked before :func:`json.loads` sees them (a
200,000-deep ``[[[`` raises ``RecursionError`` inside ``json.loads``, which
no ``except ValueError`` catches).
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
from typing import Any

from bmaas.deadline import Deadline
from bmaas.drivers.redfish.faults import BodyTooLarge, DeadlineExceeded, MalformedBody

__all__ = [
    "MAX_DEPTH",
    "MAX_HEAD",
    "MAX_LINE",
    "RECV",
    "Reader",
    "left",
    "loads_bounded",
    "read_body",
    "read_head",
]

#: bytes asked of the socket per receive
RECV = 64 * 1024
#: a status line and headers larger than this are not a BMC's answer
MAX_HEAD = 64 * 1024
_NO_BODY = frozenset({204, 304})
#: where the head ends (CRLF lines; bare LF tolerated, as http.client does)
_HEAD_END = re.compile(rb"\r?\n\r?\n")
#: a chunk-size or trailer line longer than this is not HTTP
MAX_LINE = 8 * 1024
#: the deepest JSON taken from a peer (a Redfish Event is 4 levels deep; OEM
#: sections add a few; Python's json recurses once per level)
MAX_DEPTH = 64
#: what counts for the depth: a whole string (its brackets are text), an
#: opening or closing bracket, or a quote that opens a string never closed
_JSON_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]|[\]}]|"')


def left(deadline: Deadline, what: str) -> float:
    left = deadline.left()
    if left <= 0:
        raise DeadlineExceeded(f"{what} was not over by the deadline")
    return left


class Reader:
    """Bytes from one socket, each receive bounded by what is left of the deadline."""

    def __init__(self, sock: socket.socket, deadline: Deadline, what: str) -> None:
        self.sock = sock
        self.deadline = deadline
        self.what = what
        self.buf = bytearray()
        #: bytes received in all (0: the server sent nothing at all)
        self.received = 0

    def fill(self) -> bool:
        """Receive more; False at the end of the stream."""
        self.sock.settimeout(left(self.deadline, self.what))
        try:
            data = self.sock.recv(RECV)
        except TimeoutError as exc:
            if self.deadline.expired:
                raise DeadlineExceeded(f"{self.what} was not over by the deadline") from exc
            raise
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            data = b""  # the TLS stream's end, clean or not: framing decides
        if not data:
            return False
        self.received += len(data)
        self.buf += data
        return True

    def head(self) -> bytes:
        """The status line and headers, up to the empty line (consumed with it)."""
        while True:
            end = _HEAD_END.search(self.buf)
            if end is not None:
                out = bytes(self.buf[: end.start()])
                del self.buf[: end.end()]
                return out
            self._more(MAX_HEAD)

    def line(self) -> bytes:
        """One CRLF-ended line (a chunk size, a trailer)."""
        while True:
            at = self.buf.find(b"\r\n")
            if at >= 0:
                out = bytes(self.buf[:at])
                del self.buf[: at + 2]
                return out
            self._more(MAX_LINE)

    def exactly(self, size: int) -> bytes:
        while len(self.buf) < size:
            if not self.fill():
                raise http.client.IncompleteRead(bytes(self.buf), size - len(self.buf))
        out = bytes(self.buf[:size])
        del self.buf[:size]
        return out

    def _more(self, limit: int) -> None:
        if len(self.buf) > limit:
            raise http.client.LineTooLong(f"{self.what}: answer head or chunk line")
        if not self.fill():
            if self.received == 0:
                raise http.client.RemoteDisconnected(f"{self.what}: closed without an answer")
            raise http.client.IncompleteRead(bytes(self.buf))


def loads_bounded(data: bytes, *, limit: int, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads(data)`` for bytes a peer sent: ``ValueError`` (never
    ``RecursionError``) when ``data`` is over ``limit`` bytes, nested deeper
    than ``max_depth`` (both :class:`~bmaas.drivers.redfish.faults.MalformedBody`),
    or not JSON (``json.JSONDecodeError``). The depth is counted by one linear scan
    (regular expressions over whole strings, no recursion) before parsing."""
    if len(data) > limit:
        raise MalformedBody(f"a {len(data)}-byte document is over the {limit}-byte cap")
    if data.count(b"[") + data.count(b"{") <= max_depth:
        # it cannot nest deeper, strings' brackets counted or not: json.loads
        # alone (an event's scan in Python cost more than its parse in C)
        return json.loads(data)
    depth = 0
    for token in _JSON_TOKEN.finditer(data):
        kind = token.group()
        if kind in (b"[", b"{"):
            depth += 1
            if depth > max_depth:
                raise MalformedBody(f"JSON nested deeper than {max_depth} levels")
        elif kind in (b"]", b"}"):
            depth -= 1
        elif len(kind) == 1:  # a lone quote: a string never closed
            raise MalformedBody("JSON with an unterminated string")
    try:
        return json.loads(data)
    except RecursionError:  # not reached below MAX_DEPTH; kept a ValueError all the same
        raise MalformedBody("JSON nested too deeply") from None


def read_head(reader: Reader) -> tuple[int, str, str, dict[str, str]]:
    """Status line and headers (obsolete line folding joined, as http.client does)."""
    raw = reader.head().decode("iso-8859-1")
    lines = raw.split("\n")
    version, _, rest = lines[0].rstrip("\r").partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/") or len(code) != 3 or not code.isdigit():
        raise http.client.BadStatusLine(lines[0][:80])
    headers: dict[str, str] = {}
    name = ""
    for line in lines[1:]:
        line = line.rstrip("\r")
        if line[:1] in (" ", "\t") and name:  # obs-fold: continues the previous value
            headers[name] = f"{headers[name]} {line.strip()}"
            continue
        key, sep, value = line.partition(":")
        if not sep or not key or key != key.strip():
            raise http.client.HTTPException(f"{reader.what}: malformed header line")
        name = key.lower()
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return int(code), reason.strip(), version, headers


def read_body(
    reader: Reader, status: int, headers: dict[str, str], what: str, limit: int
) -> tuple[bytes, bool]:
    """The body, and whether it was framed (so the connection may go on)."""
    if status in _NO_BODY:
        return b"", True
    if 100 <= status < 200:  # 101: the connection now speaks something else
        return b"", False
    coding = headers.get("transfer-encoding")
    if coding is not None:
        if coding.lower().rsplit(",", 1)[-1].strip() != "chunked":
            return _to_close(reader, what, limit), False
        return _chunked(reader, what, limit), True
    length = headers.get("content-length")
    if length is None:
        return _to_close(reader, what, limit), False
    sizes = {v.strip() for v in length.split(",")}
    size = next(iter(sizes))
    if len(sizes) != 1 or not size.isdigit():
        raise http.client.HTTPException(f"{what}: bad Content-Length")
    if int(size) > limit:
        raise BodyTooLarge(f"{what}: a {int(size)}-byte body is over the {limit}-byte cap")
    return reader.exactly(int(size)), True


def _to_close(reader: Reader, what: str, limit: int) -> bytes:
    while reader.fill():
        if len(reader.buf) > limit:
            raise BodyTooLarge(f"{what}: the body passed the {limit}-byte cap")
    body = bytes(reader.buf)
    reader.buf.clear()
    return body


def _chunked(reader: Reader, what: str, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        line = reader.line().split(b";", 1)[0].strip()
        try:
            chunk = int(line, 16)
        except ValueError:
            raise http.client.HTTPException(f"{what}: bad chunk size") from None
        if chunk == 0:
            break
        size += chunk
        if size > limit:
            raise BodyTooLarge(f"{what}: the body passed the {limit}-byte cap")
        parts.append(reader.exactly(chunk))
        if reader.exactly(2) != b"\r\n":
            raise http.client.HTTPException(f"{what}: chunk not followed by CRLF")
    while reader.line():  # trailers, up to the empty line
        pass
    return b"".join(parts)
