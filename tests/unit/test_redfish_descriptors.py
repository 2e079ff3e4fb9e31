"""bmaas.drivers.redfish.descriptors: kept Redfish connections live on descriptors
select() never watches, so a process can keep thousands beside pyghmi."""

from __future__ import annotations

import os
import select
import socket
from pathlib import Path

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.drivers.redfish import descriptors
from tests.unit.test_redfish_lean_read import Fake, driver, serving

#: this machine's descriptor limit leaves room above 1024 (20,000 here and in
#: CI); a process whose limit does not keeps the old cap of 256, tested below
ROOM = pytest.mark.skipif(
    descriptors._room_above() <= descriptors._SPARE,
    reason="RLIMIT_NOFILE leaves no room above 1024 on this machine",
)


def _high_sockets() -> set[int]:
    fds = set()
    for entry in Path("/proc/self/fd").iterdir():
        fd = int(entry.name)
        if fd >= descriptors.FD_SETSIZE and os.readlink(entry).startswith("socket:"):
            fds.add(fd)
    return fds


@ROOM
def test_a_moved_socket_is_the_same_socket_above_1024() -> None:
    a, b = socket.socketpair()
    a.settimeout(3.5)
    low = a.fileno()
    moved = descriptors.move_high(a)
    try:
        assert moved.fileno() >= descriptors.FD_SETSIZE
        assert moved.gettimeout() == 3.5
        assert a.fileno() == -1  # the low descriptor is closed, free for select() users
        assert moved.fileno() != low
        moved.sendall(b"ping")
        assert b.recv(4) == b"ping"
    finally:
        moved.close()
        b.close()


@ROOM
def test_a_low_descriptor_stays_free_for_select() -> None:
    """What pyghmi needs: after a moved socket, the next socket it opens is
    still one select() accepts."""
    a, b = socket.socketpair()
    moved = descriptors.move_high(a)
    c, d = socket.socketpair()
    try:
        assert c.fileno() < descriptors.FD_SETSIZE
        d.send(b"x")
        assert select.select([c], [], [], 1.0)[0] == [c]
    finally:
        for s in (moved, b, c, d):
            s.close()


def test_without_room_nothing_moves_and_the_small_cap_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(descriptors, "_room_above", lambda: 0)
    a, b = socket.socketpair()
    try:
        assert descriptors.move_high(a) is a
        assert descriptors.keepable_services() == descriptors.SMALL_CAP
    finally:
        a.close()
        b.close()


@ROOM
def test_the_kept_power_read_connection_lives_above_1024() -> None:
    """Issue 26: past 256 services every Redfish read opened a connection
    (pyghmi's select() limit); now the kept one sits above 1024, and the
    driver keeps connections for as many services as the limit has room."""
    from bmaas.drivers.redfish.driver import RedfishDriver

    assert RedfishDriver.keep_alive_services > 1000
    fake = Fake()
    before = _high_sockets()
    with serving(fake) as url:
        d = driver(url)
        for _ in range(4):  # connect; a lean read asking a close, then two on a kept socket
            assert d.get_power_state(deadline=Deadline.after(10.0)) is PowerState.ON
        assert _high_sockets() - before  # the kept connection
        d.close()
    assert len(fake.connections) < len(fake.requests)  # kept, not one per read
