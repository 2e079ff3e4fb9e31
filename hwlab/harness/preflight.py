"""What ``hwlab matrix`` and ``hwlab demo`` check before they start anything.

Both bring up a private lab on 127.0.0.1 and drive the real bmaas drivers
against it. Each piece they need is checked first, every problem one
:class:`~bmaas.faults.InputError` (one ``error:`` line, exit 2, nothing
started), instead of a traceback from a lab worker or the first problem
only. The checks (packages, driver entry points, the interpreter, loopback
sockets, ``BMAAS_*`` settings, the folder to work in, ``--profile``,
``--only``, ``--shape`` names) are tabled in docs/lab.md ("What ``hwlab
matrix`` and ``hwlab demo`` check first").

Each check is a small function returning its problems, so a test can feed
one a broken world (:func:`packages` takes a ``find`` function,
:func:`loopback` a socket factory).
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import socket
import sys
import tempfile
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from bmaas.faults import InputError

__all__ = [
    "PACKAGES",
    "demo_problems",
    "drivers",
    "environment",
    "folder",
    "interpreter",
    "loopback",
    "matrix_problems",
    "packages",
    "profiles",
    "scenarios",
]

#: (module, what needs it, protocol or "*" for every run), found with find_spec.
#: hwlab's Redfish emulator is its own (hwlab.redfish.shapes): sushy-tools is
#: asked for only where a lab runs the stock one (hwlab/proxy/stock.py says so)
PACKAGES: tuple[tuple[str, str, str], ...] = (
    ("pyghmi", "the IPMI emulator and driver", "ipmi"),
    ("sushy", "the Redfish driver", "redfish"),
    ("cryptography", "the lab's TLS and the store's sealed passwords", "*"),
)

#: how to put a missing package in (hwlab's extra brings the emulators)
INSTALL = "pip install 'bmaas[lab]'"

Find = Callable[[str], Any]


def _problem(message: str, field: str | None = None) -> InputError:
    return InputError(message, source="environment" if field is None else None, field=field)


def packages(
    protocols: Collection[str], *, find: Find = importlib.util.find_spec
) -> list[InputError]:
    """A problem per package the run's ``protocols`` need that this
    interpreter cannot find (not imported: a run that has them pays nothing)."""
    problems = []
    for module, why, protocol in PACKAGES:
        if protocol != "*" and protocol not in protocols:
            continue
        try:
            found = find(module) is not None
        except (ImportError, ValueError):  # a broken package: as good as missing
            found = False
        if not found:
            problems.append(
                _problem(
                    f"Python package {module!r} ({why}) is not installed for {sys.executable}: "
                    f"{INSTALL}"
                )
            )
    return problems


def drivers(protocols: Collection[str], *, names: Iterable[str] | None = None) -> list[InputError]:
    """A problem per protocol with no ``bmaas.drivers`` entry point."""
    if names is None:
        from bmaas.registry import available_drivers

        names = available_drivers()
    known = set(names)
    return [
        _problem(
            f"bmaas's {protocol} driver is not installed (no 'bmaas.drivers' entry point "
            f"{protocol!r}; installed: {', '.join(sorted(known)) or 'none'}): reinstall bmaas"
        )
        for protocol in sorted(protocols)
        if protocol not in known
    ]


def interpreter(executable: str | None = None) -> list[InputError]:
    """The lab's workers start from ``sys.executable``: it must be there."""
    path = sys.executable if executable is None else executable
    if path and os.path.isfile(path) and os.access(path, os.X_OK):
        return []
    shown = path or "(none: sys.executable is empty)"
    return [_problem(f"the Python interpreter {shown} cannot be run: the lab's workers need it")]


def loopback(
    protocols: Collection[str],
    *,
    make: Callable[[int, int], socket.socket] = socket.socket,
) -> list[InputError]:
    """One bind to a free port of 127.0.0.1 per transport the run needs."""
    wanted = []
    if "ipmi" in protocols:
        wanted.append(("UDP", socket.SOCK_DGRAM, "IPMI"))
    if "redfish" in protocols:
        wanted.append(("TCP", socket.SOCK_STREAM, "Redfish"))
    problems = []
    for name, kind, who in wanted:
        try:
            with make(socket.AF_INET, kind) as sock:
                sock.bind(("127.0.0.1", 0))
        except OSError as exc:
            problems.append(
                _problem(
                    f"cannot listen on {name} 127.0.0.1 (the lab's {who} BMCs do): "
                    f"{exc.strerror or exc}"
                )
            )
    return problems


def environment(environ: Mapping[str, str] | None = None) -> list[InputError]:
    """Every bad ``BMAAS_BMC_*`` and ``BMAAS_REDFISH_TLS_*`` value."""
    from bmaas import gate, tlspolicy

    return gate.environment_problems(environ) + tlspolicy.environment_problems(environ)


def folder(
    path: Path | None, *, field: str, probe: Callable[[Path], None] | None = None
) -> list[InputError]:
    """``path`` (None: the temporary folder) is, or can be made, a folder
    this user can write in: a file is made and removed in it, or in the
    nearest folder above it that exists (``os.access`` says yes to root
    for ``/proc``, where nothing can be made)."""
    target = Path(tempfile.gettempdir()) if path is None else path
    where = field if path is not None else None
    if target.is_symlink():
        return [_problem(f"{target} is a symbolic link: give the folder itself", where)]
    if target.exists() and not target.is_dir():
        return [_problem(f"{target} exists and is not a folder", where)]
    parent = target
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return [_problem(f"{target} cannot be made: {parent} is not a folder", where)]
    try:
        (probe or _probe)(parent)
    except OSError as exc:
        what = "is not writable" if parent == target else f"cannot be made in {parent}"
        return [_problem(f"{target} {what}: {exc.strerror or exc}", where)]
    return []


def _probe(where: Path) -> None:
    """Make and remove a file in ``where`` (nothing is left behind)."""
    with tempfile.TemporaryFile(dir=where, prefix=".hwlab-probe-"):
        pass


def profiles(spec: str) -> list[InputError]:
    """A problem per name of ``--profile`` that is neither built in nor a file."""
    from bmaas.hwlab import profiles as known

    problems = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        try:
            known.resolve(part)
        except InputError as exc:
            problems.append(InputError(exc.message, field="--profile"))
    return problems


def scenarios(
    only: Iterable[str], known: Mapping[str, Collection[str]], protocols: Collection[str]
) -> list[InputError]:
    """A problem per ``--only`` name that is no scenario (``known``: each
    scenario's protocols), or one with nothing to run over ``protocols``
    (a vendor incident of the other protocol: the run would measure nothing)."""
    problems = []
    for name in dict.fromkeys(only):
        if name in known:
            over = known[name]
            if not set(over) & set(protocols):
                problems.append(
                    InputError(
                        f"scenario {name!r} runs over {' and '.join(over)} only, and "
                        f"--protocol gives {' and '.join(protocols)}: nothing would run",
                        field="--only",
                    )
                )
            continue
        hint = difflib.get_close_matches(name, list(known), n=1)
        tail = f"did you mean {hint[0]!r}?" if hint else f"known: {', '.join(known)}"
        problems.append(InputError(f"unknown scenario {name!r}; {tail}", field="--only"))
    return problems


def _common(protocols: Collection[str], workdir: Path | None, field: str) -> list[InputError]:
    return [
        *packages(protocols),
        *drivers(protocols),
        *interpreter(),
        *loopback(protocols),
        *environment(),
        *folder(workdir, field=field),
    ]


def matrix_problems(
    protocols: Collection[str], only: Iterable[str], shapes: Iterable[str] = ()
) -> list[InputError]:
    """Everything ``hwlab matrix`` needs, every problem at once."""
    from bmaas.hwlab.harness.matrix import SCENARIOS
    from bmaas.hwlab.redfish.shapes import SHAPES

    known = {s.name: tuple(s.expected) for s in SCENARIOS}
    wrong = [
        InputError(f"unknown shape {name!r} (one of: none, {', '.join(SHAPES)})", field="--shape")
        for name in dict.fromkeys(shapes)
        if name not in SHAPES and name != "none"
    ]
    return [*scenarios(only, known, protocols), *wrong, *_common(protocols, None, "--workdir")]


#: the protocols of a demo lab, by ``--protocols``
DEMO_PROTOCOLS = {
    "mixed": ("ipmi", "redfish"),
    "both": ("ipmi", "redfish"),
    "ipmi": ("ipmi",),
    "redfish": ("redfish",),
}


def demo_problems(protocols: str, profile: str, workdir: Path | None) -> list[InputError]:
    """Everything ``hwlab demo`` needs, every problem at once."""
    speaks = DEMO_PROTOCOLS[protocols]
    return [*profiles(profile), *_common(speaks, workdir, "--workdir")]
