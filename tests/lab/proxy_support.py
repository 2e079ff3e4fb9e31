"""Stock upstreams for the proxy lab tests: one vbmcd (libvirt test:///default)
and one sushy-emulator (fake driver) for the whole session, on 127.0.0.1, plus
the helpers those tests share. ``tests/lab/conftest.py`` registers the fixtures.

They come from the ``bmaas[virtualbmc]`` extra, which ``scripts/setup.sh``
installs; without it these fixtures fail with the install instructions.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bmaas.hwlab.proxy import ProxyHost, ProxySpec
from bmaas.hwlab.proxy.stock import StockSushy, StockVbmc

VBMC_USER = "admin"
VBMC_PASSWORD = "password"  # virtualbmc's documented default


@pytest.fixture(scope="session")
def stock_vbmc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StockVbmc]:
    server = StockVbmc(tmp_path_factory.mktemp("vbmc"), ["test"])
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def stock_sushy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StockSushy]:
    server = StockSushy(tmp_path_factory.mktemp("sushy"), ["node1"])
    server.start()
    yield server
    server.stop()


@pytest.fixture
def proxy_host(tmp_path: Path) -> Iterator[Callable[..., ProxyHost]]:
    """Start ProxyHosts for a test; each stops at teardown, leaving no thread."""
    started: list[ProxyHost] = []

    def start(spec: ProxySpec, rules: list[dict[str, object]] | None = None) -> ProxyHost:
        host = ProxyHost([spec], events_path=tmp_path / "events.jsonl", tls_dir=tmp_path / "tls")
        started.append(host)
        host.start()
        if rules:
            host.add_faults(spec.node, rules)
        return host

    yield start
    ports = [(p.port, p.protocol) for host in started for p in host.proxies.values()]
    for host in started:
        host.stop()
    assert not [t for t in threading.enumerate() if t.name == "hwlab-proxy"]
    for port, protocol in ports:
        kind = socket.SOCK_DGRAM if protocol == "ipmi" else socket.SOCK_STREAM
        assert port_is_free(port, kind), f"{protocol} proxy port {port} still bound"


def sushy_driver(host: ProxyHost, sushy: StockSushy, *, bmc_timeout: float) -> Any:
    """The bmaas Redfish driver for ``sushy``'s system ``node1`` through
    ``host``'s proxy ``rf1`` (verifying the proxy's certificate when it
    serves TLS)."""
    from bmaas.registry import build_driver

    proxy = host.proxies["rf1"]
    info = {
        "redfish_address": proxy.url,  # type: ignore[attr-defined]
        "redfish_system_id": "/redfish/v1/Systems/" + sushy.system_id("node1"),
        "redfish_username": "admin",
        "redfish_password": "unused-by-the-emulator",
    }
    cert = getattr(proxy, "cert_path", None)
    if cert is not None:
        info["redfish_verify_ca"] = str(cert)
    return build_driver("rf1", "redfish", info, bmc_timeout=bmc_timeout)


def ipmitool(
    port: int,
    *args: str,
    password: str = VBMC_PASSWORD,
    timeout: int = 1,
    retries: int = 1,
) -> subprocess.CompletedProcess[str]:
    """ipmitool lanplus against 127.0.0.1:port, bounded: -N timeout, -R retries."""
    return subprocess.run(
        [
            "ipmitool",
            *("-I", "lanplus", "-H", "127.0.0.1", "-p", str(port), "-U", VBMC_USER, "-E"),
            *("-N", str(timeout), "-R", str(retries), *args),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "IPMI_PASSWORD": password},
        check=False,
    )


def port_is_free(port: int, kind: int = socket.SOCK_DGRAM) -> bool:
    with socket.socket(socket.AF_INET, kind) as sock:
        if kind == socket.SOCK_STREAM:
            # a connection the proxy closed first (a garbled answer) lingers
            # in TIME_WAIT, no socket of the proxy's; a listener still counts
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def require_driver(name: str) -> None:
    """Skip the calling module until the bmaas ``name`` driver is installed
    (its ``bmaas.drivers`` entry point): the proxy was built before the
    drivers, and these tests switch on by themselves when a driver lands."""
    from bmaas.registry import available_drivers

    if name not in available_drivers():
        pytest.skip(
            f"the bmaas {name} driver (drivers/{name}.py, entry point {name!r}) is not in "
            "this tree yet; these tests activate when it lands",
            allow_module_level=True,
        )


HWLAB = shutil.which("hwlab") or "hwlab"


def hwlab(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The ``hwlab`` CLI, its output captured."""
    return subprocess.run(
        [HWLAB, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def wait_ready(state: Path, process: subprocess.Popen[str], timeout: float = 20) -> dict[str, Any]:
    """``hwlab proxy``'s ``lab.json`` once it says ready (bounded; the
    process must stay alive meanwhile)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            info = json.loads((state / "lab.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            info = {}
        if info.get("state") == "ready":
            return info
        assert process.poll() is None, "hwlab proxy exited early"
        time.sleep(0.05)
    raise AssertionError("hwlab proxy did not become ready")
