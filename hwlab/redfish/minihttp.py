"""Just enough HTTP/1.1 for emulated BMCs, on asyncio streams.

Why not werkzeug's server: it runs a thread per port (and per connection),
and a lab serves hundreds of BMCs from one process. Here one event loop reads
requests from every port; a request that must hang or wait costs a suspended
coroutine, not a thread. Requests are small JSON documents with a
Content-Length, which is all Redfish clients (sushy, curl, Ironic) send.
"""

from __future__ import annotations

import asyncio
import dataclasses
import http
import io
import sys
import urllib.parse
from typing import Any

__all__ = ["HttpError", "Request", "Response", "environ", "read_request", "write_response"]

MAX_HEAD = 64 * 1024
MAX_BODY = 1024 * 1024
# Headers the transport owns; whatever the application says about them is dropped.
_HOP_BY_HOP = {"content-length", "connection", "keep-alive", "transfer-encoding"}


class HttpError(Exception):
    """A request we cannot parse: answer ``status`` and close."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclasses.dataclass
class Request:
    method: str
    target: str
    version: str
    #: lower-cased names; repeated headers joined with ", "
    headers: dict[str, str]
    body: bytes = b""

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def keep_alive(self) -> bool:
        tokens = {t.strip().lower() for t in self.headers.get("connection", "").split(",")}
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens


@dataclasses.dataclass
class Response:
    status: int
    headers: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    body: bytes = b""

    @property
    def reason(self) -> str:
        try:
            return http.HTTPStatus(self.status).phrase
        except ValueError:
            return "Unknown"


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request on the connection; ``None`` once the client is gone."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None  # closed between requests (or mid-head: nothing to answer)
    except asyncio.LimitOverrunError:
        raise HttpError(431, "request head too large") from None
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ")
    except ValueError:
        raise HttpError(400, "malformed request line") from None
    if not version.startswith("HTTP/1."):
        raise HttpError(505, "only HTTP/1.x is served")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise HttpError(400, "malformed header line")
        key = name.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise HttpError(501, "chunked request bodies are not supported; send Content-Length")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise HttpError(400, "bad Content-Length") from None
    if length < 0 or length > MAX_BODY:
        raise HttpError(413, "request body too large")
    body = await reader.readexactly(length) if length else b""
    return Request(method.upper(), target, version, headers, body)


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
        "CONTENT_TYPE": request.headers.get("content-type", ""),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scheme,
        "wsgi.input": io.BytesIO(request.body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    for name, value in request.headers.items():
        key = name.upper().replace("-", "_")
        if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            env[f"HTTP_{key}"] = value
    return env


def encode_response(response: Response, *, keep_alive: bool) -> bytes:
    lines = [f"HTTP/1.1 {response.status} {response.reason}"]
    lines += [f"{k}: {v}" for k, v in response.headers if k.lower() not in _HOP_BY_HOP]
    lines.append(f"Content-Length: {len(response.body)}")
    lines.append(f"Connection: {'keep-alive' if keep_alive else 'close'}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body


async def write_response(
    writer: asyncio.StreamWriter, response: Response, *, keep_alive: bool
) -> None:
    writer.write(encode_response(response, keep_alive=keep_alive))
    await writer.drain()
