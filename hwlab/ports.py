"""A BMC's listening port, kept through its reboot.

A rebooting BMC refuses connections: nothing listens on its port. In the lab
that port is on a shared 127.0.0.1, and a port closed for a reboot window is
free for anyone: another lab, a test's server or a client's ephemeral bind
can take it, and the BMC cannot listen again when its reboot ends (``[Errno
98] address already in use``, each retry alike: a proxy's ``bmc_reboot`` of
1 s failed that way with two test suites on the machine, 2026-11-30). So the
port stays bound through the window, not listening (:func:`hold`): a connect
is refused as from a BMC that is down, an ephemeral bind elsewhere does not
pick a bound port while free ones remain, and the held socket itself
listens again when the BMC is back.

The emulated Redfish BMCs (:mod:`bmaas.hwlab.redfish.server`) and the
Redfish fault proxy (:mod:`bmaas.hwlab.proxy.redfish`) use these.
"""

from __future__ import annotations

import socket

__all__ = ["bind_listener", "hold", "listen_again"]

#: pending connections a listener queues
BACKLOG = 128


def _socket(host: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    # bindable right after a reboot window, over the connections it cut
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return sock


def bind_listener(host: str, port: int) -> socket.socket:
    """A non-blocking socket listening on ``host:port`` (0: a free port);
    ``OSError`` naming the address when it cannot be had."""
    sock = _socket(host)
    try:
        sock.bind((host, port))
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        # the address as the error's filename: callers that name the place
        # (the worker: "cannot listen on ... for Redfish") use strerror alone
        raise OSError(exc.errno, exc.strerror, f"{host}:{port}") from exc
    return sock


def hold(host: str, port: int) -> socket.socket | None:
    """``port`` bound again right after its listener closed, not listening
    (None if someone took it in that instant: the port is then bound anew
    when the BMC is back, as before). ``listen()`` on it serves again."""
    sock = _socket(host)
    try:
        sock.bind((host, port))
        sock.setblocking(False)
    except OSError:
        sock.close()
        return None
    return sock


def listen_again(held: socket.socket | None, host: str, port: int) -> socket.socket:
    """A listener on ``port`` once a BMC is back: the socket :func:`hold`
    kept, listening again, or a new one where nothing was held (someone
    took the port in the instant after its close; ``OSError`` if they still
    have it). A held socket that cannot listen is closed."""
    if held is None:
        return bind_listener(host, port)
    try:
        held.listen(BACKLOG)
    except OSError:
        held.close()
        raise
    return held
