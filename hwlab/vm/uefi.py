"""The VM lab's UEFI images: a signed unified kernel image on an EFI system
partition, in an ISO that boots from a CD and, written to a disk, from it.

The kernel, initramfs and command line are one PE binary (a *unified kernel
image*: systemd's EFI stub with ``.linux``, ``.initrd`` and ``.cmdline``
sections, put together by binutils' ``objcopy`` -- the recipe of the stub's
own manual page, ``linuxx64.efi.stub(7)``), so the firmware needs no boot
loader and no configuration: it runs ``\\EFI\\BOOT\\BOOTX64.EFI``.

It is signed with Debian's OVMF "snakeoil" key (``sbsign``): OVMF started
with ``OVMF_VARS_4M.snakeoil.fd`` has that key in PK, KEK and db, so Secure
Boot is on *and* verifies this image, while an unsigned image is refused
("Access Denied"). The key is a test key shipped with its password
(``snakeoil``, README.Debian of the ``ovmf`` package); it is decrypted into
a private temporary file for ``sbsign``, which reads no password from its
arguments, and the file is gone once the image is signed.

Written to a disk, the same ESP is a UEFI user image (:func:`uefi_disk`: an
MBR with the one partition) that OVMF boots from the disk, still verified.

The ISO has only the UEFI boot entry (no isolinux): on a BIOS machine it does
not boot, which is how the lab shows a boot-mode mismatch. Packages:
``systemd-boot-efi`` (the stub), ``ovmf`` (the key; the firmware too),
``sbsigntool``, ``dosfstools``, ``mtools`` (the FAT image, made without a
mount), ``xorriso`` -- all installed by scripts/vm-setup.sh.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["SNAKEOIL_CERT", "STUB", "need_tools", "uefi_disk", "uefi_iso"]

#: systemd's EFI stub (Debian's systemd-boot-efi)
STUB = Path("/usr/lib/systemd/boot/efi/linuxx64.efi.stub")
#: Debian's OVMF test key and certificate: in the snakeoil VARS' PK, KEK, db
SNAKEOIL_KEY = Path("/usr/share/ovmf/PkKek-1-snakeoil.key")
SNAKEOIL_CERT = Path("/usr/share/ovmf/PkKek-1-snakeoil.pem")
_SNAKEOIL_PASSWORD = "snakeoil"  # noqa: S105 - Debian's published test-key password

#: tool -> the Debian package that has it
_TOOLS = {
    "objcopy": "binutils",
    "openssl": "openssl",
    "sbsign": "sbsigntool",
    "mkfs.vfat": "dosfstools",
    "mmd": "mtools",
    "mcopy": "mtools",
    "xorriso": "xorriso",
}

#: where objcopy puts each section (linuxx64.efi.stub(7)): apart enough for
#: a kernel under 16 MiB
_SECTIONS = (
    (".osrel", "0x20000"),
    (".cmdline", "0x30000"),
    (".linux", "0x2000000"),
    (".initrd", "0x3000000"),
)

Run = Callable[..., str]


def need_tools(need: Callable[[Path | str, str], Path]) -> list[Path]:
    """The stub, key and certificate, each checked by ``need`` (path or
    tool, its Debian package: raises naming the package when missing)."""
    for tool, package in _TOOLS.items():
        need(tool, package)
    return [need(STUB, "systemd-boot-efi"), need(SNAKEOIL_KEY, "ovmf"), need(SNAKEOIL_CERT, "ovmf")]


def uefi_iso(
    run: Run, work: Path, out: Path, *, vmlinuz: Path, initrd: bytes, cmdline: str
) -> Path:
    """The ISO at ``out``: a signed UKI of ``vmlinuz``, ``initrd`` and
    ``cmdline`` as ``\\EFI\\BOOT\\BOOTX64.EFI`` on an EFI system partition,
    which is the ISO's El Torito UEFI entry and its GPT's second partition
    (the same bytes, ``--interval:appended_partition_2``). ``run`` runs one
    command (``image._run``); ``work`` is a scratch directory."""
    esp = _esp(run, work, vmlinuz=vmlinuz, initrd=initrd, cmdline=cmdline)
    tree = work / "tree"
    tree.mkdir(exist_ok=True)
    run(
        [
            "xorriso", "-as", "mkisofs", "-quiet", "-o", str(out), "-V", "BMAAS_UEFI",
            "-append_partition", "2", "0xef", str(esp),
            "-e", "--interval:appended_partition_2:all::", "-no-emul-boot",
            "-isohybrid-gpt-basdat", str(tree),
        ]
    )  # fmt: skip
    return out


def uefi_disk(
    run: Run, work: Path, out: Path, *, vmlinuz: Path, initrd: bytes, cmdline: str
) -> Path:
    """A disk image at ``out`` that OVMF boots from a hard disk: an MBR whose
    one partition (type 0xEF, at 1 MiB as partitioning tools align it) is the
    EFI system partition of :func:`uefi_iso`, signed UKI and all. Not the ISO
    itself: its partition table starts a partition at sector 0, over the MBR,
    which a firmware may take for no table at all."""
    esp = _esp(run, work, vmlinuz=vmlinuz, initrd=initrd, cmdline=cmdline)
    data = esp.read_bytes()
    sectors = -(-len(data) // 512)
    entry = struct.pack("<B3sB3sII", 0, b"\xff\xff\xfe", 0xEF, b"\xff\xff\xfe", _FIRST, sectors)
    mbr = bytearray(512)
    mbr[446 : 446 + 16] = entry
    mbr[510:] = b"\x55\xaa"
    with out.open("wb") as disk:
        disk.write(mbr)
        disk.seek(_FIRST * 512)
        disk.write(data.ljust(sectors * 512, b"\0"))
    return out


#: the ESP's first sector on a UEFI user image's disk (1 MiB)
_FIRST = 2048


def _esp(run: Run, work: Path, *, vmlinuz: Path, initrd: bytes, cmdline: str) -> Path:
    """A FAT image in ``work`` holding the signed UKI as the removable-media
    path every UEFI firmware boots, ``\\EFI\\BOOT\\BOOTX64.EFI``."""
    work.mkdir(parents=True, exist_ok=True)
    parts = {
        ".osrel": work / "os-release",
        ".cmdline": work / "cmdline",
        ".linux": vmlinuz,
        ".initrd": work / "initrd",
    }
    parts[".osrel"].write_text("NAME=bmaas-vm\nID=bmaas-vm\n")
    parts[".cmdline"].write_text(cmdline)
    parts[".initrd"].write_bytes(initrd)
    unsigned, signed = work / "unsigned.efi", work / "BOOTX64.EFI"
    args = []
    for name, vma in _SECTIONS:
        args += ["--add-section", f"{name}={parts[name]}", "--change-section-vma", f"{name}={vma}"]
    run(["objcopy", *args, str(STUB), str(unsigned)])
    _sign(run, unsigned, signed, work)
    esp = work / "esp.img"
    # FAT's own overhead and the directories: 1 MiB is plenty
    kib = (signed.stat().st_size >> 10) + 1024
    esp.unlink(missing_ok=True)
    run(["mkfs.vfat", "-C", "-n", "BMAASEFI", str(esp), str(kib)])
    run(["mmd", "-i", str(esp), "::/EFI", "::/EFI/BOOT"])
    run(["mcopy", "-i", str(esp), str(signed), "::/EFI/BOOT/BOOTX64.EFI"])
    return esp


def _sign(run: Run, unsigned: Path, signed: Path, work: Path) -> None:
    """``unsigned`` signed with the snakeoil key into ``signed``; the key's
    decrypted copy lives only for the ``sbsign`` call, mode 0600."""
    fd, plain = tempfile.mkstemp(prefix="snakeoil-", suffix=".key", dir=work)
    os.close(fd)
    try:
        run(
            [
                "openssl", "rsa", "-in", str(SNAKEOIL_KEY), "-out", plain,
                "-passin", f"pass:{_SNAKEOIL_PASSWORD}",
            ]
        )  # fmt: skip
        run(
            [
                "sbsign", "--key", plain, "--cert", str(SNAKEOIL_CERT),
                "--output", str(signed), str(unsigned),
            ]
        )  # fmt: skip
    finally:
        os.unlink(plain)
