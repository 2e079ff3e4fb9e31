"""pyghmi's socket sharing, as bmaas's IPMI driver configures it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from pyghmi.ipmi.private import session as _ps

from bmaas.drivers.ipmi import session as bounded


@pytest.fixture
def socketpool() -> Iterator[dict[socket.socket, int]]:
    """pyghmi's process-wide socket pool, emptied for the test and restored."""
    saved = dict(_ps.Session.socketpool)
    _ps.Session.socketpool.clear()
    try:
        yield _ps.Session.socketpool
    finally:
        _ps.Session.socketpool.clear()
        _ps.Session.socketpool.update(saved)


def test_one_socket_serves_many_more_bmcs_than_pyghmis_64(
    socketpool: dict[socket.socket, int],
) -> None:
    # the IO thread tries a read on every socket at each wake: at 10,000
    # sessions pyghmi's 64 a socket made that 157 sockets
    assert bounded.BMCS_PER_SOCKET >= 512
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as shared:
        socketpool[shared] = 64  # full, by pyghmi's own count
        assert bounded.BoundedSession._assignsocket() is shared
        assert socketpool[shared] == 65


def test_other_pyghmi_users_keep_pyghmis_own_limit() -> None:
    # bmaas's 512 is its sessions' own: pyghmi's process-wide setting, which
    # every other pyghmi user in the process (a hwlab BMC, a caller's own
    # Command) goes by, is left as pyghmi ships it
    assert _ps.MAX_BMCS_PER_SOCKET == 64


def test_a_full_pool_gets_a_new_socket_from_pyghmi(
    socketpool: dict[socket.socket, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[tuple[object, list[object]]] = []

    def pyghmis(cls: object, server: object = None, forbiddensockets: Any = ()) -> str:
        made.append((server, list(forbiddensockets)))
        return "new"

    monkeypatch.setattr(_ps.Session, "_assignsocket", classmethod(pyghmis))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as full:
        socketpool[full] = bounded.BMCS_PER_SOCKET
        assert bounded.BoundedSession._assignsocket() == "new"
        assert made == [(None, [full])]  # every pooled socket forbidden: pyghmi makes one
        assert socketpool[full] == bounded.BMCS_PER_SOCKET


def test_a_socket_already_talking_to_the_bmc_is_never_shared(
    socketpool: dict[socket.socket, int],
) -> None:
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as busy,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other,
    ):
        socketpool[busy] = 1
        socketpool[other] = 100
        assert bounded.BoundedSession._assignsocket(forbiddensockets=[busy]) is other


@pytest.fixture
def pooled(monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A UDP socket in pyghmi's list of IO sockets (the list restored after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        monkeypatch.setattr(_ps, "iosockets", [sock])
        yield sock


def test_pyghmis_send_leaves_its_socket_nonblocking(pooled: socket.socket) -> None:
    """pyghmi's senders set the shared socket blocking; its IO thread reads it
    as setblocking(0) then recvfrom, so a send in between left the IO thread
    blocked on a drained socket and every other socket deaf."""
    bounded._keep_nonblocking()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
        peer.bind(("127.0.0.1", 0))
        peer.settimeout(2.0)
        _ps._io_sendto(pooled, b"ping", peer.getsockname())
        assert pooled.getblocking() is False
        assert peer.recvfrom(16)[0] == b"ping"  # still sent
        pooled.setblocking(True)
        assert pooled.getblocking() is False
        with pytest.raises(BlockingIOError):  # what the IO thread's drain relies on
            pooled.recvfrom(16)


def test_a_send_into_a_full_buffer_waits_for_room_once(
    pooled: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    bounded._keep_nonblocking()
    tries: list[bytes] = []

    def full_then_room(self: socket.socket, data: bytes, *args: object) -> int:
        tries.append(data)
        if len(tries) == 1:
            raise BlockingIOError("the send buffer is full")
        return len(data)

    monkeypatch.setattr(socket.socket, "sendto", full_then_room)
    assert pooled.sendto(b"ping", ("127.0.0.1", 9)) == 4
    assert tries == [b"ping", b"ping"]  # one wait for room, then the send


def test_sockets_pyghmi_made_for_others_are_kept_nonblocking_too(
    pooled: socket.socket, socketpool: dict[socket.socket, int]
) -> None:
    assert type(pooled) is socket.socket  # as pyghmi makes them, for any pyghmi user
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as shared:
        socketpool[shared] = 1
        assert bounded.BoundedSession._assignsocket() is shared
    assert type(pooled) is bounded._NonBlockingSocket
    assert pooled.getblocking() is False


def test_a_socket_of_another_class_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """eventlet's green sockets (patched before bmaas was imported): switching
    the class of an object whose layout differs would fail the login."""

    class Green(socket.socket):
        pass

    with Green(socket.AF_INET, socket.SOCK_DGRAM) as green:
        monkeypatch.setattr(_ps, "iosockets", [green])
        bounded._keep_nonblocking()
        assert type(green) is Green
        assert green.getblocking() is True
