"""The harness's Ironic starts even when its API port is taken between the
pick and Ironic's bind (the CI run of 2026-11-29 lost six tests to it:
``[Errno 98] Address already in use``, the conductor running on without an
API until the start's timeout). Here the port is taken on purpose."""

from __future__ import annotations

import socket
from pathlib import Path

import requests

from bmaas.hwlab.harness import ironic as harness
from tests.ironic.conftest import SETTINGS


def test_a_taken_api_port_is_picked_again_and_ironic_answers(tmp_path: Path) -> None:
    service = harness.IronicService(tmp_path / "ironic", SETTINGS)
    taken = service.port
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        try:
            service.start(timeout=180)
            # a new port only after PortTaken: the first launch saw the bind fail
            assert service.port != taken
            # what an agent's ramdisk is told names the port Ironic got
            assert f"endpoint_override = {service.url}\n" in service.config_path.read_text()
            answer = requests.get(f"{service.url}/v1", timeout=10)
            assert answer.ok, answer.text
        finally:
            service.stop()
