"""The VM lab's boot image, without booting anything: the guest's boot
counter (run by busybox on a file standing in for the disk), the marker's
fields, the initramfs' modules, the kernel package read as one stream, and
the CD drive put back where sushy-tools' virtual media took it."""

from __future__ import annotations

import gzip
import hashlib
import re
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from bmaas.faults import InputError
from bmaas.hwlab.vm import domain, image, uefi
from bmaas.hwlab.vm.image import COUNTER_DISK_BYTES, COUNTER_SECTOR, MODULES, WROTE, parse_marker

BUSYBOX = shutil.which("busybox") or "/bin/busybox"


def count_boot_function() -> str:
    """The init script's count_boot(), as the guest runs it."""
    found = re.search(r"^count_boot\(\) \{\n.*?^\}\n", image.INIT_SCRIPT, re.S | re.M)
    assert found, image.INIT_SCRIPT
    return found.group(0)


def boot_on(disk: Path) -> str:
    done = subprocess.run(
        [BUSYBOX, "sh", "-c", f'{count_boot_function()}count_boot "$1"', "sh", str(disk)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.strip()


@pytest.mark.skipif(not Path(BUSYBOX).exists(), reason="busybox is not installed")
def test_the_guest_counts_its_boots_on_the_last_sector_and_never_touches_the_rest(
    tmp_path: Path,
) -> None:
    disk = domain.blank_disk(tmp_path / "d.img")
    assert disk.stat().st_size == COUNTER_DISK_BYTES
    assert [boot_on(disk) for _ in range(3)] == ["1", "2", "3"]
    raw = disk.read_bytes()
    assert len(raw) == COUNTER_DISK_BYTES
    at = COUNTER_SECTOR * 512
    assert at == COUNTER_DISK_BYTES - 512
    assert raw[:512] == b"\0" * 512  # no boot signature: the firmware moves on
    assert raw[at:].rstrip(b"\0") == b"BMAAS-COUNT 3\n"
    assert raw[:at] == b"\0" * at  # room for a user image from sector 0


@pytest.mark.skipif(not Path(BUSYBOX).exists(), reason="busybox is not installed")
def test_a_sector_that_holds_no_count_starts_at_one(tmp_path: Path) -> None:
    disk = domain.blank_disk(tmp_path / "d.img")
    with disk.open("r+b") as f:
        f.seek(COUNTER_SECTOR * 512)
        f.write(b"BMAAS-COUNT 41\n")
    assert boot_on(disk) == "42"
    with disk.open("r+b") as f:
        f.seek(COUNTER_SECTOR * 512)
        f.write(b"garbage 7\n".ljust(512, b"\0"))
    assert boot_on(disk) == "1"


def sh(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` run by busybox's sh, as the guest's /init runs its steps."""
    return subprocess.run(
        [BUSYBOX, "sh", "-c", script], capture_output=True, text=True, timeout=30, check=False
    )


def write_block() -> str:
    """The init script's write step (``bmaas.write=disk``), as the guest runs it."""
    found = re.search(
        r"^if \[ \"\$\(arg bmaas.write\)\" = disk \].*?^fi\n", image.INIT_SCRIPT, re.S | re.M
    )
    assert found, image.INIT_SCRIPT
    return found.group(0)


@pytest.mark.skipif(not Path(BUSYBOX).exists(), reason="busybox is not installed")
def test_a_writer_puts_the_user_image_from_sector_0_and_keeps_the_count(tmp_path: Path) -> None:
    """What ``bmaas deploy --to-disk`` has the lab's writer do, on files
    standing in for ``/dev/sda`` and ``/disk.img``: the image lands at the
    start, the boot count in the last sector survives, and the line it prints
    names the image's size and digest."""
    disk = domain.blank_disk(tmp_path / "sda")
    assert boot_on(disk) == "1"
    user = tmp_path / "disk.img"
    user.write_bytes(b"\x55\xaa" * 300_000)  # 600 kB, past one dd block
    script = write_block().replace("/dev/sda", str(disk)).replace("/disk.img", str(user))
    script = script.replace(">/dev/console", "")
    done = sh(f"arg() {{ echo disk; }}\nboot=1\n{script}")
    assert done.returncode == 0, done.stderr
    raw = disk.read_bytes()
    assert raw[: len(user.read_bytes())] == user.read_bytes()
    assert raw[COUNTER_SECTOR * 512 :].rstrip(b"\0") == b"BMAAS-COUNT 1\n"
    digest = hashlib.sha256(user.read_bytes()).hexdigest()
    assert f"{WROTE} bytes=600000 sha256={digest}" in done.stdout
    assert boot_on(disk) == "2"


@pytest.mark.skipif(not Path(BUSYBOX).exists(), reason="busybox is not installed")
def test_a_wiped_disk_is_blank_but_keeps_its_count(tmp_path: Path) -> None:
    disk = domain.blank_disk(tmp_path / "sda")
    boot_on(disk)
    with disk.open("r+b") as f:
        f.write(b"\xeb\x63\x90 an MBR" + b"\x55\xaa")
    domain.wipe_disk(disk)
    raw = disk.read_bytes()
    assert raw[: COUNTER_SECTOR * 512] == b"\0" * (COUNTER_SECTOR * 512)
    assert boot_on(disk) == "2"


@pytest.mark.parametrize("firmware", ["uefi", "uefi-secure"])
def test_a_uefi_domain_is_q35_with_ovmf_smm_and_sata(firmware: str, tmp_path: Path) -> None:
    xml = domain.domain_xml(
        "vm-1",
        serial_log=tmp_path / "s.log",
        cdrom=tmp_path / "a.iso",
        disk=tmp_path / "d.img",
        firmware=firmware,
        nvram=tmp_path / "vm-1_VARS.fd",
    )
    tree = ElementTree.fromstring(xml)  # noqa: S314 - our own definition
    assert tree.find("os/type").get("machine") == "q35"  # type: ignore[union-attr]
    loader = tree.find("os/loader")
    assert loader is not None
    assert (loader.text, loader.get("secure")) == (domain.OVMF_CODE, "yes")
    nvram = tree.find("os/nvram")
    assert nvram is not None
    assert (nvram.text, nvram.get("template")) == (
        str(tmp_path / "vm-1_VARS.fd"),
        domain.OVMF_VARS[firmware],
    )
    assert tree.find("features/smm") is not None
    buses = {d.get("device"): d.find("target").get("bus") for d in tree.iter("disk")}  # type: ignore[union-attr]
    assert buses == {"disk": "sata", "cdrom": "sata"}
    # sushy-tools' eject removed the drive: it comes back on the same bus
    saved = xml.replace("machine='q35'", "machine='pc-q35-7.2'")  # as libvirt writes it out
    back = domain.replace_cdrom(saved, tmp_path / "b.iso")
    assert 'bus="sata"' in back.split("device='cdrom'")[1]


def test_a_bios_domain_and_a_bad_firmware(tmp_path: Path) -> None:
    common: dict[str, Any] = {
        "serial_log": tmp_path / "s.log",
        "cdrom": tmp_path / "a.iso",
        "disk": tmp_path / "d.img",
    }
    tree = ElementTree.fromstring(domain.domain_xml("vm-1", **common))  # noqa: S314 - ours
    assert tree.find("os/loader") is None
    assert tree.find("os/type").get("machine") == "pc"  # type: ignore[union-attr]
    with pytest.raises(InputError) as caught:
        domain.domain_xml("vm-1", **common, firmware="coreboot")
    assert caught.value.field == "firmware"
    with pytest.raises(InputError):
        domain.domain_xml("vm-1", **common, firmware="uefi")  # no file for its variables


def test_the_writer_initramfs_carries_the_user_image() -> None:
    plain = gzip.decompress(image._initramfs(b"busybox"))
    writer = gzip.decompress(image._initramfs(b"busybox", (), b"USER-IMAGE"))
    assert b"disk.img\0" not in plain
    assert b"disk.img\0" in writer
    assert b"USER-IMAGE" in writer


def test_marker_fields() -> None:
    line = "BMAAS-BOOTED via=cdrom boot=3 boot_id=3f1c-aa uptime=4.12 fw=uefi sb=on"
    assert parse_marker(line) == {
        "via": "cdrom",
        "boot": 3,
        "boot_id": "3f1c-aa",
        "fw": "uefi",
        "sb": "on",
    }
    none = parse_marker("BMAAS-BOOTED via=vmedia boot=none boot_id=x uptime=1 fw=bios sb=off")
    assert none == {"via": "vmedia", "boot": None, "boot_id": "x", "fw": "bios", "sb": "off"}
    # an image from before the count, and from before the firmware's fields
    assert parse_marker("BMAAS-BOOTED via=cdrom boot_id=x uptime=1") == {
        "via": "cdrom",
        "boot": None,
        "boot_id": "x",
        "fw": None,
        "sb": None,
    }
    assert parse_marker("[    1.0] Linux version 6.1") is None


def test_the_script_prints_what_parse_marker_reads() -> None:
    echo = next(ln for ln in image.INIT_SCRIPT.splitlines() if ln.startswith("echo"))
    shown = echo.replace("${via:-unknown}", "cdrom").replace("$boot", "2")
    shown = shown.replace("$id", "abc").replace("$up", "3.5")
    shown = shown.replace("$fw", "uefi").replace("$sb", "on")
    assert parse_marker(shown.split('"')[1]) == {
        "via": "cdrom",
        "boot": 2,
        "boot_id": "abc",
        "fw": "uefi",
        "sb": "on",
    }


def test_the_initramfs_carries_the_modules_in_load_order() -> None:
    mods = [(Path(m).name, f"elf {m}".encode()) for m in MODULES]
    cpio = gzip.decompress(image._initramfs(b"busybox", mods))
    names = re.findall(rb"lib/modules/([\w.-]+\.ko)\0", cpio)
    assert [n.decode() for n in names] == [Path(m).name for m in MODULES]
    # the script loads them in the same order
    loop = next(ln for ln in image.INIT_SCRIPT.splitlines() if ln.startswith("for m in"))
    assert loop.removesuffix("; do").split()[3:] == [Path(m).name for m in MODULES]


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb is not installed")
def test_the_kernel_package_is_read_for_vmlinuz_and_the_modules_only(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN" / "control").write_text(
        "Package: linux-image-test\nVersion: 1\nArchitecture: all\n"
        "Maintainer: t <t@t>\nDescription: t\n"
    )
    (pkg / "boot").mkdir()
    (pkg / "boot" / "vmlinuz-9.9").write_bytes(b"kernel")
    base = pkg / "lib" / "modules" / "9.9"
    for m in (*MODULES, "kernel/drivers/net/e1000.ko"):
        (base / m).parent.mkdir(parents=True, exist_ok=True)
        (base / m).write_bytes(m.encode())
    subprocess.run(
        ["dpkg-deb", "-Znone", "-b", str(pkg), str(tmp_path / "k.deb")],
        capture_output=True,
        check=True,
        timeout=60,
    )
    root = tmp_path / "root"
    (root / "modules").mkdir(parents=True)
    image._unpack(tmp_path / "k.deb", root)
    assert (root / "vmlinuz").read_bytes() == b"kernel"
    got = sorted(p.name for p in (root / "modules").iterdir())
    assert got == sorted(Path(m).name for m in MODULES)  # not e1000
    assert (root / "modules" / "sd_mod.ko").read_bytes() == b"kernel/drivers/scsi/sd_mod.ko"


LIBVIRT_XML = """<domain type='qemu'>
  <name>vm-1</name>
  <devices>
    <disk type='file' device='disk'>
      <source file='/s/disks/vm-1.img'/>
      <target dev='hda' bus='ide'/>
    </disk>
{cdrom}    <serial type='file'/>
  </devices>
</domain>
"""

#: what sushy-tools' insert leaves (ElementTree: double quotes, an address)
SUSHY_CDROM = (
    '    <disk type="file" device="cdrom"><target dev="hdc" bus="ide" />'
    '<address type="drive" controller="0" bus="0" target="0" unit="0" />'
    '<driver name="qemu" type="raw" />'
    '<source file="/var/lib/libvirt/images/boot-x.img" /><readonly /></disk>\n'
)
LAB_CDROM = (
    "    <disk type='file' device='cdrom'>\n"
    "      <source file='/old/bmaas-cdrom.iso'/>\n"
    "      <target dev='hdc' bus='ide'/><readonly/>\n"
    "    </disk>\n"
)


@pytest.mark.parametrize("cdrom", ["", SUSHY_CDROM, LAB_CDROM, LAB_CDROM + SUSHY_CDROM])
def test_the_cd_drive_is_put_back_holding_the_lab_iso(cdrom: str) -> None:
    """After sushy-tools' eject (no drive), its insert (its drive), or the
    lab's own drive: exactly one CD drive, the lab's, holding the ISO; the
    disk and everything else untouched."""
    iso = Path("/cache/bmaas-cdrom.iso")
    out = domain.replace_cdrom(LIBVIRT_XML.format(cdrom=cdrom), iso)
    tree = ElementTree.fromstring(out)  # noqa: S314 - our own test string
    disks = tree.findall("devices/disk")
    cds = [d for d in disks if d.get("device") == "cdrom"]
    assert len(cds) == 1
    assert cds[0].find("source").get("file") == str(iso)  # type: ignore[union-attr]
    assert cds[0].find("target").get("dev") == "hdc"  # type: ignore[union-attr]
    assert cds[0].find("readonly") is not None
    assert [d.get("device") for d in disks] == ["disk", "cdrom"]
    assert tree.find("devices/serial") is not None


def test_the_domain_is_defined_with_the_lab_cd_drive() -> None:
    xml = domain.domain_xml(
        "vm-1", serial_log=Path("/s/vm-1.log"), cdrom=Path("/c/x.iso"), disk=Path("/d/x.img")
    )
    tree = ElementTree.fromstring(xml)  # noqa: S314 - our own string
    cds = [d for d in tree.findall("devices/disk") if d.get("device") == "cdrom"]
    assert [cd.find("source").get("file") for cd in cds] == ["/c/x.iso"]  # type: ignore[union-attr]
    assert domain.replace_cdrom(xml, Path("/c/x.iso")).count("device='cdrom'") == 1


def fault_block() -> str:
    """The init script's machine-fault step, as the guest runs it."""
    found = re.search(r"^fault=\n.*?^esac\n", image.INIT_SCRIPT, re.S | re.M)
    assert found, image.INIT_SCRIPT
    return found.group(0)


@pytest.mark.skipif(not Path(BUSYBOX).exists(), reason="busybox is not installed")
@pytest.mark.parametrize("fault", [None, "panic", "hang"])
def test_a_boot_reads_the_machine_fault_off_its_disk(fault: str | None, tmp_path: Path) -> None:
    """The mark ``domain.machine_fault`` leaves is what the guest reads once
    its boot is counted: a panic line and the kernel told to halt on a
    panic it then triggers; a hang line and no end (here: exit 3 instead of
    sleeping); nothing without a mark or once cleared."""
    disk = domain.blank_disk(tmp_path / "sda")
    domain.machine_fault(disk, fault)
    proc = {name: tmp_path / name for name in ("panic", "sysrq")}
    script = (
        fault_block()
        .replace("/dev/sda", str(disk))
        .replace(">/dev/console", "")
        .replace("/proc/sys/kernel/panic", str(proc["panic"]))
        .replace("/proc/sysrq-trigger", str(proc["sysrq"]))
        .replace("while :; do sleep 3600; done", "exit 3")
    )
    done = sh(f"boot=4\n{script}echo up")
    if fault is None:
        assert (done.returncode, done.stdout) == (0, "up\n")
    else:
        assert done.stdout == f"{image.FAILING} {fault} boot=4\n"
        assert done.returncode == (1 if fault == "panic" else 3)
    if fault == "panic":
        assert (proc["panic"].read_text(), proc["sysrq"].read_text()) == ("0\n", "c\n")
    raw = disk.read_bytes()
    assert raw[: image.FAULT_SECTOR * 512] == b"\0" * (image.FAULT_SECTOR * 512)


def test_a_machine_fault_is_cleared_or_wiped_and_a_bad_one_refused(tmp_path: Path) -> None:
    disk = domain.blank_disk(tmp_path / "sda")
    at = image.FAULT_SECTOR * 512
    domain.machine_fault(disk, "hang")
    assert disk.read_bytes()[at : at + 512].rstrip(b"\0") == b"BMAAS-FAULT hang\n"
    domain.machine_fault(disk, None)
    assert disk.read_bytes()[at : at + 512] == b"\0" * 512
    domain.machine_fault(disk, "panic")
    domain.wipe_disk(disk)
    assert disk.read_bytes()[at : at + 512] == b"\0" * 512
    with pytest.raises(InputError) as caught:
        domain.machine_fault(disk, "reboot")
    assert caught.value.field == "fault"


def test_the_uefi_user_image_is_a_disk_whose_one_partition_is_the_esp(tmp_path: Path) -> None:
    """``uefi.uefi_disk``'s MBR: one partition, type 0xEF, at 1 MiB, as long
    as the ESP (made here by a stand-in for the tools)."""

    def run(argv: list[str]) -> str:
        if argv[0] == "mkfs.vfat":
            Path(argv[-2]).write_bytes(b"FAT" * 1000)
        elif argv[0] == "sbsign":
            Path(argv[argv.index("--output") + 1]).write_bytes(b"PE")
        return ""

    out = uefi.uefi_disk(
        run, tmp_path / "w", tmp_path / "d.img", vmlinuz=Path("/dev/null"), initrd=b"", cmdline=""
    )
    raw = out.read_bytes()
    assert raw[510:512] == b"\x55\xaa"
    kind, first, sectors = struct.unpack_from("<4xB3xII", raw, 446)
    assert (kind, first, sectors) == (0xEF, 2048, 6)  # 3000 bytes: 6 sectors
    assert raw[2048 * 512 : 2048 * 512 + 3000] == b"FAT" * 1000
    assert raw[462:510] == b"\0" * 48  # no other partition
