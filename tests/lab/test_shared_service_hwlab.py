"""hwlab's shared Redfish service (``RedfishServer.add_service``: 8 machines
as the systems of one service on one port, with a SessionService) driven by
the ``bmaas`` CLI: the same bar as against stock sushy-tools, and the
sessions counted at the server: one login per bmaas process, none left
open when the commands are done. Issue 24."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes.machine import FakeMachine, Hardware
from hwlab.redfish import RedfishServer
from tests.lab.shared_service import assert_shared_service_run, run_fleet, write_inventory

pytestmark = pytest.mark.lab

SYSTEMS = 8
QUICK = Hardware(power_on_time=0.5, power_off_time=0.3, soft_off_time=0.5, os_boot_time=1.0)


@pytest.mark.timeout(600)
def test_eight_systems_behind_one_hwlab_service(tmp_path: Path) -> None:
    machines = [FakeMachine(f"blade-{i}", QUICK) for i in range(SYSTEMS)]
    with RedfishServer() as server:
        port = server.add_service(machines, username="admin", password="password")
        service = server.bmc(port)
        systems = [f"/redfish/v1/Systems/{m.name}" for m in machines]
        inventory = write_inventory(tmp_path / "inv.yaml", server.url(port), systems)
        run = run_fleet(tmp_path, inventory, SYSTEMS)
        assert_shared_service_run(run, SYSTEMS, lambda: service.logins)
        # sessions overlapped only while two commands ran at once (deploy + sync)
        assert service.peak_sessions <= 2
        assert service.sessions() == []  # every command logged out
        assert all(m.power_state().value == "off" for m in machines)
