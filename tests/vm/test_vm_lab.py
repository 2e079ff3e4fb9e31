"""Deploys that really boot: two libvirt VMs (TCG) behind stock sushy-tools and
vbmc, with hwlab's proxies in front. Each VM prints ``BMAAS-BOOTED via=<medium>``
on its serial console once its firmware has booted something; bmaas waits for
that line (``--ready-log``/``--ready-pattern``), never for a power flag."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from bmaas.hwlab.vm.lab import VmLab, down, up
from bmaas.serialmark import SerialMarker
from bmaas.yamlsrc import load_text

pytestmark = pytest.mark.vm

#: the image is built once per user, outside the test sandbox's cache
CACHE = Path(os.path.expanduser("~")) / ".cache" / "hwlab" / "vm"
VMEDIA = "BMAAS-BOOTED via=vmedia"
CDROM = "BMAAS-BOOTED via=cdrom"


@pytest.fixture(scope="module")
def vm_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VmLab]:
    os.environ["HWLAB_VM_CACHE_DIR"] = str(CACHE)
    state = tmp_path_factory.mktemp("vm") / "lab"
    lab = up(state, count=2, proxies=True, driver="redfish")
    try:
        yield lab
    finally:
        down(state)
        assert not (state / "vm.json").exists()


@pytest.fixture(scope="module")
def image_url(vm_lab: VmLab) -> Iterator[str]:
    """The vmedia ISO served on 127.0.0.1 (sushy-tools fetches it by URL)."""
    iso = Path(vm_lab.vmedia_iso)
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(iso.parent))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{iso.name}"
    finally:
        server.shutdown()
        server.server_close()


def bmaas(home: Path, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    """The bmaas CLI with a store of its own under ``home``."""
    env = {**os.environ, "XDG_DATA_HOME": str(home / "data"), "XDG_STATE_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-c", "from bmaas.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def enroll(home: Path, lab: VmLab, driver: str) -> None:
    """The lab's inventory, every node enrolled with ``driver``."""
    doc = load_text((lab.state_dir / "inventory.yaml").read_text(), source="inventory.yaml")
    for node in doc["nodes"]:
        node["driver"] = driver
    path = home / "inventory.json"
    path.write_text(json.dumps(doc))
    done = bmaas(home, "enroll", str(path))
    assert done.returncode == 0, done.stderr


def deploy(home: Path, lab: VmLab, *args: str) -> dict[str, Any]:
    done = bmaas(home, "deploy", "--json", "--ready-log", lab.serial_template, *args, timeout=600)
    assert done.returncode in (0, 1), done.stderr
    return dict(json.loads(done.stdout))


def markers(lab: VmLab, name: str) -> list[str]:
    path = lab.serial_log(name)
    lines = path.read_text(errors="replace").splitlines() if path.exists() else []
    return [line for line in lines if line.startswith("BMAAS-BOOTED")]


def test_ipmi_one_time_cdrom_override_is_consumed_by_the_firmware(
    vm_lab: VmLab, tmp_path: Path
) -> None:
    """vbmc behind the IPMI proxy: ``boot-device set cdrom`` (one time) and
    ``power on`` -> SeaBIOS boots the CD drive's ISO, which says so."""
    enroll(tmp_path, vm_lab, "ipmi")
    node = vm_lab.domains[1]
    seen = SerialMarker(vm_lab.serial_template, CDROM)
    for args in (("boot-device", "set", node, "-d", "cdrom"), ("power", "on", node)):
        done = bmaas(tmp_path, *args, "--deadline", "60")
        assert done.returncode == 0, done.stderr
    limit = time.monotonic() + 240  # a bounded wait; a boot is ~15 s on a quiet machine
    while not seen(node, None) and time.monotonic() < limit:
        time.sleep(1)
    try:
        assert seen(node, None), f"{node} never printed {CDROM!r}: {markers(vm_lab, node)}"
        assert not SerialMarker(vm_lab.serial_template, "via=vmedia")(node, None)
    finally:
        assert bmaas(tmp_path, "power", "off", node, "--deadline", "60").returncode == 0


def test_vmedia_deploy_is_active_only_when_both_vms_booted_the_image(
    vm_lab: VmLab, image_url: str, tmp_path: Path
) -> None:
    """Redfish virtual media through the proxies: sushy-tools fetches the ISO
    from the URL into libvirt's pool and attaches it; the VM's BIOS boots it."""
    enroll(tmp_path, vm_lab, "redfish")
    before = {n: len(markers(vm_lab, n)) for n in vm_lab.domains}
    result = deploy(
        tmp_path,
        vm_lab,
        "--count",
        "2",
        "--image",
        image_url,
        "--ready-pattern",
        VMEDIA,
        "--deadline",
        "400",
    )
    assert result["ok"] == 2, result
    assert sorted(r["node"] for r in result["requests"]) == vm_lab.domains
    for name in vm_lab.domains:
        new = markers(vm_lab, name)[before[name] :]
        assert any(line.startswith(VMEDIA) for line in new), (name, new)


def test_a_hang_on_power_set_ends_typed_and_the_request_moves_to_the_healthy_vm(
    vm_lab: VmLab, image_url: str, tmp_path: Path
) -> None:
    """A hang on ComputerSystem.Reset at the first VM's Redfish proxy: that
    attempt ends in a typed timeout within the deploy's deadline, and the one
    request is deployed on the second VM, which really booted the image."""
    enroll(tmp_path, vm_lab, "redfish")
    sick, healthy = vm_lab.domains
    add = subprocess.run(
        [
            sys.executable,
            "-c",
            "from bmaas.hwlab.cli import main; main()",
            "fault",
            "add",
            f"{sick}-redfish",
            "hang",
            "operation=power.set",
            "--state-dir",
            str(vm_lab.lab_dir),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert add.returncode == 0, add.stderr
    before = len(markers(vm_lab, healthy))
    deadline = 300
    try:
        result = deploy(
            tmp_path,
            vm_lab,
            "--count",
            "1",
            "--image",
            image_url,
            "--ready-pattern",
            VMEDIA,
            "--deadline",
            str(deadline),
            "--bmc-timeout",
            "10",
        )
    finally:
        subprocess.run(
            [
                sys.executable,
                "-c",
                "from bmaas.hwlab.cli import main; main()",
                "fault",
                "clear",
                "--all",
                "--state-dir",
                str(vm_lab.lab_dir),
            ],
            capture_output=True,
            timeout=60,
            check=False,
        )
    (request,) = result["requests"]
    assert request["ok"], request
    assert request["node"] == healthy
    tried = [a["node"] for a in request["attempt_details"]]
    assert tried == [sick, healthy], request["attempt_details"]
    first = request["attempt_details"][0]
    assert first["fault_class"] == "BMCTimeout", first
    assert result["elapsed"] < deadline
    assert any(line.startswith(VMEDIA) for line in markers(vm_lab, healthy)[before:])
