"""A Redfish BMC port hwlab cannot bind is one line that says where, once
(``cannot listen on H:P for Redfish (TCP): Address already in use``), not
the server's "cannot listen on" repeated inside the worker's."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from bmaas.faults import InputError
from bmaas.hwlab.ports import bind_listener as _bind
from bmaas.hwlab.worker import _listen


@pytest.fixture
def taken() -> Iterator[int]:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    yield holder.getsockname()[1]
    holder.close()


def test_the_server_names_the_address_once(taken: int) -> None:
    with pytest.raises(OSError, match="Address already in use") as raised:
        _bind("127.0.0.1", taken)
    assert raised.value.strerror == "Address already in use"
    assert raised.value.filename == f"127.0.0.1:{taken}"


def test_the_workers_line_says_cannot_listen_once(taken: int) -> None:
    where = f"127.0.0.1:{taken} for Redfish (TCP)"
    with pytest.raises(InputError) as raised:
        _listen(lambda: _bind("127.0.0.1", taken), where, "node-001")
    message = str(raised.value)
    assert f"cannot listen on {where}: Address already in use" in message
    assert message.count("cannot listen on") == 1
