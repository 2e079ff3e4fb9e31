"""Many Redfish event services in one small process: a lab for 1,000 streams.

``python -m tests.lab.sse_fleet COUNT`` listens on COUNT free ports of
127.0.0.1 (one Redfish service each, system ``/redfish/v1/Systems/1``),
prints their ports as one JSON line, and serves on one thread (a selector):
``GET /redfish/v1/EventService`` answers the EventService document, the
SSE GET answers an event stream held open (a keepalive comment at once).
A line ``off I`` on stdin sends a ResourcePoweredOff Event on service I's
open streams, ``stats`` prints one JSON line (streams open), EOF ends it."""

from __future__ import annotations

import json
import selectors
import socket
import sys

SSE = "/redfish/v1/EventService/SSE"
DOC = json.dumps({"ServiceEnabled": True, "ServerSentEventUri": SSE}).encode()
SERVICE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
    + b"Content-Length: %d\r\n\r\n" % len(DOC)
    + DOC
)
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n: hello\n\n"
OFF = {
    "Events": [
        {
            "MessageId": "ResourceEvent.1.3.0.ResourcePoweredOff",
            "OriginOfCondition": {"@odata.id": "/redfish/v1/Systems/1"},
        }
    ]
}


def main(count: int) -> None:
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
                _conn(sel, conn, i, pending, streams)
            elif not _command(sys.stdin.readline(), streams):
                return


def _conn(
    sel: selectors.BaseSelector,
    conn: socket.socket,
    i: int,
    pending: dict[socket.socket, bytes],
    streams: dict[int, list[socket.socket]],
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
    head = pending.pop(conn)
    path = head.split(b" ", 2)[1].decode()
    if path.startswith(SSE):
        conn.sendall(HEAD)
        streams[i].append(conn)
    else:
        conn.sendall(SERVICE)
        sel.unregister(conn)
        conn.close()


def _command(line: str, streams: dict[int, list[socket.socket]]) -> bool:
    words = line.split()
    if not words:
        return False
    if words[0] == "off":
        frame = b"data: " + json.dumps(OFF).encode() + b"\n\n"
        for conn in streams[int(words[1])]:
            conn.sendall(frame)
    elif words[0] == "stats":
        print(json.dumps({"open": sum(len(c) for c in streams.values())}), flush=True)
    return True


if __name__ == "__main__":
    main(int(sys.argv[1]))
