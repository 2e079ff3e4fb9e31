"""A boot image made here, from Debian packages: the VM lab's machines boot it.

The kernel is Debian's (``/boot/vmlinuz-*`` if readable, else the
``linux-image-amd64`` package's, fetched with ``apt-get download`` and only
its vmlinuz kept); the initramfs is busybox-static and an ``/init`` that
prints one marker line on the serial console::

    BMAAS-BOOTED via=cdrom boot_id=3f1c... uptime=4.12

``via`` is the kernel command line's ``bmaas.via`` (the ISO's isolinux entry
passes ``cdrom``; a direct kernel boot passes what it is given), so the line
says which medium the firmware booted. Then it waits for power-off (or
powers off itself with ``bmaas.after=poweroff``). No boot count: the guest
has no disk to keep one on; count the markers in the serial log instead.

The ISO is BIOS-bootable (isolinux, for SeaBIOS) and built by xorriso; all
three files are cached under the user's cache dir, keyed by their inputs.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from bmaas.faults import InputError

__all__ = ["INIT_SCRIPT", "MARKER", "BootImage", "build_image", "cpio_newc", "default_cache_dir"]

LOG = logging.getLogger(__name__)

#: the first word of the line the guest prints once booted
MARKER = "BMAAS-BOOTED"

INIT_SCRIPT = f"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
arg() {{ sed -n "s/.*$1=\\([^ ]*\\).*/\\1/p" /proc/cmdline; }}
via=$(arg bmaas.via)
id=$(cat /proc/sys/kernel/random/boot_id)
echo "{MARKER} via=${{via:-unknown}} boot_id=$id uptime=$(cut -d' ' -f1 /proc/uptime)" >/dev/console
if [ "$(arg bmaas.after)" = poweroff ]; then poweroff -f; fi
while :; do sleep 3600; done
"""

ISOLINUX_CFG = """DEFAULT bmaas
PROMPT 0
TIMEOUT 0
LABEL bmaas
  KERNEL /boot/vmlinuz
  INITRD /boot/initrd.gz
  APPEND console=ttyS0,115200 quiet panic=-1 bmaas.via={via}
"""

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


def _initramfs(busybox: bytes) -> bytes:
    d, f, c = 0o040755, 0o100755, 0o020600
    entries = [
        ("bin", d, b"", (0, 0)),
        ("bin/busybox", f, busybox, (0, 0)),
        ("dev", d, b"", (0, 0)),
        ("dev/console", c, b"", (5, 1)),
        ("proc", d, b"", (0, 0)),
        ("sys", d, b"", (0, 0)),
        ("init", f, INIT_SCRIPT.encode(), (0, 0)),
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


def _kernel(cache: Path) -> Path:
    """Debian's kernel: /boot's if readable, else the package's vmlinuz."""
    booted = sorted(p for p in Path("/boot").glob("vmlinuz-*") if os.access(p, os.R_OK))
    if booted:
        return booted[-1]
    depends = _run(["apt-cache", "depends", "linux-image-amd64"])
    names = [w.split(":", 1)[1].strip() for w in depends.splitlines() if "Depends:" in w]
    if not names:
        raise InputError("no kernel: /boot has none and apt knows no linux-image-amd64")
    package = names[0]
    target = cache / "kernels" / f"vmlinuz-{package.removeprefix('linux-image-')}"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        LOG.info("downloading %s (apt-get download)", package)
        _run(["apt-get", "download", "-q", package], cwd=Path(tmp))
        deb = next(Path(tmp).glob("*.deb"))
        _run(["dpkg-deb", "-x", str(deb), str(Path(tmp) / "root")])
        found = sorted((Path(tmp) / "root" / "boot").glob("vmlinuz-*"))
        if not found:
            raise InputError(f"{package} has no /boot/vmlinuz-*")
        os.replace(found[0], target)
    return target


def _need(path: Path | str, package: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p} is missing: apt-get install {package} (scripts/vm-setup.sh does)")
    return p


def build_image(cache: Path | None = None, *, force: bool = False) -> BootImage:
    """The ISO, kernel and initramfs, built once per set of inputs."""
    cache = cache or default_cache_dir()
    busybox = _need(_BUSYBOX, "busybox-static").read_bytes()
    kernel = _kernel(cache)
    isolinux = _need(_ISOLINUX / "isolinux.bin", "isolinux")
    ldlinux = _need(_SYSLINUX_BIOS / "ldlinux.c32", "syslinux-common")
    mbr = _need(_ISOLINUX / "isohdpfx.bin", "isolinux")
    if shutil.which("xorriso") is None:
        raise InputError("xorriso is missing: apt-get install xorriso (scripts/vm-setup.sh does)")
    digest = hashlib.sha256()
    for part in (
        busybox,
        kernel.read_bytes(),
        INIT_SCRIPT.encode(),
        ISOLINUX_CFG.encode(),
        isolinux.read_bytes(),
        ldlinux.read_bytes(),
    ):
        digest.update(hashlib.sha256(part).digest())
    out = cache / digest.hexdigest()[:16]
    image = BootImage(
        out / "bmaas-cdrom.iso", out / "bmaas-vmedia.iso", out / "vmlinuz", out / "initrd.gz"
    )
    if image.iso.exists() and image.vmedia_iso.exists() and not force:
        return image
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        root = Path(tmp) / "iso"
        (root / "boot").mkdir(parents=True)
        (root / "isolinux").mkdir()
        shutil.copyfile(kernel, root / "boot" / "vmlinuz")
        (root / "boot" / "initrd.gz").write_bytes(_initramfs(busybox))
        shutil.copyfile(isolinux, root / "isolinux" / "isolinux.bin")
        shutil.copyfile(ldlinux, root / "isolinux" / "ldlinux.c32")
        isos = {}
        for via in ("cdrom", "vmedia"):
            (root / "isolinux" / "isolinux.cfg").write_text(ISOLINUX_CFG.format(via=via))
            isos[via] = Path(tmp) / f"{via}.iso"
            _run(
                [
                    "xorriso",
                    "-as",
                    "mkisofs",
                    "-quiet",
                    "-o",
                    str(isos[via]),
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
        for src, dst in (
            (root / "boot" / "vmlinuz", image.kernel),
            (root / "boot" / "initrd.gz", image.initramfs),
            (isos["cdrom"], image.iso),
            (isos["vmedia"], image.vmedia_iso),
        ):
            os.replace(src, dst)
            dst.chmod(0o644)
    return image
