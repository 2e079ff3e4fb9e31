"""Stock ``sushy-emulator`` (sushy-tools' fake driver, no libvirt) serving 8
systems on one port, driven by the ``bmaas`` CLI: 8 concurrent deploys are
8/8 active at the first try (sushy-tools keeps a one-time boot override as
persistent: a quirk, not a BootFailure), power on/off --all never fails, a
sync during the deploys never fails a read, and each bmaas process reads the
service root once (one client, one session per service). Issue 24."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hwlab.proxy.stock import free_port
from tests.lab.shared_service import assert_shared_service_run, run_fleet, write_inventory

pytestmark = pytest.mark.lab

SYSTEMS = 8
#: werkzeug's access log line for a service-root read
ROOT_READ = re.compile(r'"GET /redfish/v1/? HTTP/1\.[01]"')
SESSION_LOGIN = re.compile(r'"POST /redfish/v1/SessionService/Sessions/? HTTP')


class Emulator:
    def __init__(self, url: str, log: Path, systems: list[str]) -> None:
        self.url, self.log, self.systems = url, log, systems

    def count(self, pattern: re.Pattern[str]) -> int:
        return len(pattern.findall(self.log.read_text()))


@pytest.fixture
def sushy_emulator(tmp_path: Path) -> Iterator[Emulator]:
    exe = Path(sys.executable).with_name("sushy-emulator")
    if not exe.exists():
        pytest.fail("sushy-emulator is not installed (the 'lab' extra installs sushy-tools)")
    systems = [
        {
            "uuid": str(uuid.UUID(int=i + 1)),
            "name": f"fake-{i}",
            "power_state": "Off",
            "external_notifier": False,
            "nics": [{"mac": f"00:5c:52:31:3a:{i:02x}", "ip": f"172.22.0.{100 + i}"}],
        }
        for i in range(SYSTEMS)
    ]
    config = tmp_path / "emulator.conf"
    config.write_text(
        f"SUSHY_EMULATOR_FAKE_DRIVER = True\nSUSHY_EMULATOR_FAKE_SYSTEMS = {systems!r}\n"
    )
    port = free_port()
    log = tmp_path / "emulator.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(exe), "--config", str(config), "--interface", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        # Ready when the systems answer (not the root: its reads are counted).
        until = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/redfish/v1/Systems", timeout=2):  # noqa: S310 - http on loopback
                    break
            except OSError:
                if time.monotonic() > until or proc.poll() is not None:
                    pytest.fail(f"sushy-emulator did not start: {log.read_text()[-2000:]}")
                time.sleep(0.2)
        yield Emulator(url, log, [f"/redfish/v1/Systems/{s['uuid']}" for s in systems])
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.mark.timeout(600)
def test_eight_systems_behind_stock_sushy_tools(tmp_path: Path, sushy_emulator: Emulator) -> None:
    inventory = write_inventory(tmp_path / "inv.yaml", sushy_emulator.url, sushy_emulator.systems)
    run = run_fleet(tmp_path, inventory, SYSTEMS)
    assert_shared_service_run(run, SYSTEMS, lambda: sushy_emulator.count(ROOT_READ))
    # sushy-tools has no SessionService: sushy's "auto" falls back to basic
    # auth, so no session at all was opened (with one it would be one per process)
    assert sushy_emulator.count(SESSION_LOGIN) == 0
