"""A Redfish event stream is healthy only while it delivers what Redfish
defines (issue 46): a 200k-deep frame (RecursionError in json.loads), random
bytes, 5 MB of bare newlines and a frame of empty ``data:`` lines each end
with the stream dropped, its node polled, the listener alive (it opens the
stream again after the policy's wait) and no traceback. Against a tiny
service on 127.0.0.1 that answers the SSE GET with the garbage and holds the
connection open; the watch's waits are recorded on a fake clock."""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from bmaas.drivers.redfish.events import MAX_JUNK, ServiceStream, SSEParser, news_of
from bmaas.events import EventWatch
from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCProtocolError
from bmaas.secrets import Secret
from tests.httpserve import send_json, serving_handler
from tests.unit.stepped import recording

DEEP = 200_000
GARBAGE = {
    "a 200k-deep frame": b"data: " + b"[" * DEEP + b"\n\n",
    "random bytes": random.Random(46).randbytes(4 * 1024 * 1024),
    "5 MB of bare newlines": b"\n" * 5_000_000,
    "empty data lines": b"data:\n" * 500_000,  # 3 MB in one frame
}
SSE = "/redfish/v1/EventService/SSE"


# -- the parser and the parse ---------------------------------------------------------


def _feed(wire: bytes) -> None:
    parser = SSEParser()
    for at in range(0, len(wire), 65536):
        for message in parser.feed(wire[at : at + 65536]):
            news_of(message.data, {"*": "n1"})


@pytest.mark.parametrize("wire", GARBAGE.values(), ids=GARBAGE.keys())
def test_garbage_is_refused_as_a_bad_stream_not_taken_as_healthy(wire: bytes) -> None:
    with pytest.raises(ValueError, match=r"without an event|longer than|nested deeper"):
        _feed(wire)


def test_keepalives_and_events_are_what_a_healthy_stream_carries() -> None:
    event = b'id: 1\ndata: {"Events": []}\n\n'
    _feed(b": hwlab event stream\n\n" + b": keepalive\n\n" * 200_000 + event)
    _feed((b"\n" * (MAX_JUNK // 2) + event) * 4)  # junk is counted since the last event


def test_a_keepalive_is_counted_an_event_or_a_long_comment_is_not() -> None:
    """What tells a stream's silence apart (bmaas.reactor.Pacing.silence_limit):
    a service that sent a keepalive promised them; bmcweb sends only events."""
    parser = SSEParser()
    parser.feed(b'data: {"Events": []}\n\n' + b": " + b"x" * 300 + b"\n\n")
    assert parser.keepalives == 0
    parser.feed(b": keepalive\n\n: keepalive\r\n\r\n")
    assert parser.keepalives == 2


def test_every_line_of_a_frame_counts_toward_its_cap() -> None:
    parser = SSEParser(max_frame=64)
    with pytest.raises(ValueError, match="longer than 64"):
        parser.feed(b"data:\n" * 11)
    with pytest.raises(ValueError, match="longer than 64"):
        SSEParser(max_frame=64).feed(b": comment\n" * 7)


def test_a_deep_event_inside_a_frame_is_refused_before_json_loads() -> None:
    with pytest.raises(ValueError, match="nested deeper"):
        news_of('{"Events": ' + "[" * DEEP, {"*": "n1"})


# -- the listener against a service that sends it --------------------------------------


class _Service:
    def __init__(self, stream: bytes, event_service: Any = None) -> None:
        self.stream = stream
        self.event_service = event_service or {"ServiceEnabled": True, "ServerSentEventUri": SSE}
        self.sse_gets = 0
        self.release = threading.Event()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                path = self.path.partition("?")[0]
                if path == "/redfish/v1/EventService":
                    if isinstance(service.event_service, bytes):
                        self.send_response(200)
                        self.send_header("Content-Length", str(len(service.event_service)))
                        self.end_headers()
                        self.wfile.write(service.event_service)
                    else:
                        send_json(self, 200, service.event_service)
                    return
                service.sse_gets += 1
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                with contextlib.suppress(OSError):  # the client dropped it mid-way
                    self.wfile.write(service.stream)
                service.release.wait(10)  # held open: only the garbage can end it
                self.close_connection = True

        return Handler


def _listen(url: str, sleeps: int) -> tuple[EventWatch, list[float]]:
    """The watch over ``url``'s stream on its reactor (its own thread, a real
    socket) until its ``sleeps``-th wait: the waits it arms, the fake clock
    moved past each."""
    clock = FakeClock(start=0.0)
    stream = ServiceStream(url, "admin", Secret("pw"), False, {"*": "n1"})
    watch = EventWatch(
        streams_of=lambda driver: lambda records: ([stream], {}),
        bmc_timeout=10.0,
        idle=10.0,
        clock=clock,
    )
    waits = recording(watch)
    record = type("Record", (), {"name": "n1", "driver": "redfish", "driver_info": {}})()
    watch.watch([record])
    told = 0
    for _ in range(300):  # bounded: 30 s
        if len(waits) > told:
            told = len(waits)
            if told >= sleeps:
                break
            # the reactor tells the wait, then arms its timer: advanced
            # before that (a slowed reactor thread, load 24), the timer fell
            # 600 s past the advanced clock and never fired
            armed_by = clock() + waits[-1]
            for _ in range(100):  # bounded: 10 s
                if any(at >= armed_by for at, *_ in list(watch._reactor._timers)):
                    break
                time.sleep(0.05)
            clock.advance(waits[-1])
            watch._reactor._wake()  # its timer is due: it opens again
        time.sleep(0.1)
    watch.close()
    return watch, waits


@pytest.mark.parametrize("wire", GARBAGE.values(), ids=GARBAGE.keys())
def test_a_garbage_stream_is_dropped_its_node_polled_and_the_listener_lives(
    wire: bytes, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    died: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", died.append)
    service = _Service(wire)
    with (
        caplog.at_level(logging.DEBUG),
        serving_handler(service.handler(), before_stop=service.release.set) as url,
    ):
        watch, waits = _listen(url, sleeps=2)
    assert died == []  # the listener ended by the stop, not by an exception
    assert waits == [600.0, 600.0]  # BMCProtocolError: the policy's stream column, late
    assert "next try in 600 s" in caplog.text
    assert service.sse_gets == 2  # dropped, then opened again: alive
    assert watch.faults == 2
    assert not watch.up("n1")
    assert watch.to_read(["n1"], 0.0) == ["n1"]  # polled
    assert [r for r in caplog.records if r.exc_info] == []  # no traceback
    assert "a bad event" in caplog.text


def test_a_deep_event_service_document_is_a_protocol_error() -> None:
    from bmaas.deadline import Deadline

    service = _Service(b"", event_service=b'{"ServiceEnabled": ' + b"[" * DEEP)
    with serving_handler(service.handler(), before_stop=service.release.set) as url:
        stream = ServiceStream(url, "admin", Secret("pw"), False, {"*": "n1"})
        with pytest.raises(BMCProtocolError, match="not JSON"):
            stream.open(Deadline.after(10.0))
