"""A real Ironic deploys the VM lab's two VMs by virtual media (issue 38):
``bmaas-redfish`` with ``bmaas-virtual-media`` on one VM, stock ``redfish``
with ``redfish-virtual-media`` on the other, the same Ironic, the same stock
sushy-tools (libvirt driver) in front. A ``ramdisk`` deploy of the lab's
``via=vmedia`` ISO as ``boot_iso``: Ironic publishes it on its web server,
sushy-tools downloads it into libvirt's pool and attaches it, SeaBIOS boots
it. Each node must reach ``active`` *and* its VM print its marker, booted
once (its own count). Times side by side: 'active' asked -> active, and ->
the marker.

Opt-in (CPU: an Ironic plus two TCG boots): ``BMAAS_VM_IRONIC=1`` and the
test Ironic (``bash scripts/ironic-env.sh``), e.g. ``bash scripts/vm-ironic.sh``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import http.server
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bmaas.hwlab.harness import ironic as harness
from bmaas.hwlab.vm import domain
from bmaas.hwlab.vm.lab import VmLab
from bmaas.yamlsrc import load_text
from tests.vm.support import booted_once, markers, seen

pytestmark = [
    pytest.mark.vm,
    pytest.mark.skipif(
        os.environ.get("BMAAS_VM_IRONIC") != "1",
        reason="opt-in: BMAAS_VM_IRONIC=1 (bash scripts/vm-ironic.sh)",
    ),
    # openstacksdk's own deprecations, as tests/ironic/conftest.py ignores them
    pytest.mark.filterwarnings("ignore::openstack.warnings.OpenStackWarning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK50Warning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK60Warning"),
]

#: (hardware type, boot interface): stock first, bmaas's beside it
CASES = (
    ("redfish", "redfish-virtual-media"),
    ("bmaas-redfish", "bmaas-virtual-media"),
)
SETTINGS = harness.IronicSettings(
    sync_interval=10,
    sync_max_retries=2,
    power_timeout=60,
    bmaas_call_deadline=10.0,
    bmaas_operation_deadline=60.0,
    bmaas_sync_deadline=10.0,
    extra={"bmaas": {"events": "false"}},
)


class _Served:
    """The conductor's ``http_root`` on a free loopback port (sushy-tools
    downloads the published ISO from here, as a BMC does)."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        handler = functools.partial(_Quiet, directory=str(root))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@dataclasses.dataclass
class Env:
    service: harness.IronicService
    conn: Any
    boot_iso: Path


@pytest.fixture(scope="module")
def vm_ironic(vm_lab: VmLab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    workdir = tmp_path_factory.mktemp("vm-ironic")
    with contextlib.ExitStack() as stack:
        served = _Served(workdir / "httpboot")
        stack.callback(served.stop)
        settings = dataclasses.replace(
            SETTINGS,
            extra={
                **SETTINGS.extra,
                "DEFAULT": {"enabled_boot_interfaces": ",".join(["pxe", *(b for _, b in CASES)])},
                "deploy": {"http_url": served.url},
            },
        )
        service = harness.IronicService(workdir, settings)
        stack.callback(service.stop)
        service.start(timeout=240)
        conn = service.connect()
        stack.callback(conn.close)
        boot_iso = workdir / "images" / "boot.iso"
        boot_iso.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(vm_lab.vmedia_iso, boot_iso)
        yield Env(service, conn, boot_iso)


def _enroll(env: Env, entry: dict[str, Any], driver: str, boot: str) -> Any:
    node = harness.enroll(
        env.conn,
        entry,
        driver=driver,
        name=f"{entry['name']}-{driver}",
        kernel=env.service.kernel,
        ramdisk=env.service.ramdisk,
    )
    return env.conn.baremetal.update_node(
        node,
        boot_interface=boot,
        # the lab's ISO is isolinux: SeaBIOS, not UEFI (Ironic's default)
        properties={**node.properties, "capabilities": "boot_mode:bios"},
        instance_info={**node.instance_info, "boot_iso": f"file://{env.boot_iso}"},
    )


@pytest.mark.timeout(720)  # two nodes' 300 s waits, enrolment; Ironic's start is set-up
def test_ironic_takes_both_vms_active_by_virtual_media_each_marker_seen(
    vm_lab: VmLab, vm_ironic: Env, tmp_path: Path
) -> None:
    env = vm_ironic
    doc = load_text((vm_lab.state_dir / "inventory.yaml").read_text(), source="inventory.yaml")
    entries = {n["name"]: n for n in doc["nodes"]}
    # both VMs off: a cold start takes what sushy-tools put in the definition
    for name in vm_lab.domains:
        domain.virsh("destroy", vm_lab.domain(name), check=False)
    figures: dict[str, dict[str, float]] = {}
    for (driver, boot), name in zip(CASES, vm_lab.domains, strict=True):
        node = _enroll(env, entries[name], driver, boot)
        before = seen(vm_lab)
        started = time.monotonic()
        env.conn.baremetal.set_node_provision_state(node, "active")
        done = harness.wait_for_provision(
            env.conn, node, {"active", "deploy failed"}, timeout=300, poll=0.5
        )
        active = time.monotonic() - started
        assert done.provision_state == "active", (
            f"{driver}/{boot}: {harness.failure_text(env.conn, node)}"
        )
        end = time.monotonic() + 240  # bounded: a TCG boot is 10-40 s
        while len(markers(vm_lab, name)) == before[name] and time.monotonic() < end:
            time.sleep(0.5)
        marker = time.monotonic() - started
        booted_once(vm_lab, name, before, "vmedia")
        figures[f"{driver}/{boot}"] = {"active": round(active, 1), "marker": round(marker, 1)}
    print(f"\nIronic on the VM lab, seconds from 'active' asked: {figures}")
