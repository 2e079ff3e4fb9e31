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

from pathlib import Path

import pytest

from bmaas.deadline import Deadline
from bmaas.hwlab.vm import domain
from bmaas.hwlab.vm.lab import VmLab, down
from tests.vm.support import (
    VMEDIA,
    booted_once,
    deploy_one,
    markers,
    never_booted,
    redfish_driver,
)

pytestmark = pytest.mark.vm


@pytest.mark.timeout(420)  # its deploy's --deadline and the commands around it
def test_a_uefi_secure_boot_vm_boots_the_signed_image_by_redfish_virtual_media(
    uefi_lab: VmLab, uefi_url: str, tmp_path: Path
) -> None:
    (name,) = uefi_lab.domains
    assert redfish_driver(uefi_lab).get_boot_mode(deadline=Deadline.after(30)) == "uefi"
    result, before = deploy_one(
        tmp_path, uefi_lab, "redfish", "--image", uefi_url, "--ready-pattern", VMEDIA,
        "--deadline", "300",
    )  # fmt: skip
    assert result["ok"] == 1, result
    booted_once(uefi_lab, name, before, "vmedia")
    last = markers(uefi_lab, name)[-1]
    assert last.endswith("fw=uefi sb=on"), last


#: OVMF's own word, on the serial console, that it found nothing to boot
NOTHING_TO_BOOT = "No bootable option or device was found"


@pytest.mark.timeout(240)  # its deploy's --deadline and the commands around it
def test_a_bios_image_on_a_uefi_machine_ends_a_typed_boot_failure(
    uefi_lab: VmLab, uefi_url: str, tmp_path: Path
) -> None:
    """The BIOS lab's vmedia ISO (isolinux, no EFI entry) on the UEFI VM: the
    firmware finds nothing to boot and says so on the console (OVMF's
    ``BdsDxe: No bootable option or device was found.``), the guest prints
    no marker, and with that line as ``--fail-pattern`` the deploy ends a
    ``BootFailure`` quoting it at its ready step -- not by the deadline
    (90 s: three times what the signed image takes to print its marker
    here), which only bounds it."""
    (name,) = uefi_lab.domains
    bios_url = uefi_url.rsplit("/", 1)[0] + "/bmaas-vmedia.iso"
    result, before = deploy_one(
        tmp_path, uefi_lab, "redfish", "--image", bios_url, "--ready-pattern", VMEDIA,
        "--fail-pattern", NOTHING_TO_BOOT, "--deadline", "90",
    )  # fmt: skip
    assert result["ok"] == 0, result
    (request,) = result["requests"]
    assert request["faults"] == ["boot_failure"], request
    (attempt,) = request["attempt_details"]
    assert "will not be ready: its serial log shows" in attempt["message"], attempt
    assert NOTHING_TO_BOOT in attempt["message"], attempt
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
