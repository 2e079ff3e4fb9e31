"""hwlab's shared Redfish service (``RedfishServer.add_service``: 8 machines
as the systems of one service on one port, with a SessionService) driven by
the ``bmaas`` CLI: the same bar as against stock sushy-tools, and the
sessions counted at the server: one login per bmaas process, none left
open when the commands are done. Issue 24."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.hwlab.harness.bench.common import running_lab
from bmaas.hwlab.labspec import generate
from bmaas.hwlab.redfish import RedfishServer
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


@pytest.mark.timeout(600)
def test_the_lab_option_serves_eight_systems_from_one_port(tmp_path: Path) -> None:
    """``hwlab up --redfish-service-size 8`` (``redfish_service_size`` in a lab
    file): the same bar, the inventory naming each node's system."""
    spec = generate(SYSTEMS, protocols="redfish", redfish_service_size=SYSTEMS)
    spec = dataclasses.replace(
        spec, nodes=tuple(dataclasses.replace(n, hardware=QUICK) for n in spec.nodes)
    )
    with running_lab(spec, tmp_path / "lab") as lab:
        ports = {n["ports"]["redfish"] for n in lab.describe()["nodes"].values()}
        assert len(ports) == 1  # one service, one port
        nodes = lab.inventory()["nodes"]
        assert {n["driver_info"]["redfish_system_id"] for n in nodes} == {
            f"/redfish/v1/Systems/{n['name']}" for n in nodes
        }

        def logins() -> int:
            counted = {n["sessions"]["redfish"]["logins"] for n in lab.status()["nodes"].values()}
            assert len(counted) == 1  # every node reports its service's one counter
            return counted.pop()

        run = run_fleet(tmp_path, lab.inventory_path, SYSTEMS)
        assert_shared_service_run(run, SYSTEMS, logins)
