"""A TCP port that accepts and never answers: a silent Ironic API or database.

urllib3's own tests start tiny misbehaving servers like this one; here it is
the edge every bmaas bound is measured against. The server binds 127.0.0.1 on
a free port, accepts every connection, reads and discards whatever the
client sends, and never writes a byte. It stops (and closes every
connection it holds) when the ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections.abc import Iterator

__all__ = ["SilentServer", "silent_port"]


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
