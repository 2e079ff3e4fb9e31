"""A boot image made here, from Debian packages: the VM lab's machines boot it.

Debian's kernel, a busybox-static initramfs with the few disk modules Debian
builds out of its kernel, and an ``/init`` that prints one marker line on
the serial console::

    BMAAS-BOOTED via=cdrom boot=3 boot_id=3f1c... uptime=4.12

``via`` says which medium the firmware booted (the kernel command line's
``bmaas.via``); ``boot`` is the guest's own count of its boots, kept in the
last sector of the VM's 64 MiB disk (``BMAAS-COUNT n``) and synced before
the line is printed, so a test proves one boot per deploy from the
machine's word, not from the BMC's. A fault mark in the sector before it
(:data:`FAULT_SECTOR`, :func:`bmaas.hwlab.vm.domain.machine_fault`) makes
every boot panic or hang after counting; a wiped disk
(``domain.wipe_disk``) has none. The ISOs and images built (BIOS and UEFI,
cached under the user's cache dir keyed by their inputs), the writer that
puts the user image on the disk and its ``BMAAS-WROTE`` line are described
in docs/lab.md ("VM lab": ``hwlab vm image``, "A boot that panics or hangs
in the guest").
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import logging
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bmaas.faults import InputError
from bmaas.hwlab.vm import uefi

__all__ = [
    "COUNTER_DISK_BYTES",
    "COUNTER_SECTOR",
    "FAILING",
    "FAULT_SECTOR",
    "INIT_SCRIPT",
    "MACHINE_FAULTS",
    "MARKER",
    "MODULES",
    "WROTE",
    "BootImage",
    "build_image",
    "cpio_newc",
    "default_cache_dir",
    "parse_marker",
]

LOG = logging.getLogger(__name__)

#: the first word of the line the guest prints once booted
MARKER = "BMAAS-BOOTED"

#: Debian's modules between the guest and its disk, IDE (BIOS VMs, i440fx)
#: or SATA (UEFI VMs, q35: AHCI), in load order (``depends=`` of each:
#: sd_mod needs t10-pi, which needs the two CRCs)
MODULES = (
    "kernel/drivers/scsi/scsi_common.ko",
    "kernel/drivers/scsi/scsi_mod.ko",
    "kernel/drivers/ata/libata.ko",
    "kernel/drivers/ata/ata_piix.ko",
    "kernel/drivers/ata/libahci.ko",
    "kernel/drivers/ata/ahci.ko",
    "kernel/crypto/crct10dif_common.ko",
    "kernel/lib/crc-t10dif.ko",
    "kernel/lib/crc64.ko",
    "kernel/lib/crc64-rocksoft.ko",
    "kernel/block/t10-pi.ko",
    "kernel/drivers/scsi/sd_mod.ko",
)

#: the size of the disk the guest keeps its count on (domain.blank_disk's):
#: room for a written user image before the count's sector
COUNTER_DISK_BYTES = 64 << 20

#: the sector the count is kept in: the disk's last, so a user image written
#: from sector 0 leaves it be
COUNTER_SECTOR = COUNTER_DISK_BYTES // 512 - 1

#: the first words of the line a writer prints once the disk is written
WROTE = "BMAAS-WROTE disk"

#: the sector before the count's: a fault the machine itself shows, set by
#: the lab (:func:`bmaas.hwlab.vm.domain.machine_fault`), read at every boot
FAULT_SECTOR = COUNTER_SECTOR - 1
#: the faults a VM's own boot can show: the kernel panics (and the machine
#: halts, on), or the boot hangs before its marker
MACHINE_FAULTS = ("panic", "hang")
#: the first word of the line a faulted boot prints instead of its marker
FAILING = "BMAAS-FAILING"

INIT_SCRIPT = f"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
arg() {{ sed -n "s/.*$1=\\([^ ]*\\).*/\\1/p" /proc/cmdline; }}
via=$(arg bmaas.via)
for m in {" ".join(m.rsplit("/", 1)[1] for m in MODULES)}; do
  [ -f /lib/modules/$m ] && insmod /lib/modules/$m 2>/dev/null
done
n=0
while [ ! -b /dev/sda ] && [ -f /lib/modules/sd_mod.ko ] && [ $n -lt 100 ]; do
  sleep 0.1; n=$((n + 1))
done
# count_boot DISK: read the count from its last sector, write it back plus one, print it
count_boot() {{
  last=$(dd if="$1" bs=512 skip={COUNTER_SECTOR} count=1 2>/dev/null | tr -d '\\000' \\
    | sed -n 's/^BMAAS-COUNT \\([0-9][0-9]*\\)$/\\1/p')
  printf 'BMAAS-COUNT %d\\n' $((${{last:-0}} + 1)) \\
    | dd of="$1" bs=512 seek={COUNTER_SECTOR} count=1 conv=sync,notrunc 2>/dev/null
  sync
  echo $((${{last:-0}} + 1))
}}
boot=none
if [ -b /dev/sda ] && [ "$(blockdev --getsize64 /dev/sda)" = {COUNTER_DISK_BYTES} ]; then
  boot=$(count_boot /dev/sda)
  blockdev --flushbufs /dev/sda
fi
# a fault the lab set on this machine (FAULT_SECTOR): witnessed, then shown
fault=
[ "$boot" != none ] && fault=$(dd if=/dev/sda bs=512 skip={FAULT_SECTOR} count=1 2>/dev/null \\
  | tr -d '\\000' | sed -n 's/^BMAAS-FAULT \\([a-z]*\\)$/\\1/p')
case "$fault" in
  panic)
    echo "{FAILING} panic boot=$boot" >/dev/console
    echo 0 >/proc/sys/kernel/panic  # halt on it: one boot, the machine stays on
    echo c >/proc/sysrq-trigger
    exit 1 ;;  # no sysrq: init exiting panics the kernel too
  hang)
    echo "{FAILING} hang boot=$boot" >/dev/console
    while :; do sleep 3600; done ;;
esac
id=$(cat /proc/sys/kernel/random/boot_id)
up=$(cut -d' ' -f1 /proc/uptime)
fw=bios
[ -d /sys/firmware/efi ] && fw=uefi
sb=off
dmesg | grep -q 'Secure boot enabled' && sb=on
echo "{MARKER} via=${{via:-unknown}} boot=$boot boot_id=$id uptime=$up fw=$fw sb=$sb" >/dev/console
if [ "$(arg bmaas.write)" = disk ] && [ -f /disk.img ] && [ "$boot" != none ]; then
  dd if=/disk.img of=/dev/sda bs=65536 conv=notrunc 2>/dev/null
  sync
  blockdev --flushbufs /dev/sda
  sum=$(sha256sum /disk.img | cut -d' ' -f1)
  echo "{WROTE} bytes=$(wc -c </disk.img) sha256=$sum" >/dev/console
fi
if [ "$(arg bmaas.after)" = poweroff ]; then poweroff -f; fi
while :; do sleep 3600; done
"""

_MARKER_LINE = re.compile(
    rf"^{MARKER} via=(?P<via>\S+)(?: boot=(?P<boot>\d+|none))?(?: boot_id=(?P<boot_id>\S+))?"
    r"(?: uptime=\S+)?(?: fw=(?P<fw>bios|uefi))?(?: sb=(?P<sb>on|off))?"
)


def parse_marker(line: str) -> dict[str, str | int | None] | None:
    """The fields of one marker line (``boot`` an int, or None when the guest
    kept no count; ``fw`` bios or uefi and ``sb`` on or off, None from an
    image older than them); None for any other line."""
    found = _MARKER_LINE.match(line.strip())
    if found is None:
        return None
    boot = found["boot"]
    return {
        "via": found["via"],
        "boot": int(boot) if boot and boot != "none" else None,
        "boot_id": found["boot_id"],
        "fw": found["fw"],
        "sb": found["sb"],
    }


ISOLINUX_CFG = """DEFAULT bmaas
PROMPT 0
TIMEOUT 0
LABEL bmaas
  KERNEL /boot/vmlinuz
  INITRD /boot/initrd.gz
  APPEND {append}
"""

#: the kernel's command line, in an ISO's isolinux.cfg or a UEFI image's UKI
KERNEL_ARGS = "console=ttyS0,115200 quiet panic=-1 bmaas.via={via}{extra}"

#: what each ISO's kernel is told past ``bmaas.via``
_WRITER_ARGS = " bmaas.write=disk bmaas.after=poweroff"

_BUSYBOX = "/bin/busybox"
_ISOLINUX = Path("/usr/lib/ISOLINUX")
_SYSLINUX_BIOS = Path("/usr/lib/syslinux/modules/bios")


@dataclasses.dataclass(frozen=True)
class BootImage:
    #: the ISO a domain's own CD drive holds (``bmaas.via=cdrom``)
    iso: Path
    #: the same ISO saying ``bmaas.via=vmedia``: what a deploy inserts by
    #: virtual media, so the marker tells the two apart
    vmedia_iso: Path
    kernel: Path
    initramfs: Path
    #: the user image a writer puts on the disk (``bmaas.via=disk``)
    disk_iso: Path
    #: a deploy image that writes ``disk_iso`` to the disk and powers off
    writer_iso: Path
    #: UEFI only (:mod:`.uefi`, signed for Secure Boot): a UEFI VM's CD drive
    uefi_iso: Path
    #: the same saying ``via=vmedia``: what a deploy inserts in a UEFI lab
    uefi_vmedia_iso: Path
    #: the UEFI user image (a disk, its ESP holding a signed UKI, ``via=disk``)
    uefi_disk: Path
    #: a UEFI deploy image that writes ``uefi_disk`` to the disk and powers off
    uefi_writer_iso: Path

    def user_image(self, firmware: str) -> Path:
        """What a writer puts on a disk of a lab of ``firmware``."""
        return self.disk_iso if firmware == "bios" else self.uefi_disk

    def writer(self, firmware: str) -> Path:
        """The deploy image that writes :meth:`user_image` and powers off."""
        return self.writer_iso if firmware == "bios" else self.uefi_writer_iso


def default_cache_dir() -> Path:
    """``HWLAB_VM_CACHE_DIR``, else the user's cache dir's ``hwlab/vm``."""
    if os.environ.get("HWLAB_VM_CACHE_DIR"):
        return Path(os.environ["HWLAB_VM_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hwlab" / "vm"


def cpio_newc(entries: list[tuple[str, int, bytes, tuple[int, int]]]) -> bytes:
    """A cpio archive (newc, what the kernel unpacks) of ``(name, mode, data,
    (rdev major, minor))``: device nodes without root, no cpio binary."""
    out = io.BytesIO()

    def pad() -> None:
        out.write(b"\0" * (-out.tell() % 4))

    for ino, (name, mode, data, (major, minor)) in enumerate(
        [*entries, ("TRAILER!!!", 0, b"", (0, 0))], 1
    ):
        raw = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, major, minor, len(raw), 0]
        out.write(b"070701" + "".join(f"{f:08x}" for f in fields).encode())
        out.write(raw)
        pad()
        out.write(data)
        pad()
    return out.getvalue()


def _initramfs(
    busybox: bytes, modules: Sequence[tuple[str, bytes]] = (), disk_image: bytes | None = None
) -> bytes:
    """The gzipped cpio: busybox, ``/init`` and ``modules`` (name, bytes) in
    ``/lib/modules``; a writer's also ``disk_image`` as ``/disk.img``."""
    d, f, c = 0o040755, 0o100755, 0o020600
    entries = [
        ("bin", d, b"", (0, 0)),
        ("bin/busybox", f, busybox, (0, 0)),
        ("dev", d, b"", (0, 0)),
        ("dev/console", c, b"", (5, 1)),
        ("lib", d, b"", (0, 0)),
        ("lib/modules", d, b"", (0, 0)),
        *((f"lib/modules/{name}", 0o100644, data, (0, 0)) for name, data in modules),
        ("proc", d, b"", (0, 0)),
        ("sys", d, b"", (0, 0)),
        ("init", f, INIT_SCRIPT.encode(), (0, 0)),
        *([("disk.img", 0o100644, disk_image, (0, 0))] if disk_image is not None else []),
    ]
    return gzip.compress(cpio_newc(entries), compresslevel=6, mtime=0)


def _run(argv: list[str], cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(  # noqa: S603 - fixed tools, our arguments
            argv, cwd=cwd, capture_output=True, text=True, check=False, timeout=600
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"{argv[0]}: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        raise InputError(f"{' '.join(argv[:2])} failed ({done.returncode}): {tail[0]}")
    return done.stdout


@dataclasses.dataclass(frozen=True)
class _Kernel:
    vmlinuz: Path
    #: MODULES' files in load order; empty when they are not there (no count)
    modules: list[Path]


def _host_modules(release: str) -> list[Path]:
    base = Path("/lib/modules") / release
    found = [base / m for m in MODULES]
    return found if all(p.is_file() for p in found) else []


def _kernel(cache: Path) -> _Kernel:
    """Debian's kernel and the modules the guest needs for its disk: /boot's
    and /lib/modules' if readable, else the package's (vmlinuz and MODULES
    only, streamed out of the .deb: nothing else is unpacked)."""
    booted = sorted(p for p in Path("/boot").glob("vmlinuz-*") if os.access(p, os.R_OK))
    if booted:
        return _Kernel(booted[-1], _host_modules(booted[-1].name.removeprefix("vmlinuz-")))
    depends = _run(["apt-cache", "depends", "linux-image-amd64"])
    names = [w.split(":", 1)[1].strip() for w in depends.splitlines() if "Depends:" in w]
    if not names:
        raise InputError("no kernel: /boot has none and apt knows no linux-image-amd64")
    package = names[0]
    target = cache / "kernels" / package.removeprefix("linux-image-")
    kernel = _Kernel(target / "vmlinuz", [target / "modules" / Path(m).name for m in MODULES])
    if kernel.vmlinuz.exists() and all(p.exists() for p in kernel.modules):
        return kernel
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        LOG.info("downloading %s (apt-get download)", package)
        _run(["apt-get", "download", "-q", package], cwd=Path(tmp))
        deb = next(Path(tmp).glob("*.deb"))
        root = Path(tmp) / "root"
        (root / "modules").mkdir(parents=True)
        _unpack(deb, root)
        if not (root / "vmlinuz").exists():
            raise InputError(f"{package} has no /boot/vmlinuz-*")
        missing = [m for m in MODULES if not (root / "modules" / Path(m).name).exists()]
        if missing:
            raise InputError(f"{package} lacks {', '.join(missing)}")
        if target.exists():
            shutil.rmtree(target)
        os.replace(root, target)
    return kernel


def _unpack(deb: Path, root: Path) -> None:
    """From ``deb``'s data: its vmlinuz as ``root/vmlinuz`` and MODULES as
    ``root/modules/<name>``, read as one stream (no 400 MB unpacked)."""
    wanted = {m: Path(m).name for m in MODULES}
    with subprocess.Popen(  # noqa: S603 - dpkg-deb, our argument
        ["dpkg-deb", "--fsys-tarfile", str(deb)],  # noqa: S607 - dpkg-deb from PATH
        stdout=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
            for member in tar:
                name = member.name.removeprefix("./").removeprefix("usr/")
                if not member.isfile():
                    continue
                if name.startswith("boot/vmlinuz-"):
                    dest = root / "vmlinuz"
                else:
                    module = name.split("/", 3)[-1] if name.startswith("lib/modules/") else ""
                    if module not in wanted:
                        continue
                    dest = root / "modules" / wanted[module]
                data = tar.extractfile(member)
                assert data is not None
                dest.write_bytes(data.read())
        proc.stdout.read()  # the rest, so dpkg-deb ends on its own
    if proc.returncode != 0:
        raise InputError(f"dpkg-deb --fsys-tarfile {deb.name} failed ({proc.returncode})")


def _need(path: Path | str, package: str) -> Path:
    """``path`` (a file, or a tool on PATH when it has no slash) if there;
    else an InputError naming the Debian package that has it."""
    found = Path(path) if "/" in str(path) else shutil.which(path)
    if found is None or not Path(found).exists():
        raise InputError(f"{path} is missing: apt-get install {package} (scripts/vm-setup.sh does)")
    return Path(found)


#: BootImage's files, in its fields' order
_FILES = (
    "bmaas-cdrom.iso",
    "bmaas-vmedia.iso",
    "vmlinuz",
    "initrd.gz",
    *(f"bmaas-{name}.iso" for name in ("disk", "writer", "uefi", "uefi-vmedia")),
    "bmaas-uefi-disk.img",
    "bmaas-uefi-writer.iso",
)


def build_image(cache: Path | None = None, *, force: bool = False) -> BootImage:
    """The ISOs, kernel and initramfs, built once per set of inputs."""
    cache = cache or default_cache_dir()
    busybox = _need(_BUSYBOX, "busybox-static").read_bytes()
    kernel = _kernel(cache)
    modules = [(p.name, p.read_bytes()) for p in kernel.modules]
    if not modules:
        LOG.warning("no disk modules for %s: the guest keeps no boot count", kernel.vmlinuz)
    isolinux = _need(_ISOLINUX / "isolinux.bin", "isolinux")
    ldlinux = _need(_SYSLINUX_BIOS / "ldlinux.c32", "syslinux-common")
    mbr = _need(_ISOLINUX / "isohdpfx.bin", "isolinux")
    _need("xorriso", "xorriso")
    digest = hashlib.sha256()
    for part in (
        busybox,
        kernel.vmlinuz.read_bytes(),
        *(data for _, data in modules),
        INIT_SCRIPT.encode(),
        ISOLINUX_CFG.encode(),
        KERNEL_ARGS.encode(),
        _WRITER_ARGS.encode(),
        isolinux.read_bytes(),
        ldlinux.read_bytes(),
        *(p.read_bytes() for p in uefi.need_tools(_need)),
    ):
        digest.update(hashlib.sha256(part).digest())
    out = cache / digest.hexdigest()[:16]
    image = BootImage(*(out / name for name in _FILES))
    made = [p for p in dataclasses.astuple(image) if p.name.startswith("bmaas-")]
    if force or not all(p.exists() for p in made):
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out) as tmp:
            _build(image, Path(tmp), kernel.vmlinuz, busybox, modules, (isolinux, ldlinux, mbr))
    return image


def _build(
    image: BootImage,
    tmp: Path,
    vmlinuz: Path,
    busybox: bytes,
    modules: list[tuple[str, bytes]],
    bios: tuple[Path, Path, Path],
) -> None:
    """Every file of ``image``, made in ``tmp`` and moved into place."""
    isolinux, ldlinux, mbr = bios
    root = tmp / "iso"
    (root / "boot").mkdir(parents=True)
    (root / "isolinux").mkdir()
    shutil.copyfile(vmlinuz, root / "boot" / "vmlinuz")
    initrd = root / "boot" / "initrd.gz"
    plain = _initramfs(busybox, modules)
    initrd.write_bytes(plain)
    shutil.copyfile(isolinux, root / "isolinux" / "isolinux.bin")
    shutil.copyfile(ldlinux, root / "isolinux" / "ldlinux.c32")
    made = {}
    for via in ("cdrom", "vmedia", "disk"):
        made[via] = _iso(root, tmp / f"{via}.iso", mbr, via=via)
    _fits(made["disk"])
    initrd.write_bytes(_initramfs(busybox, modules, made["disk"].read_bytes()))
    made["writer"] = _iso(root, tmp / "writer.iso", mbr, via="vmedia", extra=_WRITER_ARGS)
    for via, name in (("cdrom", "uefi"), ("vmedia", "uefi-vmedia")):
        made[name] = uefi.uefi_iso(
            _run,
            tmp / name,
            tmp / f"{name}.iso",
            vmlinuz=vmlinuz,
            initrd=plain,
            cmdline=KERNEL_ARGS.format(via=via, extra=""),
        )
    made["uefi-disk"] = _fits(
        uefi.uefi_disk(
            _run,
            tmp / "uefi-disk",
            tmp / "uefi-disk.img",
            vmlinuz=vmlinuz,
            initrd=plain,
            cmdline=KERNEL_ARGS.format(via="disk", extra=""),
        )
    )
    made["uefi-writer"] = uefi.uefi_iso(
        _run,
        tmp / "uefi-writer",
        tmp / "uefi-writer.iso",
        vmlinuz=vmlinuz,
        initrd=_initramfs(busybox, modules, made["uefi-disk"].read_bytes()),
        cmdline=KERNEL_ARGS.format(via="vmedia", extra=_WRITER_ARGS),
    )
    (tmp / "initrd.gz").write_bytes(plain)
    for src, dst in (
        (root / "boot" / "vmlinuz", image.kernel),
        (tmp / "initrd.gz", image.initramfs),
        (made["cdrom"], image.iso),
        (made["vmedia"], image.vmedia_iso),
        (made["disk"], image.disk_iso),
        (made["writer"], image.writer_iso),
        (made["uefi"], image.uefi_iso),
        (made["uefi-vmedia"], image.uefi_vmedia_iso),
        (made["uefi-disk"], image.uefi_disk),
        (made["uefi-writer"], image.uefi_writer_iso),
    ):
        os.replace(src, dst)
        dst.chmod(0o644)


def _fits(user: Path) -> Path:
    """``user``, a user image, if it ends before the disk's fault sector."""
    if user.stat().st_size > FAULT_SECTOR * 512:
        raise InputError(f"the user image is larger than the VMs' {COUNTER_DISK_BYTES} B disk")
    return user


def _iso(root: Path, out: Path, mbr: Path, *, via: str, extra: str = "") -> Path:
    """``root`` as an isohybrid ISO at ``out`` whose kernel is told ``via``."""
    append = KERNEL_ARGS.format(via=via, extra=extra)
    (root / "isolinux" / "isolinux.cfg").write_text(ISOLINUX_CFG.format(append=append))
    _run(
        [
            "xorriso",
            "-as",
            "mkisofs",
            "-quiet",
            "-o",
            str(out),
            "-V",
            "BMAAS_BOOT",
            "-isohybrid-mbr",
            str(mbr),
            "-b",
            "isolinux/isolinux.bin",
            "-c",
            "isolinux/boot.cat",
            "-no-emul-boot",
            "-boot-load-size",
            "4",
            "-boot-info-table",
            str(root),
        ]
    )
    return out
