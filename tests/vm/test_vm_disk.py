"""A deploy that writes the disk, then a boot from it (issue 49): the lab's
writer ISO (hwlab/vm/image.py) boots, writes the user image to the VM's disk,
says ``BMAAS-WROTE disk ... sha256=...`` and powers the VM off;
``bmaas deploy --to-disk`` then ejects it, sets disk boot (persistent) and
powers the VM on, and is active only once the VM printed ``via=disk`` -- the
user image, booted by the firmware from the disk: SeaBIOS (the BIOS lab), or
OVMF with Secure Boot on (the UEFI lab: the user image is a disk whose EFI
system partition holds the signed UKI, hwlab/vm/uefi.py). Witnessed on the
machine: two markers, one boot each by the guest's own count, each saying
the firmware and Secure Boot state, the digest the guest printed equal to
the image's, and the disk file starting with the image.

Each test leaves the VMs off with blank disks, their boot counts kept (what
the other VM tests expect: nothing boots until a BMC says what, and each
boot counts one more)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bmaas.hwlab.vm import domain
from bmaas.hwlab.vm.image import WROTE, BootImage, build_image, parse_marker
from bmaas.hwlab.vm.lab import VmLab, insert_cd
from tests.vm.support import bmaas, clear_faults, deploy, enroll, markers, power_off_all, seen

pytestmark = pytest.mark.vm

DISK = "BMAAS-BOOTED via=disk"


#: what each firmware's markers say of it and of Secure Boot
SAYS = {"bios": ("bios", "off"), "uefi-secure": ("uefi", "on")}


@pytest.fixture
def firmware() -> str:
    """The lab's firmware (a test parametrized on ``firmware`` overrides it)."""
    return "bios"


@pytest.fixture
def lab(firmware: str, request: pytest.FixtureRequest) -> VmLab:
    """The BIOS lab, or the UEFI one (Secure Boot on) for ``uefi-secure``."""
    return request.getfixturevalue("vm_lab" if firmware == "bios" else "uefi_lab")


@pytest.fixture
def image(lab: VmLab) -> BootImage:
    return build_image()  # the lab's own, from the cache `up` filled


@pytest.fixture
def blank_after(lab: VmLab, tmp_path: Path) -> Iterator[None]:
    yield
    power_off_all(tmp_path, lab)
    for name in lab.domains:
        domain.wipe_disk(lab.state_dir / "disks" / f"{name}.img")


def wrote(lab: VmLab, name: str) -> list[str]:
    path = lab.serial_log(name)
    return [ln for ln in path.read_text(errors="replace").splitlines() if ln.startswith(WROTE)]


def written_then_booted(
    lab: VmLab, name: str, before: dict[str, int], image: BootImage, firmware: str
) -> None:
    """``name`` booted the writer, wrote exactly the user image, then booted
    that image from its disk (``via=disk``): one boot each, by its own count,
    each under ``firmware`` (and Secure Boot on where it verifies)."""
    new = [parse_marker(line) for line in markers(lab, name)[before[name] :]]
    assert [m["via"] for m in new if m] == ["vmedia", "disk"], new  # the writer says vmedia
    assert [(m["fw"], m["sb"]) for m in new if m] == [SAYS[firmware]] * 2, new
    counts = [m["boot"] for m in new if m]
    assert isinstance(counts[0], int)
    assert counts[1] == counts[0] + 1, new
    user = image.user_image(firmware).read_bytes()
    line = wrote(lab, name)[-1]
    assert re.search(rf"bytes={len(user)} sha256={hashlib.sha256(user).hexdigest()}$", line)
    with (lab.state_dir / "disks" / f"{name}.img").open("rb") as disk:
        assert disk.read(len(user)) == user


def deployed_to_disk(
    lab: VmLab,
    image: BootImage,
    home: Path,
    driver: str,
    boot: str,
    *image_args: str,
    firmware: str = "bios",
) -> str:
    """``bmaas deploy --to-disk`` of one request by ``driver``, the VMs off
    first: active, booted by ``boot``, the image written and booted from
    disk (:func:`written_then_booted`) under ``firmware``. The node's name."""
    enroll(home, lab, driver)
    clear_faults(lab)
    power_off_all(home, lab)
    before = seen(lab)
    result = deploy(
        home, lab, "--count", "1", "--to-disk", *image_args, "--ready-pattern", DISK,
        "--deadline", "400", "--max-attempts", "1",
    )  # fmt: skip
    assert result["ok"] == 1, result
    (request,) = result["requests"]
    assert request["boot"] == boot, request
    written_then_booted(lab, request["node"], before, image, firmware)
    return str(request["node"])


@pytest.mark.timeout(520)  # its deploy's --deadline and the commands around it
@pytest.mark.parametrize("firmware", ["bios", "uefi-secure"])
def test_redfish_deploy_to_disk_writes_the_image_and_the_vm_boots_it_from_disk(
    lab: VmLab, firmware: str, image_url: str, image: BootImage, tmp_path: Path, blank_after: None
) -> None:
    """By virtual media through the Redfish proxy and stock sushy-tools; on
    the UEFI lab the writer and the user image are the signed UEFI ones, and
    OVMF verifies both (``sb=on`` on both markers)."""
    writer_url = f"{image_url.rsplit('/', 1)[0]}/{image.writer(firmware).name}"
    name = deployed_to_disk(
        lab, image, tmp_path, "redfish", "vmedia", "--image", writer_url, firmware=firmware
    )
    done = bmaas(tmp_path, "boot-device", "get", name, "--json", "--deadline", "60")
    assert done.returncode == 0, done.stderr
    assert '"device": "disk"' in done.stdout


@pytest.mark.timeout(520)  # its deploy's --deadline and the commands around it
def test_ipmi_deploy_to_disk_boots_the_writer_cd_then_the_disk(
    lab: VmLab, image: BootImage, tmp_path: Path, blank_after: None
) -> None:
    """By IPMI through the proxy and stock vbmc: no virtual media, so the lab
    puts the writer in the CD drives (``hwlab vm cd``), the node's
    ``deploy_boot_device: cdrom`` boots it once, and the disk next."""
    insert_cd(lab.state_dir, image.writer_iso)
    try:
        deployed_to_disk(lab, image, tmp_path, "ipmi", "cdrom")
    finally:
        power_off_all(tmp_path, lab)
        insert_cd(lab.state_dir, Path(image.iso))
