"""A conductor whose push listener cannot start says why in its one log line
(the address and the reason, from :mod:`bmaas.listenspec`) and streams with
SSE only. Runs in the Ironic venv (``scripts/ironic-env.sh``, hence the
``ironic`` mark); no Ironic service is started."""

from __future__ import annotations

import subprocess

import pytest

from bmaas.hwlab.harness import ironic as harness

pytestmark = pytest.mark.ironic

_START = """
import logging
from types import SimpleNamespace
from bmaas.drivers.ironic.host import _push_listener

logging.basicConfig(level=logging.ERROR, format="%(message)s")
group = SimpleNamespace(
    events_listen="192.0.2.1:0",  # TEST-NET-1: not an address of this host
    events_listen_url="",
    events_tls_cert="",
    events_tls_key="",
    events_prefer_push=False,
)
assert _push_listener(group) is None
"""


def test_a_listener_that_cannot_bind_is_one_line_naming_the_address() -> None:
    python = harness.find_venv() / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", _START], capture_output=True, text=True, timeout=60, check=True
    )
    (line,) = done.stderr.strip().splitlines()
    assert "cannot listen on 192.0.2.1:0: Cannot assign requested address" in line
    assert line.endswith("event streams use SSE only")
