"""Deploys that really boot: two libvirt VMs (TCG) behind stock sushy-tools and
vbmc, with hwlab's proxies in front. Each VM prints ``BMAAS-BOOTED via=<medium>
boot=<n>`` on its serial console once its firmware has booted something, ``n``
the count of its boots it keeps on its own disk; bmaas waits for that line
(``--ready-log``/``--ready-pattern``), never for a power flag, and each test
proves from the guest's count that a deploy booted a VM exactly once (and a
VM behind a fault not at all).

Each test's timeout is its deploy's ``--deadline`` plus the commands around
it, counted from when the lab is up (conftest.py: set-up apart).

The tests run in file order (``-p no:randomly``) on one lab; each first puts
the VMs in the state it needs (off; the CD drives back for IPMI). Boots are
the cost (6-8 CPU s each): 2 + 2 + 1 + 0 + 1 + 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bmaas.hwlab.vm.lab import VmLab, insert_cd
from tests.vm.support import (
    CDROM,
    VMEDIA,
    bmaas,
    booted_once,
    clear_faults,
    deploy,
    enroll,
    fault,
    never_booted,
    node_quirks,
    power_off_all,
    seen,
)

pytestmark = pytest.mark.vm


@pytest.mark.timeout(520)  # its deploy's --deadline and the commands around it
def test_ipmi_deploy_onto_stock_vbmc_is_active_once_each_vm_booted_its_cd(
    vm_lab: VmLab, image_url: str, tmp_path: Path
) -> None:
    """``bmaas deploy --count 2`` by IPMI: no virtual media, so each node's
    ``deploy_boot_device: cdrom`` -- a one-time ``chassis bootdev cdrom``
    through the proxy and vbmc, consumed by SeaBIOS -- boots the disc the lab
    put in the drive (``via=cdrom``; the image URL goes nowhere), and the
    deploy passes its ready step only once each VM said so, each booted
    exactly once by its own count. Both requests end active.

    What real firmware behind stock vbmc does and no emulator did: the
    finalize step's ``bootdev disk`` (persistent) goes to the domain's saved
    *definition*, but vbmc reads the boot device back from the *running*
    domain, which says cdrom until its next cold start. The driver knows
    this BMC by its Get Device ID (pyghmi's defaults): the quirk
    ``boot_reads_running``, recorded on each node, has the read-back judged
    against the device the VM runs with (before it, the attempt ended a
    typed BootFailure here). Powered off, the BMC reads the saved
    definition: disk, as the deploy set it."""
    insert_cd(vm_lab.state_dir)
    enroll(tmp_path, vm_lab, "ipmi")
    power_off_all(tmp_path, vm_lab)
    before = seen(vm_lab)
    deadline = 400
    try:
        result = deploy(
            tmp_path,
            vm_lab,
            "--count",
            "2",
            "--image",
            image_url,
            "--ready-pattern",
            CDROM,
            "--deadline",
            str(deadline),
            # one node a request: a request moving on would redeploy the other
            # VM (a second boot, which the guest's count shows: seen once)
            "--max-attempts",
            "1",
        )
        assert result["ok"] == 2, result
        assert sorted(r["node"] for r in result["requests"]) == vm_lab.domains
        assert {r["boot"] for r in result["requests"]} == {"cdrom"}
        assert result["elapsed"] < deadline
        for name in vm_lab.domains:
            booted_once(vm_lab, name, before, "cdrom")
            assert "boot_reads_running" in node_quirks(tmp_path, name)
    finally:
        power_off_all(tmp_path, vm_lab)
    done = bmaas(tmp_path, "boot-device", "get", *vm_lab.domains, "--json", "--deadline", "60")
    assert done.returncode == 0, done.stderr
    devices = {r["node"]: r["result"]["device"] for r in json.loads(done.stdout)["results"]}
    assert devices == dict.fromkeys(vm_lab.domains, "disk"), devices


@pytest.mark.timeout(520)  # its deploy's --deadline and the commands around it
def test_vmedia_deploy_is_active_only_when_both_vms_booted_the_image(
    vm_lab: VmLab, image_url: str, tmp_path: Path
) -> None:
    """Redfish virtual media through the proxies: sushy-tools fetches the ISO
    from the URL into libvirt's pool and attaches it; the VM's BIOS boots it."""
    enroll(tmp_path, vm_lab, "redfish")
    power_off_all(tmp_path, vm_lab)
    before = seen(vm_lab)
    result = deploy(
        tmp_path,
        vm_lab,
        "--count",
        "2",
        "--image",
        image_url,
        "--ready-pattern",
        VMEDIA,
        "--deadline",
        "400",
    )
    assert result["ok"] == 2, result
    assert sorted(r["node"] for r in result["requests"]) == vm_lab.domains
    assert {r["boot"] for r in result["requests"]} == {"vmedia"}
    for name in vm_lab.domains:
        booted_once(vm_lab, name, before, "vmedia")


@pytest.mark.timeout(420)  # its deploy's --deadline and the commands around it
def test_a_hang_on_power_set_ends_typed_and_the_request_moves_to_the_healthy_vm(
    vm_lab: VmLab, image_url: str, tmp_path: Path
) -> None:
    """A hang on ComputerSystem.Reset at the first VM's Redfish proxy: that
    attempt ends in a typed timeout within the deploy's deadline, and the one
    request is deployed on the second VM, which really booted the image --
    once; the first never booted (its power-on never reached libvirt)."""
    enroll(tmp_path, vm_lab, "redfish")
    sick, healthy = vm_lab.domains
    fault(vm_lab, f"{sick}-redfish", "hang", "operation=power.set")
    before = seen(vm_lab)
    deadline = 300
    try:
        result = deploy(
            tmp_path,
            vm_lab,
            "--count",
            "1",
            "--image",
            image_url,
            "--ready-pattern",
            VMEDIA,
            "--deadline",
            str(deadline),
            "--bmc-timeout",
            "10",
        )
    finally:
        clear_faults(vm_lab)
    (request,) = result["requests"]
    assert request["ok"], request
    assert request["node"] == healthy
    tried = [a["node"] for a in request["attempt_details"]]
    assert tried == [sick, healthy], request["attempt_details"]
    first = request["attempt_details"][0]
    assert first["fault_class"] == "BMCTimeout", first
    assert result["elapsed"] < deadline
    booted_once(vm_lab, healthy, before, "vmedia")
    never_booted(vm_lab, sick, before)


@pytest.mark.timeout(360)  # its deploy's --deadline and the commands around it
def test_busy_and_a_vendor_incident_end_typed_within_the_deadline(
    vm_lab: VmLab, image_url: str, tmp_path: Path
) -> None:
    """Nothing boots (no CPU spent on guests): the first VM's Redfish proxy
    answers every power request busy (503), the second's virtual media is an
    iDRAC without its licence (403 LIC501, a vendor incident). The request
    tries both, each attempt ends typed -- BMCBusy after the backoff retries,
    UnsupportedOperation at once -- and the request fails well within its
    deadline, neither VM having booted."""
    enroll(tmp_path, vm_lab, "redfish")
    first, second = vm_lab.domains
    power_off_all(tmp_path, vm_lab)
    fault(vm_lab, f"{first}-redfish", "busy", "operation=power.*")
    fault(vm_lab, f"{second}-redfish", "incident", "incident=idrac-licence")
    before = seen(vm_lab)
    deadline = 240
    try:
        done = bmaas(
            tmp_path,
            "deploy",
            "--json",
            "--ready-log",
            vm_lab.serial_template,
            "--ready-pattern",
            VMEDIA,
            "--count",
            "1",
            "--image",
            image_url,
            "--max-attempts",
            "2",
            "--deadline",
            str(deadline),
            "--bmc-timeout",
            "5",
        )
    finally:
        clear_faults(vm_lab)
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    (request,) = result["requests"]
    assert not request["ok"], request
    details = {a["node"]: a for a in request["attempt_details"] if a["outcome"] != "refused"}
    assert set(details) == {first, second}, request["attempt_details"]
    assert details[first]["fault_class"] == "BMCBusy", details[first]
    assert details[second]["fault_class"] == "UnsupportedOperation", details[second]
    assert result["elapsed"] < deadline
    never_booted(vm_lab, first, before)
    never_booted(vm_lab, second, before)


@pytest.mark.timeout(420)  # its deploy's --deadline and the commands around it
def test_power_stuck_ends_typed_and_the_request_moves_to_the_healthy_vm(
    vm_lab: VmLab, image_url: str, tmp_path: Path
) -> None:
    """power_stuck at the first VM's Redfish proxy: the Reset On is answered
    204 and never reaches sushy-tools, so libvirt never starts the VM -- the
    natural fault of a power-on acknowledged and never executed. The attempt
    ends PowerFailure once --power-timeout passes, within the deadline; the
    request is deployed on the second VM, which booted once; the first, by
    its own count, never booted."""
    enroll(tmp_path, vm_lab, "redfish")
    sick, healthy = vm_lab.domains
    power_off_all(tmp_path, vm_lab)
    fault(vm_lab, f"{sick}-redfish", "power_stuck", "operation=power.set")
    before = seen(vm_lab)
    deadline, power_timeout = 300, 10
    try:
        result = deploy(
            tmp_path,
            vm_lab,
            "--count",
            "1",
            "--image",
            image_url,
            "--ready-pattern",
            VMEDIA,
            "--deadline",
            str(deadline),
            "--power-timeout",
            str(power_timeout),
        )
    finally:
        clear_faults(vm_lab)
    (request,) = result["requests"]
    assert request["ok"], request
    assert request["node"] == healthy
    tried = [a for a in request["attempt_details"] if a["outcome"] != "refused"]
    assert [a["node"] for a in tried] == [sick, healthy], tried
    assert tried[0]["fault_class"] == "PowerFailure", tried[0]
    # it waited for the power the hardware is allowed, not the whole deadline
    assert power_timeout <= tried[0]["elapsed"] < deadline
    assert result["elapsed"] < deadline
    booted_once(vm_lab, healthy, before, "vmedia")
    never_booted(vm_lab, sick, before)


@pytest.mark.timeout(540)  # its deploy's --deadline and the commands around it
def test_power_stuck_at_the_ipmi_proxy_ends_typed_and_the_request_moves(
    vm_lab: VmLab, image_url: str, tmp_path: Path
) -> None:
    """power_stuck at the first VM's IPMI proxy: the Chassis Control power-on
    is answered with completion code 0 in vbmc's name (the proxy holds the
    session keys) and never relayed, so libvirt never starts the VM. The
    attempt ends PowerFailure once --power-timeout passes, within the
    deadline; the request is deployed by IPMI on the second VM, which booted
    its CD once and is active; the first, by its own count, never booted.

    The second VM is already on (set to boot its blank disk, where SeaBIOS
    stops: no marker), so its deploy meets vbmc's other half: the boot
    device set while it runs reads back the running disk, and vbmc's reset
    is a warm one that would boot the disk again. The deploy power-cycles it
    (boot_reads_running) and reads cdrom back: the one marker proves the
    cold start booted the CD."""
    insert_cd(vm_lab.state_dir)
    enroll(tmp_path, vm_lab, "ipmi")
    sick, healthy = vm_lab.domains
    power_off_all(tmp_path, vm_lab)
    for args in (
        ("boot-device", "set", healthy, "--device", "disk", "--persistent"),
        ("power", "on", healthy),
    ):
        done = bmaas(tmp_path, *args, "--deadline", "60")
        assert done.returncode == 0, done.stderr
    fault(vm_lab, f"{sick}-ipmi", "power_stuck", "operation=power.set")
    before = seen(vm_lab)
    done = bmaas(tmp_path, "power", "status", healthy, "--json", "--deadline", "60")
    assert done.returncode == 0, done.stderr
    assert [r["result"] for r in json.loads(done.stdout)["results"]] == ["on"]
    deadline, power_timeout = 300, 10
    try:
        result = deploy(
            tmp_path,
            vm_lab,
            "--count",
            "1",
            "--image",
            image_url,
            "--ready-pattern",
            CDROM,
            "--deadline",
            str(deadline),
            "--power-timeout",
            str(power_timeout),
        )
    finally:
        clear_faults(vm_lab)
        power_off_all(tmp_path, vm_lab)
    (request,) = result["requests"]
    assert request["ok"], request
    assert request["node"] == healthy
    assert request["boot"] == "cdrom"
    tried = [a for a in request["attempt_details"] if a["outcome"] != "refused"]
    assert [a["node"] for a in tried] == [sick, healthy], tried
    assert tried[0]["fault_class"] == "PowerFailure", tried[0]
    assert power_timeout <= tried[0]["elapsed"] < deadline
    assert result["elapsed"] < deadline
    booted_once(vm_lab, healthy, before, "cdrom")
    never_booted(vm_lab, sick, before)
