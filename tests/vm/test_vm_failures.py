"""Failures the machine itself shows (issue 49): not an effect at a proxy,
but the VM losing its power behind the BMC -- the domain destroyed by
libvirt, as a tripped PSU or a qemu killed would -- while a deploy watches
it settle. bmaas sees it through the BMC (stock sushy-tools reads the
domain), types it, and moves the request; the guest's own boot count is the
witness that each VM booted exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bmaas.hwlab.vm import domain
from bmaas.hwlab.vm.lab import VmLab
from tests.vm.support import (
    VMEDIA,
    booted_once,
    clear_faults,
    enroll,
    markers,
    power_off_all,
    seen,
)

pytestmark = pytest.mark.vm


@pytest.mark.timeout(480)  # its deploy's --deadline and the commands around it
def test_power_lost_behind_the_bmc_mid_settle_is_a_boot_failure_and_the_request_moves(
    vm_lab: VmLab, image_url: str, tmp_path: Path
) -> None:
    """A deploy whose settle window (40 s) is still open when the VM that
    booted the image loses its power (``virsh destroy``, nothing told the
    BMC): the attempt ends ``BootFailure`` ("fell back to off"), the request
    is active on the other VM, and each VM booted exactly once."""
    enroll(tmp_path, vm_lab, "redfish")
    clear_faults(vm_lab)
    power_off_all(tmp_path, vm_lab)
    before = seen(vm_lab)
    env_home = {"BMAAS_HOME": str(tmp_path / "bmaas"), "XDG_STATE_HOME": str(tmp_path)}
    argv = [
        sys.executable, "-c", "from bmaas.cli import main; main()",
        "deploy", "--json", "--count", "1", "--max-attempts", "2", "--image", image_url,
        "--ready-log", vm_lab.serial_template, "--ready-pattern", VMEDIA,
        "--settle", "40", "--deadline", "400",
    ]  # fmt: skip
    deploying = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env_home},
    )
    try:
        first = None
        for _ in range(600):  # at most 300 s: the first VM's marker
            first = next((n for n in vm_lab.domains if len(markers(vm_lab, n)) > before[n]), None)
            if first is not None or deploying.poll() is not None:
                break
            time.sleep(0.5)
        assert first is not None, "no VM booted the image"
        domain.virsh("destroy", vm_lab.domain(first))  # its power, gone behind the BMC
        out, err = deploying.communicate(timeout=420)
    finally:
        if deploying.poll() is None:
            deploying.kill()
            deploying.communicate()
    assert deploying.returncode == 0, err
    (request,) = json.loads(out)["requests"]
    other = next(n for n in vm_lab.domains if n != first)
    assert request["node"] == other, request
    tried = [a for a in request["attempt_details"] if a["outcome"] != "refused"]
    assert [a["node"] for a in tried] == [first, other], tried
    assert tried[0]["fault_class"] == "BootFailure", tried[0]
    assert "fell back to" in tried[0]["message"], tried[0]
    booted_once(vm_lab, first, before, "vmedia")
    booted_once(vm_lab, other, before, "vmedia")
