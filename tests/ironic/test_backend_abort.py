"""The retry wrapper gives up on a node whose deploy waits for its agent
(issue 35), through a real Ironic: the release aborts the deploy from ``wait
call-back`` (API 1.110, Ironic 35.0+) and leaves the node ``deploy failed``
and in maintenance -- no tear-down, no cleaning -- where it used to tear
it down.

This module starts an Ironic of its own with the ``direct`` deploy interface
(an agent that never calls back: hwlab's machines run none). Automated
cleaning is off here (it would boot the same absent agent on ``provide``), so
a tear-down would take the node back to ``available``: it stays ``deploy
failed``."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.drivers.ironic_backend import Api, IronicBackend
from bmaas.drivers.ironic_backend.backend import ClaimState
from bmaas.faults import BMCTimeout
from bmaas.hwlab.harness import ironic as harness
from bmaas.hwlab.lab import Lab
from bmaas.policy import policy_for
from bmaas.provision.records import Claim, Request
from tests.ironic.conftest import _NEXT
from tests.ironic.conftest import SETTINGS as SESSION_SETTINGS
from tests.ironic.test_ironic_vmedia import _Served

SETTINGS = dataclasses.replace(
    SESSION_SETTINGS,
    extra={"DEFAULT": {"enabled_deploy_interfaces": "ramdisk,direct"}},
)


@pytest.fixture(scope="module")
def direct_ironic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    workdir = tmp_path_factory.mktemp("ironic-abort")
    with contextlib.ExitStack() as stack:
        # the disk image over HTTP: Ironic 39 fails a file:// image_source at
        # deploy ("'str' object has no attribute 'url'", images.is_source_a_path)
        served = _Served(workdir / "served")
        stack.callback(served.stop)
        service = harness.IronicService(workdir / "ironic", SETTINGS)
        stack.callback(service.stop)
        service.start(timeout=180)
        conn = service.connect()
        stack.callback(conn.close)
        yield service, conn, served


def _waiting_for_its_agent(service: Any, conn: Any, served: Any, lab: Lab) -> tuple[Any, Any]:
    """A bmaas-redfish node allocated and deployed with ``direct``, in
    ``wait call-back``; (node, allocation)."""
    entry = lab.inventory()["nodes"][next(_NEXT)]
    node = harness.enroll(
        conn,
        entry,
        driver="bmaas-redfish",
        name=f"abort-{entry['name']}",
        kernel=service.kernel,
        ramdisk=service.ramdisk,
        provide=False,
    )
    conn.baremetal.update_node(node, deploy_interface="direct")
    conn.baremetal.set_node_provision_state(node, "manage", wait=True, timeout=120)
    conn.baremetal.set_node_provision_state(node, "provide", wait=True, timeout=120)
    image = service.workdir.parent / "served" / "disk.img"
    image.write_bytes(b"bmaas lab disk image\n")
    node = conn.baremetal.update_node(
        node,
        instance_info={
            "image_source": f"{served.url}/disk.img",
            "image_os_hash_algo": "sha256",
            "image_os_hash_value": hashlib.sha256(image.read_bytes()).hexdigest(),
        },
    )
    allocation = conn.baremetal.create_allocation(
        resource_class=node.resource_class, candidate_nodes=[node.id]
    )
    conn.baremetal.wait_for_allocation(allocation, timeout=60)
    conn.baremetal.set_node_provision_state(node, "active")
    end = time.monotonic() + 120
    while True:
        node = conn.baremetal.get_node(node.id)
        if node.provision_state == "wait call-back":
            return node, allocation
        assert node.provision_state in ("deploying", "available"), (
            f"{node.provision_state}: {node.last_error}"
        )
        assert time.monotonic() < end, f"still {node.provision_state} after 120 s"
        time.sleep(0.25)


@pytest.mark.timeout(300)
def test_a_fenced_node_waiting_for_its_agent_is_aborted_not_cleaned(
    direct_ironic: Any, ironic_lab: Lab
) -> None:
    service, conn, served = direct_ironic
    node, allocation = _waiting_for_its_agent(service, conn, served, ironic_lab)
    backend = IronicBackend(Api(conn), poll=0.25)
    job = backend.open(Request("r-abort", resource_class=node.resource_class))
    claim = Claim(job, node.name, 1, ClaimState(allocation.id, node.id, None))
    fault = BMCTimeout("deploy still wait call-back at the request's deadline", node=node.name)
    assert policy_for(fault).fences
    backend.release(claim, fault, policy_for(fault), deadline=Deadline.after(60))

    after = conn.baremetal.get_node(node.id)
    assert after.provision_state == "deploy failed", after.last_error
    assert "aborted" in (after.last_error or ""), after.last_error
    assert after.is_maintenance
    assert after.maintenance_reason.startswith("bmaas: r-abort attempt 1: bmc_timeout")
    assert after.allocation_id is None  # the allocation is given back all the same
    assert backend.api.calls["node.abort"] == 1
    assert "node.set_provision_state" not in backend.api.calls  # no tear-down asked
    time.sleep(2 * SETTINGS.sync_interval)  # nothing runs on it later either
    later = conn.baremetal.get_node(node.id)
    assert later.provision_state == "deploy failed"
    assert later.is_maintenance
