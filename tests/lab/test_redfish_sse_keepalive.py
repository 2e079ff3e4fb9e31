"""The SSE keepalive as a lab setting (issue 37): a BMC whose ``sse_keepalive``
is short writes ``: keepalive`` comments on an idle stream; one whose setting
is None writes none at all (OpenBMC's bmcweb writes only events), while its
events still arrive on the same stream. The setting reaches the BMCs from
:class:`RedfishServer` (``add`` and ``add_service``) and from a worker's
:class:`Shard`.

Nothing asserts wall time: "none" is judged against a BMC of the same
server (one event loop) that sent several keepalives meanwhile. Every read
is bounded by a socket timeout and a cap on reads.
"""

from __future__ import annotations

import base64
import json
import select
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bmaas.driver import PowerState
from bmaas.fakes.machine import FakeMachine
from bmaas.hwlab.labspec import DEFAULT_PASSWORD, DEFAULT_USERNAME, generate
from bmaas.hwlab.redfish import RedfishServer
from bmaas.hwlab.redfish import events as hub_events
from bmaas.hwlab.worker import Shard, ShardServers
from tests.lab.redfish_support import HARDWARE, PASSWORD, USERNAME

pytestmark = pytest.mark.lab

KEEPALIVE = b": keepalive\n\n"
#: a short keepalive, so a few arrive quickly
SHORT = 0.2
#: the most reads one wait makes (each bounded by the socket's timeout)
MAX_READS = 200


class RawStream:
    """An SSE stream read as bytes off a plain socket (so a read that finds
    nothing can be asked again)."""

    def __init__(self, port: int, username: str = USERNAME, password: str = PASSWORD) -> None:
        auth = base64.b64encode(f"{username}:{password}".encode()).decode()
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.sendall(
            f"GET {hub_events.SSE_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Basic {auth}\r\nAccept: text/event-stream\r\n\r\n".encode()
        )
        self.body = b""  # everything after the headers
        head = self._until(lambda data: b"\r\n\r\n" in data, self.body)
        status, _, self.body = head.partition(b"\r\n\r\n")
        assert status.startswith(b"HTTP/1.1 200"), status
        # the stream's opening comment: the BMC's loop now waits on the stream
        self.body = self._until(
            lambda data: data.startswith(b": hwlab event stream\n\n"), self.body
        )
        self.body = self.body.removeprefix(b": hwlab event stream\n\n")

    def _until(self, done: Callable[[bytes], bool], data: bytes) -> bytes:
        for _ in range(MAX_READS):
            if done(data):
                return data
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(f"the stream ended after {data!r}")
            data += chunk
        raise AssertionError(f"gave up after {MAX_READS} reads: {data!r}")

    def read_until(self, done: Callable[[bytes], bool]) -> bytes:
        """Read until ``done(body)``; returns the body so far."""
        self.body = self._until(done, self.body)
        return self.body

    def pending(self) -> bytes:
        """What has arrived and not been read, without waiting."""
        while select.select([self.sock], [], [], 0)[0]:
            chunk = self.sock.recv(65536)
            if not chunk:
                break
            self.body += chunk
        return self.body

    def close(self) -> None:
        self.sock.close()


def _frames(body: bytes) -> list[dict[str, object]]:
    out = []
    for frame in body.split(b"\n\n"):
        data = [ln[5:].strip() for ln in frame.split(b"\n") if ln.startswith(b"data:")]
        if data:
            out.append(dict(json.loads(b"\n".join(data))))
    return out


@pytest.fixture
def streams() -> Iterator[list[RawStream]]:
    opened: list[RawStream] = []
    yield opened
    for stream in opened:
        stream.close()


def test_a_bmc_keeps_the_default_keepalive_unless_its_server_says_otherwise() -> None:
    with RedfishServer() as server:
        port = server.add(FakeMachine("ka-default", HARDWARE), username=USERNAME, password=PASSWORD)
        assert server.sse_keepalive == hub_events.KEEPALIVE == 30.0
        assert server.bmc(port).sse_keepalive == 30.0


def test_a_short_keepalive_sends_comments_and_none_sends_none_while_events_arrive(
    streams: list[RawStream],
) -> None:
    with RedfishServer(sse_keepalive=None) as server:
        quiet = FakeMachine("ka-quiet", HARDWARE, power=PowerState.ON)
        quiet_port = server.add(quiet, username=USERNAME, password=PASSWORD)
        server.sse_keepalive = SHORT  # the BMCs added from now on: a shared service
        shared = [FakeMachine(f"ka-chatty-{i}", HARDWARE) for i in (1, 2)]
        chatty_port = server.add_service(shared, username=USERNAME, password=PASSWORD)
        assert server.bmc(quiet_port).sse_keepalive is None
        assert [b.sse_keepalive for b in server.bmc(chatty_port).peers] == [SHORT, SHORT]

        silent = RawStream(quiet_port)
        streams.append(silent)
        chatty = RawStream(chatty_port)
        streams.append(chatty)
        # the same event loop serves both: three keepalives on one stream...
        body = chatty.read_until(lambda data: data.count(KEEPALIVE) >= 3)
        assert body.startswith(KEEPALIVE)
        assert _frames(body) == []
        # ...and meanwhile not one on the stream of the BMC that sends none
        assert silent.pending() == b""
        # an event still arrives on that stream, with nothing before it
        quiet.force_power(PowerState.OFF)  # the console power-off
        got = silent.read_until(lambda data: _frames(data) != [])
        assert KEEPALIVE not in got
        assert got.startswith(b"id: ")
        (event,) = _frames(got)
        records = event["Events"]
        assert isinstance(records, list)
        assert records[0]["MessageId"] == "ResourceEvent.1.3.0.ResourcePoweredOff"


@pytest.mark.parametrize("service_size", [1, 2])
def test_a_shard_gives_its_redfish_bmcs_its_keepalive(
    tmp_path: Path, streams: list[RawStream], service_size: int
) -> None:
    nodes = generate(2, protocols="redfish", hardware=HARDWARE).nodes
    chatty_shard = Shard(
        index=0,
        nodes=nodes,
        seed=0,
        events_path=str(tmp_path / "chatty.jsonl"),
        redfish_service_size=service_size,
        sse_keepalive=SHORT,
    )
    quiet_nodes = generate(1, protocols="redfish", hardware=HARDWARE, prefix="quiet").nodes
    quiet_shard = Shard(
        index=1,
        nodes=quiet_nodes,
        seed=0,
        events_path=str(tmp_path / "quiet.jsonl"),
        sse_keepalive=None,
    )
    assert Shard(index=2, nodes=(), seed=0, events_path="").sse_keepalive == 30.0
    with ShardServers(quiet_shard) as quiet, ShardServers(chatty_shard) as chatty:
        silent = RawStream(
            quiet.endpoints["quiet-001"]["redfish"], DEFAULT_USERNAME, DEFAULT_PASSWORD
        )
        streams.append(silent)
        talking = [
            RawStream(chatty.endpoints[n.name]["redfish"], DEFAULT_USERNAME, DEFAULT_PASSWORD)
            for n in nodes
        ]
        streams.extend(talking)
        for stream in talking:
            assert stream.read_until(lambda data: data.count(KEEPALIVE) >= 2).startswith(KEEPALIVE)
        assert silent.pending() == b""
        quiet.force_power("quiet-001", "on")
        got = silent.read_until(lambda data: _frames(data) != [])
        assert KEEPALIVE not in got
