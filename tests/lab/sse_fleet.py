"""Many Redfish event services in one small process: a lab for 1,000 streams.

``python -m tests.lab.sse_fleet COUNT`` listens on COUNT free ports of
127.0.0.1 (one Redfish service each, system ``/redfish/v1/Systems/1``),
prints their ports as one JSON line, and serves on one thread (a selector):
``GET /redfish/v1/EventService`` answers the EventService document, the
SSE GET answers an event stream held open (a keepalive comment at once).
A line ``off I`` on stdin sends a ResourcePoweredOff Event on service I's
open streams, ``stats`` prints one JSON line (streams open), EOF ends it.

``COUNT push``: services without SSE that take push subscriptions (an
EventDestination POSTed to ``Subscriptions``, answered 201 with its
Location; GET and DELETE of it): ``off I`` POSTs the Event, with the
subscription's Context, to its Destination (what the BMC does, and what a
forger who read the Context off the BMC does alike); ``stats`` counts the
subscriptions too, and the GETs of the system (the reads pushed news asks for)."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the fleet's own process imports no bmaas
    from bmaas.drivers.redfish.events import ServiceStream
    from bmaas.events import EventWatch, Stream

SSE = "/redfish/v1/EventService/SSE"
DOC = json.dumps({"ServiceEnabled": True, "ServerSentEventUri": SSE}).encode()
SERVICE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
    + b"Content-Length: %d\r\n\r\n" % len(DOC)
    + DOC
)
SUBS = "/redfish/v1/EventService/Subscriptions"
PUSH_DOC = json.dumps({"ServiceEnabled": True, "Subscriptions": {"@odata.id": SUBS}}).encode()
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n: hello\n\n"
OFF = {
    "Events": [
        {
            "MessageId": "ResourceEvent.1.3.0.ResourcePoweredOff",
            "OriginOfCondition": {"@odata.id": "/redfish/v1/Systems/1"},
        }
    ]
}


def _answer(status: str, body: bytes = b"{}", extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nConnection: close\r\n"
    return (head + extra + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


#: push mode: service -> its subscription (Destination, Context), and reads of its system
SUBSCRIBED: dict[int, dict[str, str]] = {}
READS: dict[int, int] = {}


def _push_answer(i: int, method: str, path: str, body: bytes) -> bytes:
    if path == "/redfish/v1/EventService":
        return _answer("200 OK", PUSH_DOC)
    if path == SUBS and method == "POST":
        SUBSCRIBED[i] = json.loads(body)
        return _answer("201 Created", extra=f"Location: {SUBS}/1\r\n")
    if path == SUBS:
        return _answer("200 OK", b'{"Members": []}')
    if path == f"{SUBS}/1" and i in SUBSCRIBED:
        if method == "DELETE":
            del SUBSCRIBED[i]
        return _answer("200 OK")
    if path.startswith("/redfish/v1/Systems/1"):
        READS[i] = READS.get(i, 0) + 1
        return _answer("200 OK", b'{"PowerState": "On"}')
    return _answer("404 Not Found")


def _deliver(i: int) -> None:
    """POST an Event to service ``i``'s subscriber, its Context in it."""
    import http.client
    import urllib.parse

    sub = SUBSCRIBED.get(i)
    if sub is None:
        return
    url = urllib.parse.urlsplit(sub["Destination"])
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=5)
    try:
        body = json.dumps({**OFF, "Context": sub["Context"]})
        conn.request("POST", url.path, body, {"Content-Type": "application/json"})
        conn.getresponse().read()
    finally:
        conn.close()


@contextlib.contextmanager
def running(count: int, *mode: str) -> Iterator[tuple[subprocess.Popen[str], list[int]]]:
    """This fleet in a process of its own (``mode``: ``"push"`` or none):
    the process (its stdin takes the commands) and the services' ports."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.lab.sse_fleet", str(count), *mode],
        cwd=Path(__file__).resolve().parents[2],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc, json.loads(proc.stdout.readline())
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def fds() -> int:
    """File descriptors this process holds."""
    return len(os.listdir("/proc/self/fd"))


def streams(ports: list[int]) -> list[ServiceStream]:
    """One Redfish event stream a service of this fleet, service i's system node ``n<i>``."""
    from bmaas.drivers.redfish.events import ServiceStream
    from bmaas.secrets import Secret

    return [
        ServiceStream(
            f"http://127.0.0.1:{port}", "u", Secret("p"), False, {"/redfish/v1/Systems/1": f"n{i}"}
        )
        for i, port in enumerate(ports)
    ]


@contextlib.contextmanager
def watching(found: Sequence[Stream], listener: Any = None) -> Iterator[EventWatch]:
    """An EventWatch of ``found`` (one node a stream; ``listener``: the push
    listener, closed with the watch), every stream live and none faulted
    (bounded: 60 s); closed after."""
    from bmaas.events import EventWatch

    records = [
        type("Record", (), {"name": f"n{i}", "driver": "redfish", "driver_info": {"i": i}})()
        for i in range(len(found))
    ]
    watch = EventWatch(
        streams_of=lambda driver: lambda group: (found, {}), bmc_timeout=20.0, idle=120.0
    )
    if listener is not None:
        watch._listeners["redfish"] = listener
    try:
        watch.watch(records)
        for _ in range(600):
            if watch.summary()["nodes_up"] == len(found):
                break
            time.sleep(0.1)
        summary = watch.summary()
        assert summary["nodes_up"] == len(found), summary  # every stream live
        assert summary["faults"] == 0
        yield watch
    finally:
        # every subscription's DELETE given its time: 300 of them on the
        # listener's 4 threads outran close's default 5 s at load 24
        watch.close(timeout=60.0)


def main(count: int, push: bool = False) -> None:
    sel = selectors.DefaultSelector()
    ports = []
    for i in range(count):
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(64)
        lsock.setblocking(False)
        ports.append(lsock.getsockname()[1])
        sel.register(lsock, selectors.EVENT_READ, ("listen", i))
    sel.register(sys.stdin, selectors.EVENT_READ, ("stdin", 0))
    print(json.dumps(ports), flush=True)
    streams: dict[int, list[socket.socket]] = {i: [] for i in range(count)}
    pending: dict[socket.socket, bytes] = {}
    while True:
        for key, _ in sel.select():
            kind, i = key.data
            if kind == "listen":
                conn, _ = key.fileobj.accept()  # type: ignore[union-attr]
                conn.setblocking(False)
                pending[conn] = b""
                sel.register(conn, selectors.EVENT_READ, ("conn", i))
            elif kind == "conn":
                conn = key.fileobj  # type: ignore[assignment]
                _conn(sel, conn, i, pending, streams, push)
            elif not _command(sys.stdin.readline(), streams, push):
                return


def _conn(
    sel: selectors.BaseSelector,
    conn: socket.socket,
    i: int,
    pending: dict[socket.socket, bytes],
    streams: dict[int, list[socket.socket]],
    push: bool,
) -> None:
    try:
        data = conn.recv(65536)
    except OSError:
        data = b""
    if not data:  # the client went: forget it
        sel.unregister(conn)
        conn.close()
        pending.pop(conn, None)
        if conn in streams[i]:
            streams[i].remove(conn)
        return
    if conn not in pending:
        return  # a stream's client says nothing more
    pending[conn] += data
    if b"\r\n\r\n" not in pending[conn]:
        return
    head, _, body = pending[conn].partition(b"\r\n\r\n")
    length = next(
        (
            int(h.split(b":")[1])
            for h in head.split(b"\r\n")
            if h.lower().startswith(b"content-length")
        ),
        0,
    )
    if len(body) < length:
        return
    pending.pop(conn)
    method, path = (w.decode() for w in head.split(b" ", 2)[:2])
    if push:
        conn.sendall(_push_answer(i, method, path, body))
        sel.unregister(conn)
        conn.close()
    elif path.startswith(SSE):
        conn.sendall(HEAD)
        streams[i].append(conn)
    else:
        conn.sendall(SERVICE)
        sel.unregister(conn)
        conn.close()


def _command(line: str, streams: dict[int, list[socket.socket]], push: bool) -> bool:
    words = line.split()
    if not words:
        return False
    if words[0] == "off" and push:
        _deliver(int(words[1]))
    elif words[0] == "off":
        frame = b"data: " + json.dumps(OFF).encode() + b"\n\n"
        for conn in streams[int(words[1])]:
            conn.sendall(frame)
    elif words[0] == "stats":
        open_ = sum(len(c) for c in streams.values())
        print(
            json.dumps({"open": open_, "subscribed": len(SUBSCRIBED), "reads": READS}), flush=True
        )
    return True


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:] == ["push"])
