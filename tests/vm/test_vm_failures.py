"""Failures the machine itself shows (issue 49): not an effect at a proxy,
but the VM losing its power behind the BMC -- the domain destroyed by
libvirt, as a tripped PSU or a qemu killed would -- while a deploy watches
it settle; or its boot failing in the guest -- the kernel panics, or the
boot hangs before the system is up -- while its BMC reads "on" all through.
bmaas sees the first through the BMC (stock sushy-tools reads the domain),
the second by the ready marker that never comes (``--ready-timeout``), types
each a ``BootFailure`` and moves the request; the guest's own boot count is
the witness that each VM booted exactly once.

The proxies refuse ``boot_crash`` (a hardware effect: hwlab/proxy/effects.py)
-- they sit on the wire and cannot reach a boot. The VM lab realises the
crash and the hang on the machine instead: ``domain.machine_fault`` marks
the VM's disk, and the lab's image, whatever medium it boots from, reads the
mark once its boot is counted (hwlab/vm/image.py); ``hwlab vm fault NODE
panic|hang|clear`` sets it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bmaas.hwlab.pyexec import python_argv
from bmaas.hwlab.vm import domain
from bmaas.hwlab.vm.lab import VmLab, machine_fault
from tests.vm.support import (
    VMEDIA,
    booted_once,
    clear_faults,
    deploy,
    enroll,
    failing,
    hwlab,
    last_count,
    markers,
    power_off_all,
    seen,
)

pytestmark = pytest.mark.vm


def moved_after_boot_failure(lab: VmLab, request: dict[str, Any], first: str, why: str) -> str:
    """``request`` (a deploy's ``--json`` row) tried ``first``, which ended a
    ``BootFailure`` saying ``why``, and is active on the other VM: its name."""
    other = next(n for n in lab.domains if n != first)
    assert request["node"] == other, request
    tried = [a for a in request["attempt_details"] if a["outcome"] != "refused"]
    assert [a["node"] for a in tried] == [first, other], tried
    assert tried[0]["fault_class"] == "BootFailure", tried[0]
    assert why in tried[0]["message"], tried[0]
    return other


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
        *python_argv("-c", "from bmaas.cli import main; main()"),
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
    other = moved_after_boot_failure(vm_lab, request, first, "fell back to")
    booted_once(vm_lab, first, before, "vmedia")
    booted_once(vm_lab, other, before, "vmedia")


@pytest.fixture
def first_faulted(vm_lab: VmLab, tmp_path: Path) -> Iterator[str]:
    """The lab's first VM by name -- the one a fresh store tries first (no
    faults yet, same fit: by name, bmaas/candidates.py) -- whose disk the
    test marks; every VM off afterwards, the mark gone."""
    first = sorted(vm_lab.domains)[0]
    try:
        yield first
    finally:
        power_off_all(tmp_path, vm_lab)
        machine_fault(vm_lab.state_dir, first, None)


#: ``--ready-timeout``: nothing on the console says a hang, so for it the
#: wait is the only bound -- 150 s past the settle, twice the slowest healthy
#: boot seen here (at load 15 beside other VM labs; 90 s was once too short).
#: A panic says so, and ``--fail-pattern`` ends its wait at the line.
READY_TIMEOUT = 150
#: each fault's extra deploy options, and what its attempt's fault says
ENDS: dict[str, tuple[tuple[str, ...], str]] = {
    "panic": (("--fail-pattern", "Kernel panic"), "will not be ready: its serial log shows '"),
    "hang": ((), "not ready"),
}


@pytest.mark.timeout(520)  # its deploy's --deadline and the commands around it
@pytest.mark.parametrize("fault", ["panic", "hang"])
def test_a_boot_that_panics_or_hangs_in_the_guest_is_a_boot_failure_and_the_request_moves(
    vm_lab: VmLab, image_url: str, tmp_path: Path, first_faulted: str, fault: str
) -> None:
    """The first VM's boot fails in the guest: its kernel panics (and the
    machine halts, on) or its boot hangs, either way before the marker. The
    BMC reads "on" throughout. The panic is on the console: with
    ``--fail-pattern 'Kernel panic'`` the attempt is a ``BootFailure``
    quoting that line as soon as the ready step reads it, well before its
    ready timeout. The hang says nothing, so its attempt ends when
    ``--ready-timeout`` passes (``READY_TIMEOUT``): a ``BootFailure``
    ("not ready"). Either way the request is active on the other VM and the
    failed VM is powered off by the failed attempt's undo. The first VM
    printed one failing line counting one more boot (and the kernel's
    panic), no marker; the other booted once."""
    first = first_faulted
    enroll(tmp_path, vm_lab, "redfish")
    clear_faults(vm_lab)
    power_off_all(tmp_path, vm_lab)
    done = hwlab("vm", "fault", first, fault, "--state-dir", str(vm_lab.state_dir))
    assert done.returncode == 0, done.stderr
    before, failed_before = seen(vm_lab), len(failing(vm_lab, first))
    count = last_count(vm_lab, first)
    start = time.monotonic()
    extra, said = ENDS[fault]
    result = deploy(
        tmp_path, vm_lab, "--count", "1", "--max-attempts", "2", "--image", image_url,
        "--ready-pattern", VMEDIA, "--ready-timeout", str(READY_TIMEOUT), "--deadline", "450",
        *extra,
    )  # fmt: skip
    took = time.monotonic() - start
    (request,) = result["requests"]
    assert result["ok"] == 1, result
    other = moved_after_boot_failure(vm_lab, request, first, said)
    assert took < 450, took
    assert domain.virsh("domstate", vm_lab.domain(first)).strip() == "shut off"
    new = failing(vm_lab, first)[failed_before:]
    assert len(new) == 1, new
    assert new[0] == f"BMAAS-FAILING {fault} boot={count + 1}", (count, new)
    assert markers(vm_lab, first)[before[first] :] == [], "the failed VM printed its marker"
    if fault == "panic":
        log = vm_lab.serial_log(first).read_text(errors="replace")
        assert "Kernel panic" in log[log.rindex(new[0]) :], "no panic on the console"
    booted_once(vm_lab, other, before, "vmedia")
