"""A TCP port that accepts and never answers: a silent Ironic API or database.

urllib3's own tests start tiny misbehaving servers like this one; here it is
the edge every bmaas bound is measured against. The server binds 127.0.0.1 on
a free port, accepts every connection, reads and discards whatever the
client sends, and never writes a byte. It stops (and closes every
connection it holds) when the ``with`` block ends.

:func:`ironic_that_stalls` is the other half: an Ironic that answers version
discovery (so the client's connection is set up) and then goes silent.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import selectors
import socket
import socketserver
import threading
from collections.abc import Iterator

__all__ = ["SilentServer", "ironic_that_stalls", "silent_port"]


class SilentServer:
    """Accepts on ``port`` and holds every connection open, silently."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._run, name="silent-server", daemon=True)

    def start(self) -> SilentServer:
        self._thread.start()
        return self

    def _run(self) -> None:
        held: list[socket.socket] = []
        try:
            while not self._stop.is_set():
                for key, _ in self._selector.select(timeout=0.05):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    if sock is self._listener:
                        with contextlib.suppress(BlockingIOError):
                            conn, _addr = self._listener.accept()
                            conn.setblocking(False)
                            self._selector.register(conn, selectors.EVENT_READ)
                            held.append(conn)
                            self.accepted += 1
                        continue
                    try:
                        data = sock.recv(65536)
                    except (BlockingIOError, ConnectionError):
                        data = b"x"
                    if not data:  # the client gave up: forget it
                        self._selector.unregister(sock)
                        sock.close()
                        held.remove(sock)
        finally:
            for conn in held:
                conn.close()
            self._selector.close()
            self._listener.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@contextlib.contextmanager
def silent_port() -> Iterator[SilentServer]:
    """A running :class:`SilentServer`, stopped when the block ends."""
    server = SilentServer().start()
    try:
        yield server
    finally:
        server.stop()


class _VersionsOnly(http.server.BaseHTTPRequestHandler):
    """Ironic's version discovery (``GET /``, ``GET /v1/``) answered, as a
    real Ironic would; every other request accepted and never answered."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        server = self.server
        assert isinstance(server, _Server)
        if self.path not in ("/", "/v1", "/v1/"):
            server.stalled += 1
            server.release.wait()
            return
        port = server.port
        version = {
            "id": "v1",
            "status": "CURRENT",
            "min_version": "1.1",
            "version": "1.92",
            "links": [{"href": f"http://127.0.0.1:{port}/v1/", "rel": "self"}],
        }
        doc = (
            {"versions": [version], "default_version": version}
            if self.path == "/"
            else {"id": "v1", "version": version, "links": version["links"]}
        )
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_PATCH = do_PUT = do_DELETE = do_GET  # noqa: N815

    def log_message(self, *_args: object) -> None:
        pass


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _VersionsOnly)
        self.port: int = self.socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        #: requests held without an answer so far
        self.stalled = 0
        self.release = threading.Event()


@contextlib.contextmanager
def ironic_that_stalls() -> Iterator[_Server]:
    """An "Ironic" (its ``url``) that answers version discovery and then
    never answers an API call: the per-call bound, past the connection's
    setup. Its ``stalled`` counts the calls it holds."""
    server = _Server()
    thread = threading.Thread(target=server.serve_forever, name="stalling-ironic", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
