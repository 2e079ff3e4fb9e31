"""The VM lab's libvirt domains: small, TCG, no network, serial to a file.

Each domain is 256 MiB and 1 vCPU under qemu's TCG (``type='qemu'``: the
host's KVM may be unusable, as PVM is here), its CD drive holding the boot
image (``bmaas.via=cdrom``), no disk and no network interface at all, and its
first serial port appended to a file (``append='on'``: a power cycle or a
redefinition never truncates it, so a reader's offset stays valid).

A blank 64 MiB disk is there for the firmware's sake: with ``<boot dev='hd'/>``
and no disk, SeaBIOS is given no boot order and falls through to the CD
(measured: the marker appeared with the boot device left at ``hd``); with a
disk, libvirt gives it boot index 1 and ``-boot strict=on``, so SeaBIOS tries
the blank disk and halts. Nothing boots until a BMC sets a boot device.

Labs share a host (issue 49): every domain is named with its lab's id (a
short hash of the state dir, :func:`lab_id`) and says so in its
``<description>`` (``hwlab-vm lab=ID state_dir=DIR``). :func:`define` and
:func:`destroy` read that description first and never touch a domain that
is not their lab's -- another lab's, or one hwlab did not make -- and
:func:`delete_volumes` removes only the pool volumes sushy-tools made for
the lab's own domains (named after each domain's UUID).

Stock sushy-tools' virtual media replaces the domain's CD drives with its
own and its eject removes the drive altogether: :func:`set_cdrom` puts the
lab's drive and disc back (``hwlab vm cd``), which is how an IPMI deploy --
IPMI has no virtual media -- finds a disc to boot.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import subprocess
from collections.abc import Collection
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from bmaas.faults import InputError
from bmaas.hwlab.vm.image import COUNTER_DISK_BYTES, COUNTER_SECTOR, FAULT_SECTOR, MACHINE_FAULTS

__all__ = [
    "FIRMWARE",
    "OVMF_CODE",
    "OVMF_VARS",
    "POOL",
    "SEABIOS",
    "URI",
    "blank_disk",
    "cdrom_xml",
    "define",
    "delete_volumes",
    "describe",
    "destroy",
    "domain_xml",
    "lab_id",
    "machine_fault",
    "owner",
    "replace_cdrom",
    "set_cdrom",
    "virsh",
]

LOG = logging.getLogger(__name__)

URI = "qemu:///system"

#: what a lab's VMs boot with: SeaBIOS (i440fx, IDE), or OVMF (q35, SATA,
#: SMM) with Secure Boot off (no keys enrolled) or on (Debian's snakeoil
#: key in PK, KEK and db: the lab's UEFI images are signed with it, see
#: :mod:`.uefi`)
FIRMWARE = ("bios", "uefi", "uefi-secure")
#: Debian's ovmf: one firmware for both UEFI kinds (Secure Boot capable, so
#: it wants SMM); the variables template decides whether keys are enrolled
OVMF_CODE = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
OVMF_VARS = {
    "uefi": "/usr/share/OVMF/OVMF_VARS_4M.fd",
    "uefi-secure": "/usr/share/OVMF/OVMF_VARS_4M.snakeoil.fd",
}
#: SeaBIOS as a ``<loader type='rom'>`` (Debian's seabios, qemu's own
#: dependency): what sushy-tools writes for a ``Legacy`` boot mode -- libvirt
#: refuses a rom loader without a path where the domain names its firmware
SEABIOS = "/usr/share/seabios/bios-256k.bin"
#: the pool sushy-tools copies a virtual-media image into (its default)
POOL = "default"
#: what a lab's domain says in its <description>
_OWNER = re.compile(r"\bhwlab-vm lab=([0-9a-f]{8,64})\b")
_DESCRIPTION = re.compile(r"<description>(.*?)</description>", re.S)


def lab_id(state_dir: Path) -> str:
    """The id of the lab kept in ``state_dir`` (8 hex digits of its absolute
    path's SHA-256): in every domain name and description the lab makes."""
    return hashlib.sha256(str(state_dir.absolute()).encode()).hexdigest()[:8]


def describe(lab: str, state_dir: Path) -> str:
    """The ``<description>`` text that marks a domain as ``lab``'s."""
    return f"hwlab-vm lab={lab} state_dir={state_dir.absolute()}"


def owner(name: str, *, uri: str = URI) -> str | None:
    """Whose domain ``name`` is: its lab's id; ``""`` when it exists but no
    hwlab lab made it (no description naming one); None when there is none."""
    done = _answer("dumpxml", "--inactive", name, uri=uri)
    if done is None:
        return None
    found = _DESCRIPTION.search(done)
    mark = _OWNER.search(found.group(1)) if found else None
    return mark.group(1) if mark else ""


def domain_xml(
    name: str,
    *,
    serial_log: Path,
    cdrom: Path,
    disk: Path,
    memory_mib: int = 256,
    description: str = "",
    firmware: str = "bios",
    nvram: Path | None = None,
) -> str:
    """The domain's definition; ``firmware`` one of :data:`FIRMWARE` (a UEFI
    one keeps its variables in ``nvram``, made from the template by
    libvirt)."""
    bus = _bus(firmware)
    if firmware == "bios":
        machine, loader, features = "pc", "", "<acpi/>"
    else:
        if nvram is None:
            raise InputError("a UEFI VM needs a file for its variables", field="nvram")
        machine, features = "q35", "<acpi/><smm state='on'/>"
        loader = (
            f"<loader readonly='yes' secure='yes' type='pflash'>{OVMF_CODE}</loader>\n    "
            f"<nvram template={quoteattr(OVMF_VARS[firmware])}>{escape(str(nvram))}</nvram>\n    "
        )
    return f"""<domain type='qemu'>
  <name>{name}</name>
  <description>{escape(description)}</description>
  <memory unit='MiB'>{memory_mib}</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='{machine}'>hvm</type>
    {loader}<boot dev='hd'/>
    <bios rebootTimeout='-1'/>
  </os>
  <features>{features}</features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file={quoteattr(str(disk))}/>
      <target dev={quoteattr(_DISK_TARGET[bus])} bus='{bus}'/>
    </disk>
    {cdrom_xml(cdrom, bus)}
    <serial type='file'>
      <source path={quoteattr(str(serial_log))} append='on'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
"""


#: the disk's and the CD drive's target on each bus
_DISK_TARGET = {"ide": "hda", "sata": "sda"}
_CD_TARGET = {"ide": "hdc", "sata": "sdb"}


def _bus(firmware: str) -> str:
    if firmware not in FIRMWARE:
        raise InputError(f"{firmware!r}: one of {', '.join(FIRMWARE)}", field="firmware")
    return "ide" if firmware == "bios" else "sata"  # q35 has no IDE


def cdrom_xml(iso: Path, bus: str = "ide") -> str:
    """The lab's CD drive (IDE ``hdc``, or SATA ``sdb`` on a UEFI VM's q35)
    holding ``iso``."""
    return (
        "<disk type='file' device='cdrom'><driver name='qemu' type='raw'/>"
        f"<source file={quoteattr(str(iso))}/><target dev={quoteattr(_CD_TARGET[bus])} "
        f"bus={quoteattr(bus)}/><readonly/></disk>"
    )


#: a q35 machine (libvirt writes it out as ``pc-q35-<version>``): no IDE bus
_Q35 = re.compile(r"<type\b[^>]*\bmachine=['\"](pc-)?q35")
#: a <disk ... device='cdrom' ...> element, whatever its attributes' order
_CDROM = re.compile(r"[ \t]*<disk\b[^>]*\bdevice=['\"]cdrom['\"][^>]*>.*?</disk>\n?", re.S)


def replace_cdrom(xml: str, iso: Path) -> str:
    """``xml`` (a domain's) with every CD drive gone and the lab's, holding
    ``iso``, added: what sushy-tools' virtual media left (its own drive, or
    none after an eject) becomes the lab's drive again."""
    bare = _CDROM.sub("", xml)
    if "</devices>" not in bare:
        raise InputError("the domain's XML has no <devices> element")
    bus = "sata" if _Q35.search(bare) else "ide"
    return bare.replace("</devices>", f"  {cdrom_xml(iso, bus)}\n  </devices>", 1)


def set_cdrom(name: str, iso: Path, workdir: Path, *, lab: str, uri: str = URI) -> None:
    """Put the lab's CD drive, holding ``iso``, in ``name``'s definition (a
    running domain takes it at its next cold start, as libvirt does); only
    in ``lab``'s own domain."""
    held = owner(name, uri=uri)
    if held != lab:
        raise InputError(f"libvirt domain {name} is not lab {lab}'s: left alone", field="domain")
    xml = replace_cdrom(virsh("dumpxml", "--inactive", name, uri=uri), iso)
    path = workdir / f"{name}.xml"
    path.write_text(xml)
    virsh("define", str(path), uri=uri)


def virsh(*args: str, uri: str = URI, check: bool = True, timeout: float = 60.0) -> str:
    try:
        done = subprocess.run(  # noqa: S603 - virsh, our arguments
            ["virsh", "-q", "-c", uri, *args],  # noqa: S607 - virsh from PATH
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"virsh {args[0]}: {exc} (run scripts/vm-setup.sh)") from exc
    if check and done.returncode != 0:
        raise InputError(f"virsh {args[0]}: {done.stderr.strip()} (run scripts/vm-setup.sh)")
    return done.stdout


def _answer(*args: str, uri: str = URI) -> str | None:
    """virsh's output, or None when it failed (no such domain, pool...)."""
    try:
        return virsh(*args, uri=uri)
    except InputError:
        return None


def blank_disk(path: Path, size: int = COUNTER_DISK_BYTES) -> Path:
    """A zeroed raw disk (sparse): no boot signature, the firmware moves on.
    The guest keeps its boot count in its last sector (image.py); a deploy
    that writes the disk puts its image from sector 0 (``--to-disk``)."""
    with path.open("wb") as f:
        f.truncate(size)
    return path


def wipe_disk(path: Path) -> Path:
    """``path`` blank again (what a writer put there gone: the firmware moves
    on) but for the last sector: the guest's boot count goes on counting."""
    with path.open("r+b") as f:
        f.seek(COUNTER_SECTOR * 512)
        count = f.read(512)
    blank_disk(path)
    with path.open("r+b") as f:
        f.seek(COUNTER_SECTOR * 512)
        f.write(count)
    return path


def machine_fault(path: Path, fault: str | None) -> Path:
    """Set (or with None clear) a fault the machine ``path`` is the disk of
    shows at its next boots, whatever it boots: one of
    :data:`~.image.MACHINE_FAULTS`, in the sector the lab's images read it
    from (image.py). The domain should be off: a running guest reads it once
    per boot, and may have read it already."""
    if fault is not None and fault not in MACHINE_FAULTS:
        raise InputError(f"{fault!r}: one of {', '.join(MACHINE_FAULTS)}", field="fault")
    word = f"BMAAS-FAULT {fault}\n".encode() if fault else b""
    with path.open("r+b") as f:
        f.seek(FAULT_SECTOR * 512)
        f.write(word.ljust(512, b"\0"))
    return path


def define(name: str, xml: str, workdir: Path, *, lab: str, uri: str = URI) -> None:
    """(Re)define ``name`` from ``xml``, shut off. A domain of that name that
    is not ``lab``'s is refused (:class:`InputError`), never destroyed."""
    held = owner(name, uri=uri)
    if held is not None and held != lab:
        whose = f"lab {held}'s" if held else "not made by an hwlab VM lab"
        raise InputError(
            f"libvirt domain {name} exists and is {whose}: left alone "
            "(its lab's `hwlab vm down`, or docs/lab.md's host teardown)",
            field="domain",
        )
    destroy(name, lab=lab, uri=uri)
    path = workdir / f"{name}.xml"
    path.write_text(xml)
    virsh("define", str(path), uri=uri)


def destroy(name: str, *, lab: str, uri: str = URI) -> bool:
    """Stop and undefine ``name`` if it exists and is ``lab``'s; whether it
    was. Another lab's domain, or one hwlab did not make, is left alone
    (logged). Safe twice."""
    held = owner(name, uri=uri)
    if held is None:
        return False
    if held != lab:
        LOG.warning("libvirt domain %s is not lab %s's (%r): left alone", name, lab, held)
        return False
    with contextlib.suppress(InputError):
        virsh("destroy", name, uri=uri, check=False)
        virsh("undefine", name, "--nvram", uri=uri, check=False)  # a UEFI VM's variables too
    return True


def delete_volumes(uuids: Collection[str], *, pool: str = POOL, uri: str = URI) -> list[str]:
    """Delete the volumes sushy-tools' virtual media copied into ``pool``
    for the domains of ``uuids`` (it names each ``<image>-<domain UUID>.img``),
    none else; the names deleted. No pool, no volumes: nothing to do."""
    if not uuids:
        return []
    listing = _answer("vol-list", "--pool", pool, uri=uri)
    deleted = []
    for line in (listing or "").splitlines():
        fields = line.split()
        if not fields:
            continue
        volume = fields[0]
        ours = any(volume.endswith(f"-{uuid}.img") for uuid in uuids)
        if ours and _answer("vol-delete", volume, "--pool", pool, uri=uri) is not None:
            deleted.append(volume)
    return deleted
