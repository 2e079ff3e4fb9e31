"""The Redfish proxy's HTTP handling and request routing, without sockets."""

from __future__ import annotations

import asyncio
import json

import pytest

from bmaas.hwlab.answers import GARBLED_REPLY, corrupt
from bmaas.hwlab.http import (
    HttpError,
    Request,
    Response,
    read_request,
    read_response,
    redfish_error,
)
from bmaas.hwlab.proxy.redfish import operation_for


def _reader(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


def _request(data: bytes) -> Request | None:
    async def go() -> Request | None:
        return await read_request(_reader(data))

    return asyncio.run(go())


def test_request_with_body_and_hop_by_hop_headers_is_rewritten_for_the_upstream() -> None:
    raw = (
        b"PATCH /redfish/v1/Systems/1 HTTP/1.1\r\nHost: proxy:8000\r\n"
        b"Connection: keep-alive\r\nAuthorization: Basic eA==\r\n"
        b'Content-Length: 13\r\n\r\n{"Boot": {}}\n'
    )
    request = _request(raw)
    assert request is not None
    assert request.path == "/redfish/v1/Systems/1"
    assert request.body == b'{"Boot": {}}\n'
    assert request.keep_alive
    upstream = request.encode("10.0.0.9:443").decode()
    assert upstream.startswith("PATCH /redfish/v1/Systems/1 HTTP/1.1\r\nHost: 10.0.0.9:443\r\n")
    assert "Authorization: Basic eA==" in upstream
    assert "proxy:8000" not in upstream
    assert upstream.count("Connection:") == 1
    assert "Content-Length: 13" in upstream


def test_client_closing_between_requests_is_not_an_error() -> None:
    assert _request(b"") is None
    with pytest.raises(HttpError, match="request line"):
        _request(b"GARBAGE\r\n\r\n")
    with pytest.raises(HttpError, match="closed inside"):
        _request(b"GET / HTTP/1.1\r\nHost: x\r\n")


@pytest.mark.parametrize(
    ("raw", "body", "closes"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", b"{}", False),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
            b"{}",
            False,
        ),
        (b'HTTP/1.0 200 OK\r\n\r\n{"a": 1}', b'{"a": 1}', True),
        (b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n", b"", True),
    ],
)
def test_responses_are_read_whole(raw: bytes, body: bytes, closes: bool) -> None:
    async def go() -> None:
        response = await read_response(_reader(raw), "GET")
        assert response.body == body
        assert response.closes is closes
        encoded = response.encode(keep_alive=True)
        assert b"Transfer-Encoding" not in encoded
        assert f"Content-Length: {len(body)}".encode() in encoded

    asyncio.run(go())


def test_redfish_error_has_extended_info() -> None:
    response = redfish_error(500, "Acme.1.0.Kaput", "it broke", headers=[("Retry-After", "3")])
    document = json.loads(response.body)
    info = document["error"]["@Message.ExtendedInfo"][0]
    assert info["MessageId"] == "Acme.1.0.Kaput"
    assert response.header("retry-after") == "3"


def test_corrupt_body_is_no_longer_json() -> None:
    good = redfish_error(200, "x", "y")
    data, keep = corrupt(good, "GET", keep_alive=True)
    assert keep
    with pytest.raises(json.JSONDecodeError):
        json.loads(data.split(b"\r\n\r\n", 1)[1])
    # Nothing to cut short: not HTTP at all, and the connection closes.
    assert corrupt(Response(204, [], b""), "POST", keep_alive=True) == (GARBLED_REPLY, False)


@pytest.mark.parametrize(
    ("method", "path", "operation"),
    [
        ("GET", "/redfish/v1", "probe"),
        ("GET", "/redfish/v1/", "probe"),
        ("POST", "/redfish/v1/SessionService/Sessions", "login"),
        ("GET", "/redfish/v1/Systems/abc", "power.get"),
        ("PATCH", "/redfish/v1/Systems/abc", "boot.set"),
        ("POST", "/redfish/v1/Systems/abc/Actions/ComputerSystem.Reset", "power.set"),
        (
            "POST",
            "/redfish/v1/Managers/bmc/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia",
            "vmedia.insert",
        ),
        (
            "POST",
            "/redfish/v1/Systems/1/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia",
            "vmedia.eject",
        ),
        ("GET", "/redfish/v1/Systems/abc/Processors/CPU1", "inventory.get"),
        ("GET", "/redfish/v1/Systems", None),
        ("GET", "/redfish/v1/Managers/bmc", None),
        ("DELETE", "/redfish/v1/Systems/abc", None),
    ],
)
def test_routes(method: str, path: str, operation: str | None) -> None:
    assert operation_for(method, path) == operation
