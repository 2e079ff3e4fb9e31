"""Four bmaas-redfish nodes behind one stock sushy-tools endpoint (its fake
driver: one Redfish service, eight systems) deployed at once through a real
Ironic: 4/4 active, and Ironic's periodic power sync, which reads them all
the while, never fails a read (issue 24: before, 1/4 active, the rest
"[bmaas bmc_busy retry=same_node] ... one session is in use")."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from pathlib import Path
from typing import Any

import pytest

from bmaas.hwlab.harness import ironic as harness
from tests.ironic.conftest import SETTINGS as SESSION_SETTINGS
from tests.sushy_emulator import ROOT_READ, Emulator, sushy_emulator

NODES = 4
#: sushy-tools' fake driver lands a power change 1-11 s after the request
#: (random): this Ironic's operation budget fits that, as a stock Ironic's
#: power_state_change_timeout (30 s) does; the session Ironic's is shorter
SETTINGS = dataclasses.replace(
    SESSION_SETTINGS,
    sync_interval=3,
    power_timeout=30,
    bmaas_operation_deadline=30.0,
    bmaas_sync_deadline=8.0,
)
#: Ironic's conductor logs this for every failed read of its power sync
SYNC_FAILURE = re.compile(r"During sync_power_state, could not get power state for node (\S+)")


@pytest.mark.timeout(900)
def test_four_deploys_sharing_one_sushy_tools_endpoint(tmp_path: Path) -> None:
    ironic = harness.IronicService(tmp_path / "ironic", SETTINGS)
    with contextlib.ExitStack() as stack:
        stack.callback(ironic.stop)
        ironic.start(timeout=180)
        baremetal = ironic.connect()
        stack.callback(baremetal.close)
        emulator = stack.enter_context(sushy_emulator(tmp_path / "emulator", 8))
        _deploy_four(ironic, baremetal, emulator)


def _deploy_four(ironic: harness.IronicService, baremetal: Any, emulator: Emulator) -> None:
    nodes = []
    for i, system in enumerate(emulator.systems[:NODES]):
        entry = {
            "name": f"shared-{i}",
            "driver_info": {
                "redfish_address": emulator.url,
                "redfish_system_id": system,
                "redfish_username": "admin",
                "redfish_password": "password",
            },
        }
        nodes.append(
            harness.enroll(
                baremetal,
                entry,
                driver="bmaas-redfish",
                kernel=ironic.kernel,
                ramdisk=ironic.ramdisk,
            )
        )
    log_before = ironic.log_path.read_text()
    for node in nodes:
        result = baremetal.baremetal.validate_node(node, required=None)
        assert result["power"].result, result["power"].reason
    for node in nodes:  # all four at once
        baremetal.baremetal.set_node_provision_state(node, "active")
    done = [
        harness.wait_for_provision(baremetal, node, {"active", "deploy failed"}, timeout=240)
        for node in nodes
    ]
    assert [n.provision_state for n in done] == ["active"] * NODES, [n.last_error for n in done]
    # at least two more sync passes over the deployed nodes
    time.sleep(SETTINGS.sync_interval * 2 + 1)
    new_log = ironic.log_path.read_text()[len(log_before) :]
    ours = {n.id for n in nodes} | {n.name for n in nodes}
    failed_reads = [m for m in SYNC_FAILURE.findall(new_log) if m.strip(".,") in ours]
    assert failed_reads == []
    for node in nodes:
        fresh = baremetal.baremetal.get_node(node.id)
        assert not fresh.is_maintenance, f"{fresh.name}: {fresh.maintenance_reason}"
        assert fresh.power_state == "power on"
    # one conductor process: one client for the whole service
    assert emulator.count(ROOT_READ) == 1
    for node in nodes:
        baremetal.baremetal.set_node_provision_state(node, "deleted")
    for node in nodes:
        harness.wait_for_provision(baremetal, node, {"available"}, timeout=240)
