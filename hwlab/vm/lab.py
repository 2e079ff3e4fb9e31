"""``hwlab vm up`` / ``down``: N small VMs behind stock sushy-tools and vbmc.

::

    STATE_DIR/vm.json          what is running: domains, emulator pids, ports
    STATE_DIR/inventory.yaml   one node per VM (redfish_* and ipmi_* keys)
    STATE_DIR/serial/<vm>.log  each VM's ttyS0, appended (the boot marker)
    STATE_DIR/disks/<vm>.img   a blank 1 MiB disk (see domain.py: why)
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
import dataclasses
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from bmaas.faults import InputError
from bmaas.hwlab.inventory import dump_inventory
from bmaas.hwlab.proxy.stock import StockSushy, StockVbmc
from bmaas.hwlab.pyexec import python_argv
from bmaas.hwlab.statefiles import prepare_dir, write_private
from bmaas.hwlab.vm import domain
from bmaas.hwlab.vm.image import build_image
from bmaas.yamlsrc import load_text

__all__ = ["VmLab", "down", "insert_cd", "up"]

#: virtualbmc's defaults: what the stock BMCs (and the proxies) log in with
USER, PASSWORD = "admin", "password"


@dataclasses.dataclass
class VmLab:
    state_dir: Path
    domains: list[str]
    proxies: bool = False
    #: process group leaders hwlab started (sushy-emulator, vbmcd); none with proxies
    pids: dict[str, int] = dataclasses.field(default_factory=dict)
    #: what each VM's own CD drive holds (``hwlab vm up --cdrom``; default the
    #: lab's ``via=cdrom`` ISO): what an IPMI deploy boots
    iso: str = ""
    vmedia_iso: str = ""
    #: domain name -> libvirt UUID: sushy-emulator's Redfish id of the system
    uuids: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def lab_dir(self) -> Path:
        return self.state_dir / "lab"

    def serial_log(self, name: str) -> Path:
        return self.state_dir / "serial" / f"{name}.log"

    @property
    def serial_template(self) -> str:
        """The path of each node's serial log, ``{node}`` for its name."""
        return str(self.state_dir / "serial" / "{node}.log")

    def save(self) -> None:
        write_private(self.state_dir / "vm.json", json.dumps(dataclasses.asdict(self), default=str))

    @classmethod
    def load(cls, state_dir: Path) -> VmLab | None:
        path = state_dir / "vm.json"
        if not path.exists():
            return None
        raw = json.loads(path.read_text())
        raw["state_dir"] = Path(raw["state_dir"])
        return cls(**raw)


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
            "ipmi_port": vbmc.ports[name],
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
            ("ipmi", "vbmc", name),  # vbmc looks domains up by name only
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
) -> VmLab:
    """Define and start the lab's emulators (the VMs stay off: a BMC powers them).

    ``cdrom``: the ISO each VM's own CD drive holds (default: the lab's, which
    says ``via=cdrom``); the inventory's ``deploy_boot_device: cdrom`` has a
    deploy without virtual media (IPMI) boot it."""
    if cdrom is not None and not cdrom.is_file():
        raise InputError(f"{cdrom}: no such ISO", field="cdrom")
    old = VmLab.load(state_dir)
    if old is not None:
        raise InputError(f"a VM lab is up in {state_dir} (hwlab vm down first)")
    prepare_dir(state_dir)
    for sub in ("serial", "disks", "xml"):
        (state_dir / sub).mkdir(mode=0o700, exist_ok=True)
    image = build_image()
    lab = VmLab(
        state_dir,
        [f"{prefix}-{i}" for i in range(1, count + 1)],
        proxies,
        iso=str(cdrom.resolve() if cdrom is not None else image.iso),
        vmedia_iso=str(image.vmedia_iso),
    )
    lab.save()  # from here on, down() can undo what was done
    try:
        for name in lab.domains:
            xml = domain.domain_xml(
                name,
                serial_log=lab.serial_log(name),
                cdrom=Path(lab.iso),
                memory_mib=memory_mib,
                disk=domain.blank_disk(state_dir / "disks" / f"{name}.img"),
            )
            domain.define(name, xml, state_dir / "xml")
            lab.uuids[name] = domain.virsh("domuuid", name).strip()
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
            lab.pids["sushy-emulator"] = sushy.pid
            lab.save()
            vbmc = StockVbmc(
                state_dir / "vbmc",
                lab.domains,
                libvirt_uri=domain.URI,
                username=USER,
                password=PASSWORD,
            )
            vbmc.start()
            assert vbmc.pid is not None
            lab.pids["vbmcd"] = vbmc.pid
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
        domain.set_cdrom(name, Path(lab.iso), state_dir / "xml")
    return lab


def _ours(pid: int, what: str) -> bool:
    """Is ``pid`` still the process we started (not a reused pid)?"""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return {"sushy-emulator": "sushy_tools", "vbmcd": "virtualbmc"}[what] in cmdline


def down(state_dir: Path) -> list[str]:
    """Stop everything ``up`` started; what was stopped. Safe twice."""
    lab = VmLab.load(state_dir)
    if lab is None:
        return []
    done = []
    if lab.proxies and (lab.lab_dir / "lab.json").exists():
        with contextlib.suppress(InputError):
            _hwlab("down", "--state-dir", str(lab.lab_dir))
            done.append("proxied lab")
    for what, pid in lab.pids.items():
        if _ours(pid, what):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
            done.append(what)
    for name in lab.domains:
        domain.destroy(name)
        done.append(name)
    (state_dir / "vm.json").unlink()
    return done
