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
