"""``hwlab vm restart-bmc``: a real restart of the lab's BMC emulator.

The proxies' ``bmc_reboot`` closes a proxy's port for a while; the stock
emulator behind it never stops. This stops the process ``hwlab vm up``
started itself -- sushy-emulator (Redfish, every VM) or vbmcd (IPMI, a BMC
per VM, its children with it) -- by its :class:`~bmaas.hwlab.procmark.ProcessMark`
(SIGTERM to its group, SIGKILL after ``stop_timeout``), proves every port
of it refuses, keeps them refusing ``down`` seconds, and starts it again
from the same config directory on the ports the lab's inventory names: what
a BMC's own firmware restart looks like to bmaas (connection refused, then
an emulator that forgot its sessions). The VMs keep running through it: a
BMC restart is not a power cycle, which the guest's boot count shows.

A lab ``up`` with ``--proxies`` runs its emulators inside the proxied lab
(``STATE_DIR/lab``), not recorded here: refused, with where to look.
"""

from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from bmaas.faults import InputError
from bmaas.hwlab.procmark import ProcessMark
from bmaas.hwlab.proxy.host import ProxyError
from bmaas.hwlab.proxy.stock import StockSushy, StockVbmc
from bmaas.hwlab.vm import domain
from bmaas.hwlab.vm.lab import PASSWORD, USER
from bmaas.hwlab.vm.state import EMULATORS, VmLab
from bmaas.yamlsrc import load_text

__all__ = ["Restarted", "restart_bmc"]


@dataclasses.dataclass(frozen=True)
class Restarted:
    """One emulator's restart, as ``hwlab vm restart-bmc`` reports it."""

    name: str
    old_pid: int
    new_pid: int
    #: the signal that stopped it (SIGTERM, or SIGKILL past the bound)
    stopped_by: str
    #: seconds from the first signal until its every port refused
    stop_s: float
    #: seconds from the first refusal until it answered again
    refused_s: float
    ports: tuple[int, ...]


def _servers(lab: VmLab) -> dict[str, StockSushy | StockVbmc]:
    """The emulators as ``up`` made them: the same workdirs, systems and
    ports (the ports read back from the inventory ``up`` wrote: where bmaas
    was told the BMCs are)."""
    path = lab.state_dir / "inventory.yaml"
    try:
        doc = load_text(path.read_text(), source=str(path))
        info = {n["name"]: n["driver_info"] for n in doc["nodes"]}
        first = info[lab.domains[0]]
        sushy_port = urlsplit(first["redfish_address"]).port
        ipmi_ports = {lab.domain(n): int(info[n]["ipmi_port"]) for n in lab.domains}
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}: not the inventory hwlab vm up wrote ({exc})") from None
    vbmc = StockVbmc(
        lab.state_dir / "vbmc",
        list(ipmi_ports),
        libvirt_uri=domain.URI,
        username=USER,
        password=PASSWORD,
    )
    vbmc.ports = ipmi_ports
    sushy = StockSushy(
        lab.state_dir / "sushy",
        list(lab.uuids.values()),
        libvirt_uri=domain.URI,
        port=sushy_port or 0,
    )
    return {"sushy-emulator": sushy, "vbmcd": vbmc}


def _until(
    done: Callable[[], bool],
    timeout: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> bool:
    """Poll ``done`` every 0.1 s for at most ``timeout`` seconds."""
    end = clock() + timeout
    while not done():
        if clock() >= end:
            return False
        sleep(0.1)
    return True


def _stop(
    mark: ProcessMark,
    timeout: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> str:
    """SIGTERM to the marked group; SIGKILL if it still runs ``timeout``
    seconds later. The signal that ended it."""
    mark.signal_group(signal.SIGTERM)
    if _until(lambda: not mark.running(), timeout, sleep, clock):
        return "SIGTERM"
    mark.signal_group(signal.SIGKILL)
    return "SIGKILL"


def restart_bmc(
    state_dir: Path,
    names: list[str],
    *,
    down: float = 0.0,
    stop_timeout: float = 10.0,
    start_timeout: float = 60.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[Restarted]:
    """Restart each emulator of ``names`` (of :data:`EMULATORS`) in turn:
    stopped, its ports refusing for ``down`` seconds, started again."""
    lab = VmLab.load(state_dir)
    if lab is None:
        raise InputError(f"no VM lab is up in {state_dir} (hwlab vm up first)")
    if lab.proxies:
        raise InputError(
            f"the lab in {state_dir} runs its emulators inside its proxied lab "
            f"({lab.lab_dir}); restart-bmc restarts a lab up without --proxies"
        )
    unknown = [n for n in names if n not in EMULATORS]
    if unknown:
        raise InputError(f"{', '.join(unknown)}: not one of {', '.join(EMULATORS)}")
    stale = [n for n in names if n not in lab.pids or not lab.pids[n].holds()]
    if stale:
        raise InputError(
            f"{', '.join(stale)}: not running as hwlab vm up started it (left alone; "
            "hwlab vm down, then up)"
        )
    servers = _servers(lab)
    done = []
    for name in names:
        server, mark = servers[name], lab.pids[name]
        started = clock()
        stopped_by = _stop(mark, stop_timeout, sleep, clock)
        if not _until(server.refuses, stop_timeout, sleep, clock):
            raise ProxyError(f"{name}: its ports still answer {stop_timeout:g}s after {stopped_by}")
        refused = clock()
        sleep(down)
        server.start(start_timeout)
        assert server.pid is not None
        lab.pids[name] = ProcessMark.of(server.pid)
        lab.save()
        ports = (server.port,) if isinstance(server, StockSushy) else tuple(server.ports.values())
        done.append(
            Restarted(
                name,
                mark.pid,
                server.pid,
                stopped_by,
                refused - started,
                clock() - refused,
                ports,
            )
        )
    return done
