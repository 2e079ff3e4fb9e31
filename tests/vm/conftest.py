"""The VM lab's tests (marker ``vm``): real firmware, real boots, under TCG.

They need libvirt set up on this machine (``sudo bash scripts/vm-setup.sh``:
``virsh -c qemu:///system`` answers) and the ``bmaas[virtualbmc]`` extra.
Without them they are deselected, with one line saying so, unless
``BMAAS_REQUIRE_VM=1`` (scripts/test-vm.sh), where they run and fail.
``BMAAS_VM_TESTS=skip`` (scripts/test.sh sets it) deselects them too: CI
boots the VMs once, in scripts/test-vm.sh.
Each boot costs a few CPU seconds: a worker's session shares one 2-VM lab
(scripts/test-vm.sh runs two workers, a file each at a time).

Timeouts count from when the machine is ready, set-up apart (issue 49): the
boot image, ``hwlab vm up`` (:func:`vm_lab`), the image server and Ironic's
start are session- or module-scoped fixtures, and every test here runs under
``@pytest.mark.timeout(N, func_only=True)`` -- N sized for the test's own work
(its deploy's ``--deadline`` plus the commands around it; at least
:data:`VM_TEST_TIMEOUT`), counted from the test function's first line. The
set-up is bounded by its own steps instead: every ``virsh``, ``hwlab`` and
emulator start waits a bounded time (hwlab/vm/lab.py, hwlab/proxy/stock.py),
and scripts/test-vm.sh builds the image before pytest starts. A load that
slows ``up`` can no longer sink a deploy test by the test's own clock.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bmaas.hwlab.vm.lab import VmLab, down, up
from tests.vm.support import CACHE

#: seconds a vm test may run when it names no timeout of its own (the set-up
#: is not counted: see the module's docstring)
VM_TEST_TIMEOUT = 300


@functools.cache
def vm_lab_missing() -> str | None:
    """Why the VM lab cannot run here, or None."""
    if not all(importlib.util.find_spec(m) for m in ("libvirt", "virtualbmc")):
        return "bmaas[virtualbmc] is not installed"
    if shutil.which("virsh") is None:
        return "libvirt is not installed"
    try:
        done = subprocess.run(
            ["virsh", "-c", "qemu:///system", "list"],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "virsh -c qemu:///system does not answer"
    return None if done.returncode == 0 else "virsh -c qemu:///system does not answer"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/vm/" in item.nodeid:
            item.add_marker(pytest.mark.vm)
            _timeout_from_ready(item)
    if os.environ.get("BMAAS_REQUIRE_VM") == "1":
        return
    dropped = [i for i in items if i.get_closest_marker("vm")]
    why = vm_lab_missing() if dropped else None
    if dropped and os.environ.get("BMAAS_VM_TESTS") == "skip":
        why = "BMAAS_VM_TESTS=skip (scripts/test.sh; CI runs them in scripts/test-vm.sh)"
    elif why:
        why += (
            " (sudo bash scripts/vm-setup.sh; BMAAS_SETUP_EXTRAS=virtualbmc bash scripts/setup.sh)"
        )
    if dropped and why:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if not i.get_closest_marker("vm")]
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"deselected {len(dropped)} 'vm' test(s): {why}")


def _timeout_from_ready(item: pytest.Item) -> None:
    """The test's own timeout (or :data:`VM_TEST_TIMEOUT`), counted over the
    test function only: fixtures' set-up and teardown are not in it."""
    own = item.get_closest_marker("timeout")
    seconds = VM_TEST_TIMEOUT
    if own is not None:
        seconds = max(own.args[0] if own.args else own.kwargs.get("timeout", 0), seconds)
    item.add_marker(pytest.mark.timeout(seconds, func_only=True), append=False)


@pytest.fixture(scope="session")
def vm_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VmLab]:
    os.environ["HWLAB_VM_CACHE_DIR"] = str(CACHE)
    state = tmp_path_factory.mktemp("vm") / "lab"
    lab = up(state, count=2, proxies=True, driver="redfish")
    try:
        yield lab
    finally:
        down(state)
        assert not (state / "vm.json").exists()


@contextlib.contextmanager
def _served(iso: Path) -> Iterator[str]:
    """The URL of ``iso`` served on 127.0.0.1 with its folder (sushy-tools
    fetches virtual media by URL)."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(iso.parent))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{iso.name}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def image_url(vm_lab: VmLab) -> Iterator[str]:
    """The vmedia ISO served on 127.0.0.1."""
    with _served(Path(vm_lab.vmedia_iso)) as url:
        yield url


@pytest.fixture(scope="module")
def uefi_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VmLab]:
    """A one-VM lab of its own whose VM boots OVMF with Secure Boot on
    (tests/vm/test_vm_uefi.py's docstring); one per module."""
    os.environ["HWLAB_VM_CACHE_DIR"] = str(CACHE)
    state = tmp_path_factory.mktemp("vm-uefi") / "lab"
    lab = up(state, count=1, proxies=True, driver="redfish", firmware="uefi-secure")
    try:
        yield lab
    finally:
        down(state)


@pytest.fixture(scope="module")
def uefi_url(uefi_lab: VmLab) -> Iterator[str]:
    """The UEFI vmedia ISO served on 127.0.0.1; its folder (the image cache)
    holds the BIOS one too."""
    with _served(Path(uefi_lab.vmedia_iso)) as url:
        yield url
