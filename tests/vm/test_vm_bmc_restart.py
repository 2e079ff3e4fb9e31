"""A real restart of the BMC emulator (issue 49, finding 5): ``hwlab vm
restart-bmc`` stops the stock sushy-emulator or vbmcd process itself, its
ports refuse for ``--down`` seconds, and it comes back on the same ports --
not the proxies' simulated ``bmc_reboot``. bmaas types what it meets
(``BMCUnreachable`` while the port refuses; the attempt moved on per the
policy table when the restart outlasts its brief retries; success once the
BMC is back), and the guest's own boot count shows the one power-on: a BMC
restart is not a power cycle, and bmaas never powers the VM on twice.

A one-VM lab of its own, up without proxies (the emulators are then the
lab's own processes). Two boots in all, one per test."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bmaas.hwlab.proxy.stock import refuses
from bmaas.hwlab.vm import domain
from bmaas.hwlab.vm.lab import VmLab, down, insert_cd
from bmaas.yamlsrc import load_text
from tests.vm.support import (
    CACHE,
    CDROM,
    VMEDIA,
    bmaas,
    booted_once,
    enroll,
    hwlab,
    markers,
    power_off_all,
    seen,
)

pytestmark = pytest.mark.vm


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VmLab]:
    os.environ["HWLAB_VM_CACHE_DIR"] = str(CACHE)
    state = tmp_path_factory.mktemp("vm-restart") / "lab"
    # by the CLI, as an operator would: the emulators are then no children
    # of this process (up() here would leave their Popen objects to pytest)
    done = hwlab("vm", "up", "--count", "1", "--no-proxies", "--state-dir", str(state))
    try:
        assert done.returncode == 0, done.stderr
        made = VmLab.load(state)
        assert made is not None
        yield made
    finally:
        down(state)


@contextlib.contextmanager
def _running(argv: list[str], home: Path | None = None) -> Iterator[subprocess.Popen[str]]:
    """A CLI run in the background (``home``: bmaas's store), killed if it
    is still running when the block ends."""
    env = {**os.environ}
    if home is not None:
        env.update(BMAAS_HOME=str(home / "bmaas"), XDG_STATE_HOME=str(home))
    proc = subprocess.Popen(
        [sys.executable, "-c", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _deploying(
    home: Path, lab: VmLab, *args: str
) -> contextlib.AbstractContextManager[subprocess.Popen[str]]:
    deploy = ["deploy", "--json", "--count", "1", "--max-attempts", "1", "--deadline", "300"]
    argv = ["from bmaas.cli import main; main()", *deploy, "--ready-log", lab.serial_template]
    return _running([*argv, *args], home)


def _until_running(lab: VmLab, deploying: subprocess.Popen[str]) -> None:
    """Until the deploy's power-on reached libvirt (at most 240 s)."""
    name = lab.domain(lab.domains[0])
    for _ in range(480):
        if domain.virsh("domstate", name).strip() == "running":
            return
        assert deploying.poll() is None, deploying.communicate()
        time.sleep(0.5)
    raise AssertionError(f"{name} never ran")


def _finished(deploying: subprocess.Popen[str]) -> tuple[int, dict[str, Any]]:
    out, err = deploying.communicate(timeout=330)
    assert deploying.returncode in (0, 1), err
    return deploying.returncode, json.loads(out)


def _until_marker(lab: VmLab, before: dict[str, int]) -> None:
    """Until the VM printed a marker since ``before`` (at most 300 s)."""
    name = lab.domains[0]
    for _ in range(600):
        if len(markers(lab, name)) > before[name]:
            return
        time.sleep(0.5)


def _power(home: Path, node: str) -> dict[str, Any]:
    done = bmaas(home, "power", "status", node, "--json", "--deadline", "30", timeout=60)
    assert done.returncode in (0, 1), done.stderr
    (result,) = json.loads(done.stdout)["results"]
    return dict(result)


def _restart(lab: VmLab, emulator: str, seconds: int) -> subprocess.CompletedProcess[str]:
    done = hwlab(
        "vm", "restart-bmc", emulator, "--down", str(seconds), "--state-dir", str(lab.state_dir)
    )
    assert done.returncode == 0, done.stderr
    assert f"{emulator}: pid " in done.stdout, done.stdout
    assert "answering" in done.stdout, done.stdout
    return done


@pytest.mark.timeout(660)  # the deploy's --deadline, the marker's wait, the commands
def test_sushy_tools_restarted_at_power_on_ends_the_attempt_unreachable_and_the_vm_booted_once(
    lab: VmLab, image_url: str, tmp_path: Path
) -> None:
    """A Redfish deploy whose VM has just been powered on when sushy-tools
    really restarts (down 5 s): the deploy's settle reads meet a refused
    port past their brief retries, so the attempt ends ``BMCUnreachable``
    and the request, with no other candidate, fails; bmaas does not power
    the VM off (it cannot: the policy table's "off" column). Once back, on
    the same port, the BMC answers and reads the VM on: it ran through the
    restart, booted exactly once by its own count."""
    (name,) = lab.domains
    enroll(tmp_path, lab, "redfish")
    power_off_all(tmp_path, lab)
    before = seen(lab)
    try:
        with _deploying(
            tmp_path, lab, "--image", image_url, "--ready-pattern", VMEDIA
        ) as deploying:
            _until_running(lab, deploying)
            _restart(lab, "sushy-emulator", 5)
            code, result = _finished(deploying)
        assert code == 1, result
        (request,) = result["requests"]
        assert request["status"] == "failed", request
        (attempt,) = request["attempt_details"]
        assert attempt["fault_class"] == "BMCUnreachable", attempt
        assert "connection refused" in attempt["message"], attempt
        _until_marker(lab, before)
        booted_once(lab, name, before, "vmedia")
        assert _power(tmp_path, name)["result"] == "on"
    finally:
        power_off_all(tmp_path, lab)


@pytest.mark.timeout(660)  # the deploy's --deadline and the commands around it
def test_vbmcd_restarted_while_the_vm_boots_the_deploy_is_active_and_unreachable_only_while_down(
    lab: VmLab, image_url: str, tmp_path: Path
) -> None:
    """An IPMI deploy (the CD drive; ``--settle 0``: no BMC call while the
    VM boots) during which vbmcd really restarts (down 1 s, 3 s after the
    power-on): its finalize logs in to the new vbmcd and the deploy is
    active, the VM booted once. Then vbmcd down again (8 s): a power read
    meanwhile ends ``BMCUnreachable`` (ICMP port unreachable) after its
    brief retries; once back the same read is ``on`` -- no power cycle, no
    second boot."""
    (name,) = lab.domains
    insert_cd(lab.state_dir)  # a Redfish deploy's virtual media took the drive
    enroll(tmp_path, lab, "ipmi")
    power_off_all(tmp_path, lab)
    before = seen(lab)
    try:
        with _deploying(
            tmp_path, lab, "--image", image_url, "--ready-pattern", CDROM, "--settle", "0"
        ) as deploying:
            _until_running(lab, deploying)
            time.sleep(3)  # the power step's reads are done; the guest boots for 10 s or more
            _restart(lab, "vbmcd", 1)
            code, result = _finished(deploying)
        assert code == 0, result
        (request,) = result["requests"]
        assert request["status"] == "active", request
        assert request["node"] == name, request
        booted_once(lab, name, before, "cdrom")
        inventory = load_text((lab.state_dir / "inventory.yaml").read_text(), source="inventory")
        port = int(inventory["nodes"][0]["driver_info"]["ipmi_port"])
        argv = ["from bmaas.hwlab.cli import main; main()", "vm", "restart-bmc", "vbmcd"]
        with _running([*argv, "--down", "8", "--state-dir", str(lab.state_dir)]) as restarting:
            # vbmcd stopped: within 30 s (a loaded host stops it late); never
            # read the power of a vbmcd still up, which is not this test
            until = time.monotonic() + 30
            while not refuses("127.0.0.1", port, socket.SOCK_DGRAM):
                if time.monotonic() > until:
                    pytest.fail("vbmcd did not stop within 30 s of restart-bmc")
                time.sleep(0.1)
            away = _power(tmp_path, name)
            assert away["fault"]["class"] == "BMCUnreachable", away
            assert "ICMP port unreachable" in away["fault"]["message"], away
            _, err = restarting.communicate(timeout=60)
        assert restarting.returncode == 0, err
        assert _power(tmp_path, name)["result"] == "on"
        assert markers(lab, name)[before[name] + 1 :] == []
    finally:
        power_off_all(tmp_path, lab)
