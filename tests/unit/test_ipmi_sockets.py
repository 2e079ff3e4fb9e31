"""pyghmi's socket sharing, as bmaas's IPMI driver configures it."""

from __future__ import annotations

import socket
from collections.abc import Iterator

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
    assert _ps.MAX_BMCS_PER_SOCKET == bounded.BMCS_PER_SOCKET
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as shared:
        socketpool[shared] = 64  # full, by pyghmi's own count
        assert _ps.Session._assignsocket() is shared
        assert socketpool[shared] == 65


def test_a_socket_already_talking_to_the_bmc_is_never_shared(
    socketpool: dict[socket.socket, int],
) -> None:
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as busy,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other,
    ):
        socketpool[busy] = 1
        socketpool[other] = 100
        assert _ps.Session._assignsocket(forbiddensockets=[busy]) is other
