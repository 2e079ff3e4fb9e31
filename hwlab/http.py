"""Just enough HTTP/1.1 for hwlab, on asyncio streams: the Redfish emulators,
the Redfish fault proxy and the control API all read and write through here.

Why not werkzeug's or http.server's: they run a thread per port (and per
connection), and a lab serves thousands of BMCs from one process. Here one
event loop reads requests from every port; a request that must hang, wait or
trickle costs a suspended coroutine, not a thread. Bodies are read whole:
Redfish payloads are small JSON documents, and a proxy that must corrupt or
replace a body needs all of it anyway.

Also here: :func:`redfish_error`, the one builder of Redfish error answers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import http
import io
import json
import sys
import urllib.parse
from collections.abc import Callable
from typing import Any

__all__ = [
    "MAX_BODY",
    "MAX_HEAD",
    "HttpError",
    "Request",
    "Response",
    "environ",
    "error_body",
    "read_request",
    "read_response",
    "redfish_error",
    "write_response",
]

#: the largest request/response head and body read (the limit is named in the 4xx)
MAX_HEAD = 64 * 1024
MAX_BODY = 16 * 1024 * 1024
#: headers that describe one connection, never forwarded (RFC 9110 7.6.1)
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)
#: status code -> its reason phrase (RFC 9110)
_REASONS = {status.value: status.phrase for status in http.HTTPStatus}


class HttpError(ValueError):
    """A message we cannot read: a server answers ``status`` and closes."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    name = name.lower()
    return next((v for k, v in headers if k.lower() == name), None)


def _index(headers: list[tuple[str, str]]) -> dict[str, str]:
    """Headers by lower-case name, the first of each name winning (as :func:`_header`)."""
    index: dict[str, str] = {}
    for key, value in headers:
        index.setdefault(key.lower(), value)
    return index


@dataclasses.dataclass
class Request:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes = b""
    #: ``headers`` by lower-case name, made on the first lookup: a lab BMC
    #: asks each request for several headers (``headers`` is not changed
    #: after a request is read)
    _by_name: dict[str, str] | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def header(self, name: str, default: str | None = None) -> str | None:
        by_name = self._by_name
        if by_name is None:
            by_name = self._by_name = _index(self.headers)
        return by_name.get(name.lower(), default)

    @property
    def keep_alive(self) -> bool:
        tokens = {t.strip().lower() for t in (self.header("connection") or "").split(",")}
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens

    def encode(self, host: str) -> bytes:
        """The request as relayed: Host rewritten, hop-by-hop headers
        dropped, the body framed by Content-Length."""
        lines = [f"{self.method} {self.target} HTTP/1.1", f"Host: {host}"]
        for key, value in self.headers:
            if key.lower() not in HOP_BY_HOP | {"host"}:
                lines.append(f"{key}: {value}")
        if self.body or self.method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(self.body)}")
        lines.append("Connection: keep-alive")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


@dataclasses.dataclass
class Response:
    status: int
    headers: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    body: bytes = b""
    reason: str = ""
    #: the peer will close this connection after the response
    closes: bool = False

    def header(self, name: str) -> str | None:
        return _header(self.headers, name)

    def encode(self, *, keep_alive: bool) -> bytes:
        reason = self.reason or _REASONS.get(self.status, "Unknown")
        lines = [f"HTTP/1.1 {self.status} {reason}"]
        lines += [f"{k}: {v}" for k, v in self.headers if k.lower() not in HOP_BY_HOP]
        lines.append(f"Content-Length: {len(self.body)}")
        lines.append("Connection: " + ("keep-alive" if keep_alive else "close"))
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


async def write_response(
    writer: asyncio.StreamWriter, response: Response, *, keep_alive: bool
) -> None:
    writer.write(response.encode(keep_alive=keep_alive))
    await writer.drain()


async def _head(reader: asyncio.StreamReader) -> list[str] | None:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None  # the peer closed between messages: normal
        raise HttpError("connection closed inside a message head") from None
    except asyncio.LimitOverrunError:
        raise HttpError(f"message head larger than {MAX_HEAD} bytes", 431) from None
    if len(raw) > MAX_HEAD:
        raise HttpError(f"message head larger than {MAX_HEAD} bytes", 431)
    return raw.decode("latin-1").split("\r\n")[:-2]


def _headers(lines: list[str]) -> list[tuple[str, str]]:
    headers = []
    for line in lines:
        key, sep, value = line.partition(":")
        if not sep or not key or key != key.strip():
            raise HttpError(f"bad header line {line[:60]!r}")
        headers.append((key, value.strip()))
    return headers


async def _body(
    reader: asyncio.StreamReader,
    header: Callable[[str], str | None],
    *,
    until_close: bool,
    limit: int,
) -> bytes:
    too_large = HttpError(f"body larger than {limit} bytes", 413)
    if "chunked" in (header("transfer-encoding") or "").lower():
        chunks: list[bytes] = []
        total = 0
        while True:
            size_line = await reader.readuntil(b"\r\n")
            try:
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
            except ValueError:
                raise HttpError("bad chunk size") from None
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass  # trailers: dropped
                return b"".join(chunks)
            total += size
            if total > limit:
                raise too_large
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
    length_text = header("content-length")
    if length_text is not None:
        if not length_text.strip().isdigit():
            raise HttpError(f"bad Content-Length {length_text[:20]!r}")
        length = int(length_text)
        if length > limit:
            raise too_large
        return await reader.readexactly(length) if length else b""
    if until_close:
        return await reader.read(limit)
    return b""


async def read_request(reader: asyncio.StreamReader, *, max_body: int = MAX_BODY) -> Request | None:
    """The next request on a connection; ``None`` once the client closed."""
    lines = await _head(reader)
    if lines is None:
        return None
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise HttpError(f"bad request line {lines[0][:80]!r}")
    if not parts[2].startswith("HTTP/1."):
        raise HttpError("only HTTP/1.x is served", 505)
    request = Request(parts[0].upper(), parts[1], parts[2], _headers(lines[1:]))
    request.body = await _body(reader, request.header, until_close=False, limit=max_body)
    return request


async def read_response(reader: asyncio.StreamReader, method: str) -> Response:
    lines = await _head(reader)
    if lines is None:
        raise HttpError("the upstream closed the connection without answering")
    version, _, rest = lines[0].partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise HttpError(f"bad status line {lines[0][:80]!r}")
    status = int(code)
    headers = _headers(lines[1:])
    header = _index(headers).get
    connection = (header("connection") or "").lower()
    closes = "close" in connection or (version == "HTTP/1.0" and "keep-alive" not in connection)
    no_body = method == "HEAD" or status in (204, 304) or 100 <= status < 200
    body = b"" if no_body else await _body(reader, header, until_close=True, limit=MAX_BODY)
    return Response(status, headers, body, reason, closes)


def environ(
    request: Request, *, server: tuple[str, int], scheme: str, peer: Any = None
) -> dict[str, Any]:
    """The WSGI environ (PEP 3333) for ``request``."""
    path, _, query = request.target.partition("?")
    env: dict[str, Any] = {
        "REQUEST_METHOD": request.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": urllib.parse.unquote_to_bytes(path).decode("latin-1"),
        "QUERY_STRING": query,
        "SERVER_NAME": server[0],
        "SERVER_PORT": str(server[1]),
        "SERVER_PROTOCOL": request.version,
        "REMOTE_ADDR": peer[0] if isinstance(peer, tuple) else "",
        "CONTENT_LENGTH": str(len(request.body)),
        "CONTENT_TYPE": request.header("content-type", ""),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scheme,
        "wsgi.input": io.BytesIO(request.body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    for name, value in request.headers:
        key = name.upper().replace("-", "_")
        if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            env[f"HTTP_{key}"] = f"{env[f'HTTP_{key}']}, {value}" if f"HTTP_{key}" in env else value
    return env


def error_body(message_id: str, message: str, *, severity: str = "Critical") -> dict[str, Any]:
    """A Redfish error payload (DSP0266 9.6): ``error.code``, ``error.message``
    and one ``@Message.ExtendedInfo`` entry naming ``message_id``."""
    return {
        "error": {
            "code": message_id,
            "message": message,
            "@Message.ExtendedInfo": [
                {
                    "@odata.type": "#Message.v1_1_1.Message",
                    "MessageId": message_id,
                    "Message": message,
                    "Severity": severity,
                    "Resolution": "Retry the operation; if the problem persists, "
                    "contact the BMC's vendor.",
                }
            ],
        }
    }


def redfish_error(
    status: int,
    message_id: str,
    message: str,
    *,
    headers: list[tuple[str, str]] | None = None,
) -> Response:
    """An error answer shaped like a Redfish service's."""
    data = json.dumps(error_body(message_id, message)).encode()
    all_headers = [("Content-Type", "application/json"), ("OData-Version", "4.0")]
    return Response(status, [*all_headers, *(headers or [])], data)
