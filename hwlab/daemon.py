"""Run a lab in the background: what ``hwlab up`` starts and ``hwlab down`` stops.

The daemon is its own session leader (its workers share its process group,
so ``hwlab down`` can always take everything down), keeps ``hwlab.pid`` and
``lab.json`` in the state directory, serves the control API on loopback, and
removes both files when it stops. ``lab.json``'s ``state`` goes
``starting`` -> ``ready`` (or ``failed``, with the error).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bmaas.faults import BmaasError, InputError
from bmaas.hwlab import profiles
from bmaas.hwlab.labspec import LabSpec, generate, load_labfile, shape_of, sse_keepalive_of
from bmaas.hwlab.limits import SSE_KEEPALIVE
from bmaas.hwlab.procmark import ProcessMark
from bmaas.secrets import mask_logs
from bmaas.signals import relayed_signals

if TYPE_CHECKING:
    from bmaas.hwlab.control import ControlServer
    from bmaas.hwlab.lab import Lab

__all__ = ["LabOptions", "build_spec", "lab_alive", "main", "pid_alive", "read_pid"]

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class LabOptions:
    """Everything ``hwlab up`` was told; JSON-serialisable for the daemon."""

    labfile: str | None = None
    nodes: int = 4
    protocols: str = "mixed"
    profile: str | None = None
    seed: int | str | None = None
    redfish_tls: bool = False
    #: Redfish systems per service (hwlab up --redfish-service-size)
    redfish_service_size: int = 1
    ipmi_base_port: int = 0
    redfish_base_port: int = 0
    control_port: int = 0
    #: machines per worker (None: automatic, see bmaas.hwlab.lab.shard_count)
    shard_size: int | None = None
    start_timeout: float = 120.0
    #: restart a worker that dies (hwlab up --no-restart: leave it dead)
    restart: bool = True
    #: every IPMI BMC on a loopback address of its own (hwlab up --ipmi-own-addresses)
    ipmi_own_addresses: bool = False
    #: the vendor shape of every Redfish BMC (hwlab up --shape; a lab file's
    #: per-node ``shape:`` wins)
    shape: str | None = None
    #: seconds between keepalive comments on an idle Redfish SSE stream
    #: (hwlab up --sse-keepalive; 0: none, as OpenBMC's bmcweb; None: not
    #: given, so the lab file's, else 30)
    sse_keepalive: float | None = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> LabOptions:
        return cls(**json.loads(text))


def build_spec(options: LabOptions) -> LabSpec:
    """The lab to build; raises ``InputError`` on any bad input, before
    anything starts."""
    if options.labfile:
        spec = load_labfile(options.labfile)
        changes: dict[str, Any] = {}
        if options.profile is not None:
            changes["profile"] = options.profile
        if options.seed is not None:
            changes["seed"] = options.seed
        if options.redfish_tls:
            changes["redfish_tls"] = True
        if options.redfish_service_size > 1:
            changes["redfish_service_size"] = options.redfish_service_size
        if options.sse_keepalive is not None:
            changes["sse_keepalive"] = sse_keepalive_of(
                options.sse_keepalive, field="--sse-keepalive"
            )
        spec = dataclasses.replace(spec, **changes)
    else:
        spec = generate(
            options.nodes,
            protocols=options.protocols,
            seed=options.seed if options.seed is not None else 0,
            profile=options.profile,
            redfish_tls=options.redfish_tls,
            redfish_service_size=options.redfish_service_size,
            sse_keepalive=(
                SSE_KEEPALIVE if options.sse_keepalive is None else options.sse_keepalive
            ),
        )
    if spec.profile:
        profiles.resolve(spec.profile)  # unknown profile: fail now, not in the daemon
    if options.shape is not None:
        from bmaas.hwlab.redfish.shapes import validate as valid_shape  # only when asked

        valid_shape(options.shape, field="--shape")
        spec = dataclasses.replace(
            spec,
            nodes=tuple(
                n if n.shape is not None else dataclasses.replace(n, shape=options.shape)
                for n in spec.nodes
            ),
        )
    shaped = sorted(
        {s for n in spec.nodes if (s := shape_of(n, spec.profile)) not in (None, "hwlab")}
    )
    if shaped and spec.redfish_service_size > 1:
        raise InputError(
            f"a vendor shape ({', '.join(shaped)}) serves one system per Redfish service",
            field="--redfish-service-size",
        )
    return spec


def read_pid(state_dir: Path) -> ProcessMark | None:
    """The daemon's mark in ``hwlab.pid`` (its pid, start time and
    executable: :class:`~bmaas.hwlab.procmark.ProcessMark`; read without
    following a link: a link is refused with one line), or None. ``hwlab
    down`` signals the daemon only while the mark holds: a pid reused by
    another process is never signalled (issue 44)."""
    from bmaas.hwlab.statefiles import read_private

    try:
        text = read_private(state_dir / "hwlab.pid", limit=4096)
    except FileNotFoundError:
        return None
    return ProcessMark.from_text(text)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); it is not serving anything.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def lab_alive(mark: ProcessMark) -> bool:
    """Is the lab whose pid file says ``mark`` running? Proven by the mark;
    a bare pid an older hwlab wrote is taken at its word (``pid_alive``)."""
    return mark.running() if mark.start >= 0 else pid_alive(mark.pid)


def main(argv: list[str] | None = None) -> int:
    # Imported here, not at the top: each worker process (spawned) imports
    # this module again as its main, and needs none of this.
    from bmaas.hwlab import statefiles
    from bmaas.hwlab.control import ControlServer
    from bmaas.hwlab.lab import Lab, write_json
    from bmaas.hwlab.labspec import loopback_hosts

    args = argv if argv is not None else sys.argv[1:]
    state_dir = statefiles.prepare_dir(args[0])  # 0700, ours, not a link
    options = LabOptions.from_json(args[1])
    log = statefiles.open_private(state_dir / "hwlab.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=os.fdopen(log, "a", encoding="utf-8"),
    )
    mask_logs()  # an image URL's password never reaches the log
    statefiles.write_private(state_dir / "hwlab.pid", ProcessMark.of(os.getpid()).to_text())
    lab_json = state_dir / "lab.json"
    write_json(lab_json, {"state": "starting", "pid": os.getpid()})
    stopping = threading.Event()
    # set from a relay thread: a handler that set the Event itself could hang
    # on the lock stopping.wait() holds (bmaas.signals)
    signals = contextlib.ExitStack()
    signals.enter_context(relayed_signals(lambda _signum: stopping.set()))
    lab: Lab | None = None
    control: ControlServer | None = None
    try:
        spec = build_spec(options)
        lab = Lab(
            spec,
            state_dir,
            shard_size=options.shard_size,
            ipmi_base_port=options.ipmi_base_port,
            redfish_base_port=options.redfish_base_port,
            restart=options.restart,
            ipmi_hosts=(
                loopback_hosts([n.name for n in spec.nodes if "ipmi" in n.protocols])
                if options.ipmi_own_addresses
                else None
            ),
        )
        started = time.monotonic()
        lab.start(timeout=options.start_timeout)
        # fresh for every lab: a token of a lab that is gone opens nothing
        token = statefiles.create_token(state_dir)
        control = ControlServer(
            lab, token=token, port=options.control_port, on_shutdown=stopping.set
        )
        control.start()
        info = {
            "state": "ready",
            "pid": os.getpid(),
            "control_url": control.url,
            "start_seconds": round(time.monotonic() - started, 3),
            **lab.describe(),
        }
        write_json(lab_json, info)
        # A restarted worker has a new pid: lab.json keeps telling the truth.
        lab.on_restart = lambda: write_json(lab_json, {**info, "worker_pids": lab.pids()})
        LOG.info("lab ready: %d nodes, control API %s", len(spec.nodes), control.url)
        while not stopping.wait(0.5):
            pass
        LOG.info("stopping")
        return 0
    except (BmaasError, OSError) as exc:
        LOG.error("lab failed: %s", exc)
        write_json(lab_json, {"state": "failed", "pid": os.getpid(), "error": str(exc)})
        return 1
    finally:
        if control is not None:
            control.stop()
        if lab is not None:
            lab.stop()
        if not lab_json.exists() or json.loads(lab_json.read_text()).get("state") != "failed":
            lab_json.unlink(missing_ok=True)
        statefiles.remove(state_dir / statefiles.TOKEN_FILE)
        (state_dir / "hwlab.pid").unlink(missing_ok=True)
        signals.close()


if __name__ == "__main__":
    sys.exit(main())
