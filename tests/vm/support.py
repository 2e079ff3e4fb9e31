"""What the VM lab's tests share: the bmaas and hwlab CLIs on a store of
their own, enrolling, deploying, the VMs' markers and the guest's boot count,
fault rules on the proxies."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from bmaas.driver_info import DriverInfo
from bmaas.drivers.redfish.driver import RedfishDriver
from bmaas.hwlab.pyexec import python_argv
from bmaas.hwlab.vm.image import FAILING, MARKER, parse_marker
from bmaas.hwlab.vm.lab import VmLab
from bmaas.yamlsrc import load_text

#: the image is built once per user, outside the test sandbox's cache
CACHE = Path(os.path.expanduser("~")) / ".cache" / "hwlab" / "vm"
VMEDIA = "BMAAS-BOOTED via=vmedia"
CDROM = "BMAAS-BOOTED via=cdrom"


def bmaas(home: Path, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    """The bmaas CLI with a store of its own under ``home``."""
    env = {**os.environ, "BMAAS_HOME": str(home / "bmaas"), "XDG_STATE_HOME": str(home)}
    return subprocess.run(
        python_argv("-c", "from bmaas.cli import main; main()", *args),
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def enroll(home: Path, lab: VmLab, driver: str, **info: str) -> None:
    """The lab's inventory, every node enrolled with ``driver`` (and the
    ``driver_info`` keys of ``info`` added, e.g. ``boot_mode``)."""
    doc = load_text((lab.state_dir / "inventory.yaml").read_text(), source="inventory.yaml")
    for node in doc["nodes"]:
        node["driver"] = driver
        node["driver_info"].update(info)
    path = home / "inventory.json"
    path.write_text(json.dumps(doc))
    done = bmaas(home, "enroll", str(path))
    assert done.returncode == 0, done.stderr


def redfish_driver(lab: VmLab, **info: str) -> RedfishDriver:
    """bmaas's Redfish driver for the lab's one node (``info``: more
    ``driver_info`` keys)."""
    doc = load_text((lab.state_dir / "inventory.yaml").read_text(), source="inventory.yaml")
    (node,) = doc["nodes"]
    return RedfishDriver(node["name"], DriverInfo.parse({**node["driver_info"], **info}))


def deploy(home: Path, lab: VmLab, *args: str) -> dict[str, Any]:
    done = bmaas(home, "deploy", "--json", "--ready-log", lab.serial_template, *args, timeout=600)
    assert done.returncode in (0, 1), done.stderr
    return dict(json.loads(done.stdout))


def deploy_one(
    home: Path, lab: VmLab, driver: str, *args: str, **info: str
) -> tuple[dict[str, Any], dict[str, int]]:
    """One deploy from cold: ``lab`` enrolled with ``driver`` (``info``: more
    ``driver_info`` keys), every VM off, one request, one attempt (``args``:
    the image, the pattern, the deadline...). Its result, and what each VM
    had printed before it (for :func:`booted_once`)."""
    enroll(home, lab, driver, **info)
    power_off_all(home, lab)
    before = seen(lab)
    return deploy(home, lab, "--count", "1", "--max-attempts", "1", *args), before


def node_quirks(home: Path, name: str) -> list[str]:
    """The quirks recorded on node ``name`` (``bmaas node show --json``)."""
    done = bmaas(home, "node", "show", name, "--json")
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout)["quirks"])


def markers(lab: VmLab, name: str) -> list[str]:
    return [line for line in _serial(lab, name) if line.startswith(MARKER)]


def seen(lab: VmLab) -> dict[str, int]:
    """How many marker lines each VM has printed so far."""
    return {n: len(markers(lab, n)) for n in lab.domains}


def failing(lab: VmLab, name: str) -> list[str]:
    """The lines ``name`` printed on boots a machine fault failed
    (``BMAAS-FAILING panic boot=N``: hwlab/vm/image.py)."""
    return [line for line in _serial(lab, name) if line.startswith(FAILING)]


def booted_once(lab: VmLab, name: str, before: dict[str, int], via: str) -> None:
    """``name`` printed exactly one marker since ``before``, saying ``via``,
    and its own boot count went up by exactly one (boots a machine fault
    failed count too: their lines carry the count, :func:`failing`)."""
    lines = markers(lab, name)
    new = [parse_marker(line) for line in lines[before[name] :]]
    assert len(new) == 1, (name, lines[before[name] :])
    assert new[0] is not None
    assert new[0]["via"] == via, new
    assert isinstance(new[0]["boot"], int), f"{name} kept no boot count: {new}"
    previous = last_count(lab, name, upto=lines[-1])
    assert new[0]["boot"] == previous + 1, (name, previous, new)


def last_count(lab: VmLab, name: str, upto: str | None = None) -> int:
    """The guest's own count of its boots, the last it printed (before the
    line ``upto``), on a marker or a failed boot's line; 0 before any."""
    counted = [ln for ln in _serial(lab, name) if ln.startswith((MARKER, FAILING))]
    if upto is not None:
        counted = counted[: counted.index(upto)]
    counts = [int(c[1]) for c in map(_BOOT.search, counted) if c]
    return counts[-1] if counts else 0


#: the guest's count on a marker or a failed boot's line
_BOOT = re.compile(r" boot=(\d+)\b")


def _serial(lab: VmLab, name: str) -> list[str]:
    path = lab.serial_log(name)
    return path.read_text(errors="replace").splitlines() if path.exists() else []


def never_booted(lab: VmLab, name: str, before: dict[str, int]) -> None:
    assert markers(lab, name)[before[name] :] == [], name


def hwlab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from bmaas.hwlab.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def fault(lab: VmLab, node: str, *rule: str) -> None:
    done = hwlab("fault", "add", node, *rule, "--state-dir", str(lab.lab_dir))
    assert done.returncode == 0, done.stderr


def clear_faults(lab: VmLab) -> None:
    hwlab("fault", "clear", "--all", "--state-dir", str(lab.lab_dir))


def power_off_all(home: Path, lab: VmLab) -> None:
    """Every VM off (a cold start next: libvirt takes a changed definition
    only then, and vbmc's reset is a warm one)."""
    for name in lab.domains:
        done = bmaas(home, "power", "off", name, "--deadline", "60")
        assert done.returncode == 0, done.stderr
