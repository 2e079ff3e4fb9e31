"""hwlab's free_port picks below the kernel's ephemeral range, where no
outgoing connection is handed the port before the server binds it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from bmaas.hwlab.proxy import stock


def _range(tmp_path: Path, low: int, high: int) -> Path:
    path = tmp_path / "ip_local_port_range"
    path.write_text(f"{low}\t{high}\n")
    return path


@pytest.mark.parametrize("kind", [socket.SOCK_STREAM, socket.SOCK_DGRAM])
def test_a_port_is_picked_below_the_ephemeral_range_and_binds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: int
) -> None:
    monkeypatch.setattr(stock, "EPHEMERAL_RANGE", _range(tmp_path, 32768, 60999))
    ports = {stock.free_port(kind) for _ in range(20)}
    assert all(stock.PICK_FROM <= p < 32768 for p in ports), ports
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", ports.pop()))  # free when handed out


def test_a_taken_port_is_never_handed_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        asked = []
        real = stock.random.randrange

        def pick(a: int, b: int) -> int:  # the held port twice, then at random
            asked.append((a, b))
            return taken if len(asked) <= 2 else real(a, b)

        monkeypatch.setattr(stock, "EPHEMERAL_RANGE", _range(tmp_path, 61000, 61001))
        monkeypatch.setattr(stock, "PICK_FROM", 1024)
        monkeypatch.setattr(stock.random, "randrange", pick)
        port = stock.free_port()
    assert port != taken
    assert len(asked) >= 3
    assert asked[0] == (1024, 61000)


def test_no_room_below_the_range_lets_the_os_pick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stock, "EPHEMERAL_RANGE", _range(tmp_path, 20500, 60999))
    port = stock.free_port()
    assert port >= 20500  # the kernel's own pick, from its range


def test_an_unreadable_range_counts_as_the_kernels_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stock, "EPHEMERAL_RANGE", tmp_path / "missing")
    assert stock.PICK_FROM <= stock.free_port() < 32768
