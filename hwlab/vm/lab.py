"""``hwlab vm up`` / ``down``: N small VMs behind stock sushy-tools and vbmc.

::

    STATE_DIR/vm.json          what is running: domains, emulator pids, ports
    STATE_DIR/inventory.yaml   one node per VM (redfish_* and ipmi_* keys)
    STATE_DIR/serial/<vm>.log  each VM's ttyS0, appended (the boot marker)
    STATE_DIR/disks/<vm>.img   a blank 64 MiB disk (see domain.py: why)
    STATE_DIR/sushy, vbmc      the stock emulators' config and logs
    STATE_DIR/lab              with proxies: the hwlab lab in front (hwlab fault
                               add NODE ... --state-dir STATE_DIR/lab)

Without proxies hwlab starts sushy-emulator (libvirt driver, one service for
every VM) and vbmcd (one BMC per VM) itself, in their own sessions, and
records their pids; with proxies it writes a lab file whose nodes are
``stock: sushy`` / ``stock: vbmc`` proxies for the domains and runs ``hwlab
up --lab-file`` on STATE_DIR/lab, so every fault rule and incident applies
to the VMs. Everything binds 127.0.0.1; the guests have no network.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import subprocess
from pathlib import Path
from typing import Any

from bmaas import validate
from bmaas.faults import InputError
from bmaas.hwlab.inventory import dump_inventory
from bmaas.hwlab.procmark import ProcessMark
from bmaas.hwlab.proxy.stock import StockSushy, StockVbmc
from bmaas.hwlab.pyexec import python_argv
from bmaas.hwlab.statefiles import prepare_dir, write_private
from bmaas.hwlab.vm import domain
from bmaas.hwlab.vm.image import build_image
from bmaas.hwlab.vm.state import MAX_VMS, VmLab
from bmaas.yamlsrc import load_text

__all__ = ["MAX_VMS", "VmLab", "down", "insert_cd", "machine_fault", "up"]

LOG = logging.getLogger(__name__)

#: virtualbmc's defaults: what the stock BMCs (and the proxies) log in with
USER, PASSWORD = "admin", "password"


def _hwlab(*args: str) -> None:
    done = subprocess.run(  # noqa: S603 - our own CLI
        python_argv("-c", "from bmaas.hwlab.cli import main; main()", *args),
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
    )
    if done.returncode != 0:
        raise InputError(f"hwlab {args[0]}: {done.stderr.strip() or done.returncode}")


def _entries_direct(lab: VmLab, sushy: StockSushy, vbmc: StockVbmc) -> dict[str, dict[str, Any]]:
    return {
        name: {
            "redfish_address": sushy.url,
            "redfish_system_id": f"/redfish/v1/Systems/{lab.uuids[name]}",
            "redfish_username": USER,
            "redfish_password": PASSWORD,
            "ipmi_address": vbmc.host,
            "ipmi_port": vbmc.ports[lab.domain(name)],
            "ipmi_username": USER,
            "ipmi_password": PASSWORD,
            "ipmi_cipher_suite": 3,  # virtualbmc (pyghmi's BMC) speaks suite 3 only
        }
        for name in lab.domains
    }


def _entries_proxied(lab: VmLab) -> dict[str, dict[str, Any]]:
    nodes = [
        {
            "name": f"{name}-{protocol}",
            "proxy": {
                "protocol": protocol,
                "stock": stock,
                "domain": domain_id,
                "libvirt_uri": domain.URI,
                "username": USER,
                "password": PASSWORD,
            },
        }
        for name in lab.domains
        for protocol, stock, domain_id in (
            ("redfish", "sushy", lab.uuids[name]),
            ("ipmi", "vbmc", lab.domain(name)),  # vbmc looks domains up by name only
        )
    ]
    lab_file = lab.state_dir / "lab-file.yaml"
    write_private(lab_file, dump_inventory({"nodes": nodes}))
    _hwlab("up", "--lab-file", str(lab_file), "--state-dir", str(lab.lab_dir), "--seed", "38")
    proxied = load_text((lab.lab_dir / "inventory.yaml").read_text(), source="inventory.yaml")
    by_name = {n["name"]: n["driver_info"] for n in proxied["nodes"]}
    entries = {}
    for name in lab.domains:
        info = {**by_name[f"{name}-redfish"], **by_name[f"{name}-ipmi"]}
        info["ipmi_cipher_suite"] = 3
        entries[name] = info
    return entries


def up(
    state_dir: Path,
    *,
    count: int = 2,
    proxies: bool = False,
    driver: str = "redfish",
    prefix: str = "bmaas-vm",
    memory_mib: int = 256,
    cdrom: Path | None = None,
    firmware: str = "bios",
) -> VmLab:
    """Define and start the lab's emulators (the VMs stay off: a BMC powers them).

    ``cdrom``: the ISO each VM's own CD drive holds (default: the lab's, which
    says ``via=cdrom``); the inventory's ``deploy_boot_device: cdrom`` has a
    deploy without virtual media (IPMI) boot it. ``firmware``: one of
    :data:`domain.FIRMWARE`; a UEFI lab's CD drives and deploy image are the
    UEFI ones (signed: they boot with Secure Boot on), its VMs' variables in
    ``STATE_DIR/nvram``."""
    try:
        validate.whole(count, low=1, high=MAX_VMS, what="a number of VMs")
    except ValueError as exc:
        raise InputError(str(exc), field="count") from None
    if cdrom is not None and not cdrom.is_file():
        raise InputError(f"{cdrom}: no such ISO", field="cdrom")
    if firmware not in domain.FIRMWARE:
        raise InputError(f"{firmware!r}: one of {', '.join(domain.FIRMWARE)}", field="firmware")
    state_dir = state_dir.absolute()  # vm.json and the domains name it
    old = VmLab.load(state_dir)
    if old is not None:
        raise InputError(f"a VM lab is up in {state_dir} (hwlab vm down first)")
    _refuse_foreign(VmLab(state_dir, [f"{prefix}-{i}" for i in range(1, count + 1)]))
    prepare_dir(state_dir)
    for sub in ("serial", "disks", "xml", "nvram"):
        (state_dir / sub).mkdir(mode=0o700, exist_ok=True)
    image = build_image()
    uefi = firmware != "bios"
    default_cd, vmedia = (
        (image.uefi_iso, image.uefi_vmedia_iso) if uefi else (image.iso, image.vmedia_iso)
    )
    lab = VmLab(
        state_dir,
        [f"{prefix}-{i}" for i in range(1, count + 1)],
        proxies,
        iso=str(cdrom.resolve() if cdrom is not None else Path(default_cd).absolute()),
        vmedia_iso=str(Path(vmedia).absolute()),
    )
    lab.save()  # from here on, down() can undo what was done
    try:
        for name in lab.domains:
            xml = domain.domain_xml(
                lab.domain(name),
                serial_log=lab.serial_log(name),
                cdrom=Path(lab.iso),
                memory_mib=memory_mib,
                disk=domain.blank_disk(state_dir / "disks" / f"{name}.img"),
                description=domain.describe(lab.lab_id, state_dir),
                firmware=firmware,
                nvram=state_dir / "nvram" / f"{name}_VARS.fd",
            )
            domain.define(lab.domain(name), xml, state_dir / "xml", lab=lab.lab_id)
            lab.uuids[name] = domain.virsh("domuuid", lab.domain(name)).strip()
        lab.save()
        if proxies:
            entries = _entries_proxied(lab)
        else:
            # Stock sushy-tools answers a system by name with a 307 to its
            # UUID, then refuses the UUID unless the allow-list names it too
            # (a 500 from its own error path: error.NotFound on a function):
            # allow the UUIDs, and give bmaas the UUID paths (no redirect).
            sushy = StockSushy(
                state_dir / "sushy", list(lab.uuids.values()), libvirt_uri=domain.URI
            )
            sushy.start()
            assert sushy.pid is not None
            lab.pids["sushy-emulator"] = ProcessMark.of(sushy.pid)
            lab.save()
            vbmc = StockVbmc(
                state_dir / "vbmc",
                [lab.domain(name) for name in lab.domains],
                libvirt_uri=domain.URI,
                username=USER,
                password=PASSWORD,
            )
            vbmc.start()
            assert vbmc.pid is not None
            lab.pids["vbmcd"] = ProcessMark.of(vbmc.pid)
            lab.save()
            entries = _entries_direct(lab, sushy, vbmc)
    except BaseException:
        down(state_dir)
        raise
    nodes = [
        {
            "name": name,
            "driver": driver,
            # no network, so no PXE: without virtual media (IPMI) a deploy
            # boots the CD drive, which holds what the lab put there
            "driver_info": {**entries[name], "deploy_boot_device": "cdrom"},
            "resource_class": "vm",
            "properties": {"cpus": 1, "memory_mb": memory_mib, "vendor": "qemu", "model": "tcg"},
        }
        for name in lab.domains
    ]
    write_private(state_dir / "inventory.yaml", dump_inventory({"nodes": nodes}))
    return lab


def insert_cd(state_dir: Path, iso: Path | None = None) -> VmLab:
    """Put each VM's CD drive back, holding ``iso`` (default: what ``up``
    put there). Stock sushy-tools' virtual media takes the drive over and
    its eject removes it: after a deploy by virtual media, an IPMI deploy
    would find no disc. Takes effect at each VM's next cold start."""
    lab = VmLab.load(state_dir)
    if lab is None:
        raise InputError(f"no VM lab is up in {state_dir} (hwlab vm up first)")
    if iso is not None:
        if not iso.is_file():
            raise InputError(f"{iso}: no such ISO", field="iso")
        lab.iso = str(iso.resolve())
        lab.save()
    (state_dir / "xml").mkdir(mode=0o700, exist_ok=True)
    for name in lab.domains:
        domain.set_cdrom(lab.domain(name), Path(lab.iso), state_dir / "xml", lab=lab.lab_id)
    return lab


def machine_fault(state_dir: Path, node: str, fault: str | None) -> VmLab:
    """Make VM ``node``'s own boots fail with ``fault`` (``panic`` or
    ``hang``; None ends it): marked on its disk, which the lab's images read
    at every boot, whatever they boot from (image.py). A failure on the
    machine, where a proxy can only refuse ``boot_crash``. Set it with the VM
    off; a wipe of the disk ends it too."""
    lab = VmLab.load(state_dir)
    if lab is None:
        raise InputError(f"no VM lab is up in {state_dir} (hwlab vm up first)")
    if node not in lab.domains:
        raise InputError(f"{node!r}: not a VM of this lab ({', '.join(lab.domains)})", field="node")
    domain.machine_fault(state_dir / "disks" / f"{node}.img", fault)
    return lab


def _refuse_foreign(lab: VmLab) -> None:
    """Refuse, before anything is made, a lab whose domain names exist and
    are not its own (every one named, one line each)."""
    problems = []
    for name in lab.domains:
        held = domain.owner(lab.domain(name))
        if held is not None and held != lab.lab_id:
            whose = f"lab {held}'s" if held else "not made by an hwlab VM lab"
            problems.append(f"libvirt domain {lab.domain(name)} exists and is {whose}")
    if problems:
        raise InputError(
            "\n".join(problems) + "\n(left alone: its lab's `hwlab vm down`, "
            "or docs/lab.md's host teardown)"
        )


def down(state_dir: Path) -> list[str]:
    """Stop everything ``up`` started -- its emulators, its own domains (each
    proven its lab's by its description) and the pool volumes sushy-tools
    made for them -- and nothing else; what was stopped. Safe twice."""
    lab = VmLab.load(state_dir)
    if lab is None:
        return []
    done = []
    if lab.proxies and (lab.lab_dir / "lab.json").exists():
        with contextlib.suppress(InputError):
            _hwlab("down", "--state-dir", str(lab.lab_dir))
            done.append("proxied lab")
    for what, mark in lab.pids.items():
        # only the process hwlab started, proven by its start time and
        # executable (procmark.py); never a process chosen by its name
        if mark.signal_group(signal.SIGTERM):
            done.append(what)
        else:
            LOG.warning(
                "%s (pid %d): not signalled: no longer the process hwlab started", what, mark.pid
            )
    for name in lab.domains:
        domain.destroy(lab.domain(name), lab=lab.lab_id)
        done.append(name)
    done += domain.delete_volumes(sorted(lab.uuids.values()))
    (state_dir / "vm.json").unlink()
    return done
