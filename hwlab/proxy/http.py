"""Just enough HTTP/1.1 for a Redfish proxy: read a request or a response
from an asyncio stream (Content-Length, chunked, or until close), write one
back, and build Redfish-style error answers.

Bodies are read whole: Redfish payloads are small JSON documents, and a
proxy that must corrupt or replace a body needs all of it anyway.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

__all__ = ["HTTPError", "Request", "Response", "read_request", "read_response", "redfish_error"]

MAX_HEADER = 64 * 1024
MAX_BODY = 16 * 1024 * 1024
#: headers that describe one connection, never forwarded (RFC 9110 7.6.1)
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}
REASONS = {
    200: "OK",
    201: "Created",
    204: "No Content",
    401: "Unauthorized",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


class HTTPError(ValueError):
    """A message that is not HTTP/1.x as we can relay it."""


@dataclasses.dataclass
class Request:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    @property
    def keep_alive(self) -> bool:
        conn = (self.header("connection") or "").lower()
        return "close" not in conn and (self.version == "HTTP/1.1" or "keep-alive" in conn)

    def encode(self, host: str) -> bytes:
        """The request as sent upstream: Host rewritten, hop-by-hop headers
        dropped, the body framed by Content-Length."""
        lines = [f"{self.method} {self.target} HTTP/1.1", f"Host: {host}"]
        for key, value in self.headers:
            if key.lower() not in HOP_BY_HOP | {"host", "content-length"}:
                lines.append(f"{key}: {value}")
        if self.body or self.method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(self.body)}")
        lines.append("Connection: keep-alive")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


@dataclasses.dataclass
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    reason: str = ""
    #: the upstream will close this connection after the response
    closes: bool = False

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def encode(self, *, keep_alive: bool) -> bytes:
        reason = self.reason or REASONS.get(self.status, "")
        lines = [f"HTTP/1.1 {self.status} {reason}"]
        for key, value in self.headers:
            if key.lower() not in HOP_BY_HOP | {"content-length"}:
                lines.append(f"{key}: {value}")
        lines.append(f"Content-Length: {len(self.body)}")
        lines.append("Connection: " + ("keep-alive" if keep_alive else "close"))
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


async def _head(reader: asyncio.StreamReader) -> list[str] | None:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None  # the peer closed between messages: normal
        raise HTTPError("connection closed inside a message head") from None
    except asyncio.LimitOverrunError:
        raise HTTPError("message head too large") from None
    if len(raw) > MAX_HEADER:
        raise HTTPError("message head too large")
    return raw.decode("latin-1").split("\r\n")[:-2]


def _headers(lines: list[str]) -> list[tuple[str, str]]:
    headers = []
    for line in lines:
        key, sep, value = line.partition(":")
        if not sep or not key or key != key.strip():
            raise HTTPError(f"bad header line {line[:60]!r}")
        headers.append((key, value.strip()))
    return headers


async def _body(
    reader: asyncio.StreamReader, headers: list[tuple[str, str]], *, until_close: bool
) -> bytes:
    values = {k.lower(): v for k, v in headers}
    if "chunked" in values.get("transfer-encoding", "").lower():
        chunks = []
        total = 0
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass  # trailers: dropped
                return b"".join(chunks)
            total += size
            if total > MAX_BODY:
                raise HTTPError("body too large")
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
    if "content-length" in values:
        length = int(values["content-length"])
        if not 0 <= length <= MAX_BODY:
            raise HTTPError("bad Content-Length")
        return await reader.readexactly(length)
    if until_close:
        return await reader.read(MAX_BODY)
    return b""


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request on a client connection; ``None`` once the client closed."""
    lines = await _head(reader)
    if lines is None:
        return None
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HTTPError(f"bad request line {lines[0][:80]!r}")
    headers = _headers(lines[1:])
    body = await _body(reader, headers, until_close=False)
    return Request(parts[0], parts[1], parts[2], headers, body)


async def read_response(reader: asyncio.StreamReader, method: str) -> Response:
    lines = await _head(reader)
    if lines is None:
        raise HTTPError("the upstream closed the connection without answering")
    version, _, rest = lines[0].partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise HTTPError(f"bad status line {lines[0][:80]!r}")
    status = int(code)
    headers = _headers(lines[1:])
    connection = next((v for k, v in headers if k.lower() == "connection"), "").lower()
    closes = "close" in connection or (version == "HTTP/1.0" and "keep-alive" not in connection)
    no_body = method == "HEAD" or status in (204, 304) or 100 <= status < 200
    body = b"" if no_body else await _body(reader, headers, until_close=True)
    return Response(status, headers, body, reason, closes)


def redfish_error(
    status: int,
    message_id: str,
    message: str,
    *,
    headers: list[tuple[str, str]] | None = None,
) -> Response:
    """An error answer shaped like a Redfish service's (DSP0266 9.6):
    ``error.code``, ``error.message`` and one ``@Message.ExtendedInfo`` entry."""
    body: dict[str, Any] = {
        "error": {
            "code": message_id,
            "message": message,
            "@Message.ExtendedInfo": [
                {
                    "@odata.type": "#Message.v1_1_1.Message",
                    "MessageId": message_id,
                    "Message": message,
                    "Severity": "Critical",
                    "Resolution": "Retry the operation; if the problem persists, "
                    "contact the BMC's vendor.",
                }
            ],
        }
    }
    data = json.dumps(body, indent=2).encode()
    all_headers = [("Content-Type", "application/json"), *(headers or [])]
    return Response(status, all_headers, data)
