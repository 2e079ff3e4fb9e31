"""``STATE_DIR/vm.json``: what ``hwlab vm up`` started, read back as an input.

::

    {"state_dir": "/home/me/.local/state/hwlab/vm",
     "domains": ["bmaas-vm-1", "bmaas-vm-2"],           1 to MAX_VMS node names, each once
     "proxies": false,
     "pids": {"sushy-emulator": {"pid": 4242, "start": 913377,
                                 "exe": "/usr/bin/python3.11"}, "vbmcd": {...}},
     "iso": "/.../bmaas-cdrom.iso", "vmedia_iso": "/.../bmaas-vmedia.iso",
     "uuids": {"bmaas-vm-1": "3f1c...-...", ...}}      a domain's libvirt UUID

Every key is required and no other is allowed; the file is at most
:data:`MAX_VM_JSON` bytes. ``pids`` holds a :class:`~bmaas.hwlab.procmark.ProcessMark`
per emulator hwlab started, which ``down`` signals only while it still
holds. ``state_dir`` is what ``up`` was given; the lab is the directory the
file is in, whatever it says. A VM's libvirt domain is its node name and
the lab's id (:meth:`VmLab.domain`: ``bmaas-vm-1-3fa2c1d0``), so labs in
other state dirs never share a domain.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bmaas import validate
from bmaas.hwlab import statejson
from bmaas.hwlab.procmark import MAX_PID, ProcessMark
from bmaas.hwlab.statefiles import write_private
from bmaas.hwlab.statejson import ListOf, MapOf, Object, Value
from bmaas.hwlab.vm.domain import lab_id

__all__ = ["EMULATORS", "MAX_VMS", "MAX_VM_JSON", "VmLab"]

#: the most VMs one lab runs (``hwlab vm up --count``): each boot costs 5-8 CPU s under TCG
MAX_VMS = 8
#: the emulators hwlab starts itself (without proxies), by name
EMULATORS = ("sushy-emulator", "vbmcd")
#: a vm.json of MAX_VMS VMs is about 2 KiB; paths may be long
MAX_VM_JSON = 64 * 1024
#: the longest path vm.json may hold (Linux's PATH_MAX)
MAX_PATH = 4096
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _path(value: Any, *, absolute: bool = True) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"must be a path, not {value!r}"[:120])
    if "\0" in value or len(value) > MAX_PATH:
        raise ValueError(f"must be a path of at most {MAX_PATH} characters and no NUL")
    if absolute and not value.startswith("/"):
        raise ValueError(f"must be an absolute path, not {value!r}"[:120])
    return value


def _whole(low: int, high: int, what: str) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        number = validate.whole(value, what=what)  # an int, not 3.0, "3" or true
        if not low <= number <= high:
            raise ValueError(f"must be {what} from {low} to {high}, not {number}"[:120])
        return number

    return check


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, not {value!r}"[:120])
    return value


def _emulator(value: Any) -> str:
    if value not in EMULATORS:
        raise ValueError(f"must be one of {', '.join(EMULATORS)}")
    return str(value)


def _uuid(value: Any) -> str:
    if not isinstance(value, str) or not _UUID.fullmatch(value):
        raise ValueError(f"must be a UUID, not {value!r}"[:120])
    return value


SHAPE = Object(
    {
        "state_dir": Value(lambda v: _path(v, absolute=False)),
        "domains": ListOf(Value(validate.name), most=MAX_VMS, least=1, unique=True),
        "proxies": Value(_flag),
        "pids": MapOf(
            _emulator,
            Object(
                {
                    "pid": Value(_whole(2, MAX_PID, "a pid")),
                    "start": Value(_whole(0, (1 << 63) - 1, "a start time in clock ticks")),
                    "exe": Value(_path),
                }
            ),
            most=len(EMULATORS),
        ),
        "iso": Value(_path),
        "vmedia_iso": Value(_path),
        "uuids": MapOf(validate.name, Value(_uuid), most=MAX_VMS),
    }
)


@dataclasses.dataclass
class VmLab:
    state_dir: Path
    domains: list[str]
    proxies: bool = False
    #: the processes hwlab started (sushy-emulator, vbmcd), each leading its
    #: own process group; none with proxies (the inner lab has its own)
    pids: dict[str, ProcessMark] = dataclasses.field(default_factory=dict)
    #: what each VM's own CD drive holds (``hwlab vm up --cdrom``; default the
    #: lab's ``via=cdrom`` ISO): what an IPMI deploy boots
    iso: str = ""
    vmedia_iso: str = ""
    #: domain name -> libvirt UUID: sushy-emulator's Redfish id of the system
    uuids: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def lab_id(self) -> str:
        """The lab's id (a short hash of its state dir): in its domains' names."""
        return lab_id(self.state_dir)

    def domain(self, node: str) -> str:
        """libvirt's name of the lab's VM ``node`` (``bmaas-vm-1-3fa2c1d0``):
        labs in other state dirs may run a ``bmaas-vm-1`` of their own."""
        return f"{node}-{self.lab_id}"

    @property
    def id_text(self) -> str:
        """``3fa2c1d0 (libvirt domains bmaas-vm-1-3fa2c1d0, ...)``"""
        names = ", ".join(self.domain(n) for n in self.domains)
        return f"{self.lab_id} (libvirt domains {names})"

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
        """The lab recorded in ``state_dir`` (None: no ``vm.json``). A file
        that is not what :data:`SHAPE` says is refused, every problem one
        line: :class:`~bmaas.hwlab.statejson.StateFileProblems`."""
        path = state_dir / "vm.json"
        try:
            raw = statejson.load(path, SHAPE, limit=MAX_VM_JSON)
        except FileNotFoundError:
            return None
        stray = sorted(set(raw["uuids"]) - set(raw["domains"]))
        if stray:
            problems = [(f"uuids.{name}", "names no domain of this lab") for name in stray]
            raise statejson.StateFileProblems(path, problems)
        return cls(
            state_dir,  # where the file is, not where it says it is
            raw["domains"],
            raw["proxies"],
            {what: ProcessMark(**mark) for what, mark in raw["pids"].items()},
            raw["iso"],
            raw["vmedia_iso"],
            raw["uuids"],
        )
