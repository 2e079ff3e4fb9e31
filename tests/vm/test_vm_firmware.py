"""Firmware changes on a real guest, through the stock emulators (issue 51),
and IPMI in front of a UEFI guest (issue 49). One UEFI lab (Secure Boot on,
:func:`tests.vm.conftest.uefi_lab`); the tests run in file order, four guest
boots in all. Witnessed on the machine:

- IPMI (stock vbmc) powers the UEFI guest on and off and sets its boot
  device to the CD and back to the disk: a deploy by IPMI boots the lab's
  signed CD once (``fw=uefi sb=on``), and, off, the BMC reads ``disk``.
  First in the file: sushy-tools' boot override gives the disks libvirt's
  per-device boot order, which vbmc's ``<os><boot dev>`` cannot join.
- A node's ``boot_mode`` sent with the override (``BootSourceOverrideMode``)
  makes sushy-tools' libvirt driver rewrite the domain's loader: ``bios``
  boots the same q35 machine under SeaBIOS (the BIOS image, ``fw=bios``),
  ``uefi`` under OVMF again -- with Secure Boot *off* (``sb=off``): the
  switch back starts the variables from the template without keys.
- ``bmaas bios set`` through sushy-tools: the attribute is current at once
  (sushy-tools keeps it in the domain's metadata; nothing waits for a
  reset), and ``--reboot`` cold-starts the guest and reads it back.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bmaas.deadline import Deadline
from bmaas.hwlab.vm import domain
from bmaas.hwlab.vm.lab import VmLab
from tests.vm.support import (
    CDROM,
    VMEDIA,
    bmaas,
    booted_once,
    deploy_one,
    enroll,
    markers,
    node_quirks,
    power_off_all,
    redfish_driver,
)

pytestmark = pytest.mark.vm


def _one(done_stdout: str) -> object:
    """The one node's result of a fleet command's ``--json``."""
    (row,) = json.loads(done_stdout)["results"]
    return row["result"]


@pytest.mark.timeout(360)  # its deploy's --deadline and the commands around it
def test_ipmi_powers_a_uefi_guest_and_sets_its_boot_device_to_cd_and_disk(
    uefi_lab: VmLab, tmp_path: Path
) -> None:
    (name,) = uefi_lab.domains
    try:
        result, before = deploy_one(
            tmp_path, uefi_lab, "ipmi", "--ready-pattern", CDROM, "--deadline", "240"
        )
        assert result["ok"] == 1, result
        assert [r["boot"] for r in result["requests"]] == ["cdrom"], result
        booted_once(uefi_lab, name, before, "cdrom")
        assert markers(uefi_lab, name)[-1].endswith("fw=uefi sb=on")
        assert "boot_reads_running" in node_quirks(tmp_path, name)
    finally:
        power_off_all(tmp_path, uefi_lab)
    done = bmaas(tmp_path, "power", "status", name, "--json", "--deadline", "60")
    assert done.returncode == 0, done.stderr
    assert "off" in str(_one(done.stdout)).lower(), done.stdout
    done = bmaas(tmp_path, "boot-device", "get", name, "--json", "--deadline", "60")
    assert done.returncode == 0, done.stderr
    assert _one(done.stdout)["device"] == "disk", done.stdout  # type: ignore[index]


@pytest.mark.timeout(600)  # two deploys' --deadline and the commands around them
def test_a_boot_mode_sent_through_sushy_tools_switches_the_guests_firmware(
    uefi_lab: VmLab, uefi_url: str, tmp_path: Path
) -> None:
    (name,) = uefi_lab.domains
    bios_url = uefi_url.rsplit("/", 1)[0] + "/bmaas-vmedia.iso"
    legs = (("bios", bios_url, "fw=bios sb=off"), ("uefi", uefi_url, "fw=uefi sb=off"))
    for mode, url, said in legs:
        result, before = deploy_one(
            tmp_path, uefi_lab, "redfish", "--image", url, "--ready-pattern", VMEDIA,
            "--deadline", "240", boot_mode=mode,
        )  # fmt: skip
        assert result["ok"] == 1, (mode, result)
        booted_once(uefi_lab, name, before, "vmedia")
        assert markers(uefi_lab, name)[-1].endswith(said), (mode, markers(uefi_lab, name))
        driver = redfish_driver(uefi_lab)
        assert driver.get_boot_mode(deadline=Deadline.after(30)) == mode
        undone = bmaas(tmp_path, "undeploy", "--all", "--deadline", "120")
        assert undone.returncode == 0, undone.stderr


@pytest.mark.timeout(300)
def test_bios_set_through_sushy_tools_is_current_at_once_and_reads_back_after_a_reboot(
    uefi_lab: VmLab, tmp_path: Path
) -> None:
    (name,) = uefi_lab.domains
    libvirt_name = uefi_lab.domain(name)
    enroll(tmp_path, uefi_lab, "redfish")
    done = bmaas(tmp_path, "bios", "get", name, "--json", "--deadline", "60")
    assert done.returncode == 0, done.stderr
    assert _one(done.stdout)["current"]["ProcTurboMode"] == "Enabled", done.stdout  # type: ignore[index]

    # a value the registry sushy-tools publishes does not list: nothing sent
    done = bmaas(tmp_path, "bios", "set", name, "ProcTurboMode=Sometimes", "--json")
    assert done.returncode == 1, done.stdout
    (row,) = json.loads(done.stdout)["results"]
    assert "Sometimes" in json.dumps(row), row

    done = bmaas(tmp_path, "bios", "set", name, "ProcTurboMode=Disabled", "--json")
    assert done.returncode == 0, done.stderr
    assert _one(done.stdout) == {"pending": {}}, done.stdout  # nothing waits for a reset
    done = bmaas(tmp_path, "bios", "get", name, "--json", "--deadline", "60")
    assert _one(done.stdout)["current"]["ProcTurboMode"] == "Disabled", done.stdout  # type: ignore[index]
    assert 'name="ProcTurboMode" value="Disabled"' in domain.virsh("dumpxml", libvirt_name)

    done = bmaas(tmp_path, "power", "on", name, "--deadline", "60")
    assert done.returncode == 0, done.stderr
    running = domain.virsh("domid", libvirt_name).strip()
    done = bmaas(
        tmp_path, "bios", "set", name, "ProcTurboMode=Enabled", "--reboot", "--timeout", "120",
        "--json", "--deadline", "200",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _one(done.stdout) == {
        "applied": {"ProcTurboMode": "Enabled"},
        "pending": {},
        "rebooted": True,
    }, done.stdout
    # ForceRestart is a cold start: another qemu process, the value kept
    assert domain.virsh("domid", libvirt_name).strip() not in ("", running)
    assert 'name="ProcTurboMode" value="Enabled"' in domain.virsh("dumpxml", libvirt_name)
    power_off_all(tmp_path, uefi_lab)
