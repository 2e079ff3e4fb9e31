"""The VM lab's libvirt domains: small, TCG, no network, serial to a file.

Each domain is 256 MiB and 1 vCPU under qemu's TCG (``type='qemu'``: the
host's KVM may be unusable, as PVM is here), its CD drive holding the boot
image (``bmaas.via=cdrom``), no disk and no network interface at all, and its
first serial port appended to a file (``append='on'``: a power cycle or a
redefinition never truncates it, so a reader's offset stays valid).

A blank 1 MiB disk is there for the firmware's sake: with ``<boot dev='hd'/>``
and no disk, SeaBIOS is given no boot order and falls through to the CD
(measured: the marker appeared with the boot device left at ``hd``); with a
disk, libvirt gives it boot index 1 and ``-boot strict=on``, so SeaBIOS tries
the blank disk and halts. Nothing boots until a BMC sets a boot device.

Stock sushy-tools' virtual media replaces the domain's CD drives with its
own and its eject removes the drive altogether: :func:`set_cdrom` puts the
lab's drive and disc back (``hwlab vm cd``), which is how an IPMI deploy --
IPMI has no virtual media -- finds a disc to boot.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
from pathlib import Path
from xml.sax.saxutils import quoteattr

from bmaas.faults import InputError
from bmaas.hwlab.vm.image import COUNTER_DISK_BYTES

__all__ = [
    "URI",
    "blank_disk",
    "cdrom_xml",
    "define",
    "destroy",
    "domain_xml",
    "replace_cdrom",
    "set_cdrom",
    "virsh",
]

URI = "qemu:///system"


def domain_xml(
    name: str, *, serial_log: Path, cdrom: Path, disk: Path, memory_mib: int = 256
) -> str:
    return f"""<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>{memory_mib}</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <boot dev='hd'/>
    <bios rebootTimeout='-1'/>
  </os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file={quoteattr(str(disk))}/>
      <target dev='hda' bus='ide'/>
    </disk>
    {cdrom_xml(cdrom)}
    <serial type='file'>
      <source path={quoteattr(str(serial_log))} append='on'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
"""


def cdrom_xml(iso: Path) -> str:
    """The lab's CD drive (IDE, ``hdc``) holding ``iso``."""
    return (
        "<disk type='file' device='cdrom'><driver name='qemu' type='raw'/>"
        f"<source file={quoteattr(str(iso))}/><target dev='hdc' bus='ide'/><readonly/></disk>"
    )


#: a <disk ... device='cdrom' ...> element, whatever its attributes' order
_CDROM = re.compile(r"[ \t]*<disk\b[^>]*\bdevice=['\"]cdrom['\"][^>]*>.*?</disk>\n?", re.S)


def replace_cdrom(xml: str, iso: Path) -> str:
    """``xml`` (a domain's) with every CD drive gone and the lab's, holding
    ``iso``, added: what sushy-tools' virtual media left (its own drive, or
    none after an eject) becomes the lab's drive again."""
    bare = _CDROM.sub("", xml)
    if "</devices>" not in bare:
        raise InputError("the domain's XML has no <devices> element")
    return bare.replace("</devices>", f"  {cdrom_xml(iso)}\n  </devices>", 1)


def set_cdrom(name: str, iso: Path, workdir: Path, *, uri: str = URI) -> None:
    """Put the lab's CD drive, holding ``iso``, in ``name``'s definition (a
    running domain takes it at its next cold start, as libvirt does)."""
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


def blank_disk(path: Path, size: int = COUNTER_DISK_BYTES) -> Path:
    """A zeroed raw disk (sparse): no boot signature, the firmware moves on.
    The guest keeps its boot count in sector 1 (image.py)."""
    with path.open("wb") as f:
        f.truncate(size)
    return path


def define(name: str, xml: str, workdir: Path, *, uri: str = URI) -> None:
    """(Re)define ``name`` from ``xml``, shut off."""
    destroy(name, uri=uri)
    path = workdir / f"{name}.xml"
    path.write_text(xml)
    virsh("define", str(path), uri=uri)


def destroy(name: str, *, uri: str = URI) -> None:
    """Stop and undefine ``name`` if it exists. Safe twice."""
    with contextlib.suppress(InputError):
        virsh("destroy", name, uri=uri, check=False)
        virsh("undefine", name, uri=uri, check=False)
