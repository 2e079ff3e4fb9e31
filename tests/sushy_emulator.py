"""Stock ``sushy-emulator`` (sushy-tools' fake driver, no libvirt) for lab and
Ironic tests: N systems behind one Redfish service on a free 127.0.0.1 port.

Its access log (werkzeug's) is what the tests count at the server:
service-root reads and session logins.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bmaas.hwlab.proxy.stock import free_port

__all__ = ["ROOT_READ", "SESSION_LOGIN", "Emulator", "sushy_emulator"]

#: werkzeug's access log line for a service-root read
ROOT_READ = re.compile(r'"GET /redfish/v1/? HTTP/1\.[01]"')
SESSION_LOGIN = re.compile(r'"POST /redfish/v1/SessionService/Sessions/? HTTP')


class Emulator:
    """A running emulator: its URL, its systems' paths, its access log."""

    def __init__(self, url: str, log: Path, systems: list[str]) -> None:
        self.url, self.log, self.systems = url, log, systems

    def count(self, pattern: re.Pattern[str]) -> int:
        return len(pattern.findall(self.log.read_text()))


@contextlib.contextmanager
def sushy_emulator(
    workdir: Path, systems: int, *, boot_modes: tuple[str, ...] = ()
) -> Iterator[Emulator]:
    """Start ``sushy-emulator`` with its fake driver serving ``systems``
    systems (all off) and stop it on exit, whatever happens. ``boot_modes``:
    the first systems' firmware boot mode (``UEFI``, the fake driver's
    default, or ``Legacy``: its Boot lists no ``UefiHttp`` target)."""
    exe = Path(sys.executable).with_name("sushy-emulator")
    if not exe.exists():
        pytest.fail("sushy-emulator is not installed (the 'lab' extra installs sushy-tools)")
    fakes = [
        {
            "uuid": str(uuid.UUID(int=i + 1)),
            "name": f"fake-{i}",
            "power_state": "Off",
            "external_notifier": False,
            "nics": [{"mac": f"00:5c:52:31:3a:{i:02x}", "ip": f"172.22.0.{100 + i}"}],
            **({"boot_mode": boot_modes[i]} if i < len(boot_modes) else {}),
        }
        for i in range(systems)
    ]
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "emulator.conf"
    # its own state directory: sushy-tools keeps the fake systems' state in
    # /tmp/sushy-emulator by default, shared by every emulator on the machine,
    # so one run's systems (same UUIDs, another boot mode) leaked into the next
    config.write_text(
        f"SUSHY_EMULATOR_FAKE_DRIVER = True\nSUSHY_EMULATOR_FAKE_SYSTEMS = {fakes!r}\n"
        f"SUSHY_EMULATOR_STATE_DIR = {str(workdir / 'state')!r}\n"
    )
    port = free_port()
    log = workdir / "emulator.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(exe), "--config", str(config), "--interface", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        # Ready when the systems answer (not the root: its reads are counted).
        # 120 s: at load 25 on 2 cores its start-up (Flask, sushy-tools) had
        # printed nothing after 30 s, and two Ironic tests failed on it.
        until = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/redfish/v1/Systems", timeout=2):  # noqa: S310 - http on loopback
                    break
            except OSError:
                if time.monotonic() > until or proc.poll() is not None:
                    pytest.fail(f"sushy-emulator did not start: {log.read_text()[-2000:]}")
                time.sleep(0.2)
        yield Emulator(url, log, [f"/redfish/v1/Systems/{s['uuid']}" for s in fakes])
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
