"""UEFI VMs with Secure Boot on, beside the BIOS lab (issue 49): a second VM
lab (its own state dir, domains, emulators and proxies) whose VM boots OVMF
with Debian's snakeoil key enrolled. The lab's UEFI image is a unified kernel
image signed with that key (hwlab/vm/uefi.py), so the firmware verifies it;
the guest says ``fw=uefi sb=on`` on its marker line. Witnessed on the machine:

- a deploy by Redfish virtual media (stock sushy-tools, on a q35 domain whose
  drives are SATA) boots the signed image once, Secure Boot on, and the
  system reads ``UEFI`` as its boot mode through the proxy;
- the BIOS lab's image (isolinux only) on the UEFI machine does not boot: the
  deploy ends a typed ``BootFailure`` within its deadline and the guest
  printed nothing;
- the two labs run side by side, and taking the UEFI lab down leaves every
  domain of the BIOS lab defined."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bmaas.deadline import Deadline
from bmaas.driver_info import DriverInfo
from bmaas.drivers.redfish.driver import RedfishDriver
from bmaas.hwlab.vm import domain
from bmaas.hwlab.vm.lab import VmLab, down, up
from bmaas.yamlsrc import load_text
from tests.vm.support import (
    CACHE,
    VMEDIA,
    booted_once,
    deploy,
    enroll,
    markers,
    never_booted,
    power_off_all,
    seen,
)

pytestmark = pytest.mark.vm


@pytest.fixture(scope="module")
def uefi_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VmLab]:
    os.environ["HWLAB_VM_CACHE_DIR"] = str(CACHE)
    state = tmp_path_factory.mktemp("vm-uefi") / "lab"
    lab = up(state, count=1, proxies=True, driver="redfish", firmware="uefi-secure")
    try:
        yield lab
    finally:
        down(state)


@pytest.fixture(scope="module")
def uefi_url(uefi_lab: VmLab) -> Iterator[str]:
    """The UEFI vmedia ISO served on 127.0.0.1; its folder (the image cache)
    holds the BIOS one too."""
    iso = Path(uefi_lab.vmedia_iso)
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(iso.parent))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{iso.name}"
    finally:
        server.shutdown()
        server.server_close()


def redfish_driver(lab: VmLab) -> RedfishDriver:
    doc = load_text((lab.state_dir / "inventory.yaml").read_text(), source="inventory.yaml")
    (node,) = doc["nodes"]
    return RedfishDriver(node["name"], DriverInfo.parse(node["driver_info"]))


@pytest.mark.timeout(420)  # its deploy's --deadline and the commands around it
def test_a_uefi_secure_boot_vm_boots_the_signed_image_by_redfish_virtual_media(
    uefi_lab: VmLab, uefi_url: str, tmp_path: Path
) -> None:
    (name,) = uefi_lab.domains
    assert redfish_driver(uefi_lab).get_boot_mode(deadline=Deadline.after(30)) == "uefi"
    enroll(tmp_path, uefi_lab, "redfish")
    power_off_all(tmp_path, uefi_lab)
    before = seen(uefi_lab)
    result = deploy(
        tmp_path, uefi_lab, "--count", "1", "--image", uefi_url,
        "--ready-pattern", VMEDIA, "--deadline", "300",
    )  # fmt: skip
    assert result["ok"] == 1, result
    booted_once(uefi_lab, name, before, "vmedia")
    last = markers(uefi_lab, name)[-1]
    assert last.endswith("fw=uefi sb=on"), last


@pytest.mark.timeout(240)  # its deploy's --deadline and the commands around it
def test_a_bios_image_on_a_uefi_machine_ends_a_typed_boot_failure(
    uefi_lab: VmLab, uefi_url: str, tmp_path: Path
) -> None:
    """The BIOS lab's vmedia ISO (isolinux, no EFI entry) on the UEFI VM: the
    firmware finds nothing to boot, the guest prints nothing, and the deploy
    ends a ``BootFailure`` (its ready step: no marker) by its deadline (90 s:
    three times what the signed image takes to print its marker here)."""
    (name,) = uefi_lab.domains
    bios_url = uefi_url.rsplit("/", 1)[0] + "/bmaas-vmedia.iso"
    enroll(tmp_path, uefi_lab, "redfish")
    power_off_all(tmp_path, uefi_lab)
    before = seen(uefi_lab)
    result = deploy(
        tmp_path, uefi_lab, "--count", "1", "--image", bios_url, "--ready-pattern", VMEDIA,
        "--deadline", "90", "--max-attempts", "1",
    )  # fmt: skip
    assert result["ok"] == 0, result
    (request,) = result["requests"]
    assert request["faults"] == ["boot_failure"], request
    never_booted(uefi_lab, name, before)


def test_two_labs_side_by_side_and_one_down_leaves_the_other(
    vm_lab: VmLab, uefi_lab: VmLab
) -> None:
    ours = [vm_lab.domain(n) for n in vm_lab.domains]
    theirs = [uefi_lab.domain(n) for n in uefi_lab.domains]
    listed = domain.virsh("list", "--all", "--name").split()
    assert set(ours + theirs) <= set(listed), listed
    down(uefi_lab.state_dir)
    listed = domain.virsh("list", "--all", "--name").split()
    assert set(ours) <= set(listed), listed
    assert not set(theirs) & set(listed), listed
