"""The Ironic rows of ``hwlab bench events``: the same lab and the same
outside power changes, seen by a real Ironic's power sync.

For each row a fresh standalone Ironic (:class:`~bmaas.hwlab.harness.ironic.IronicService`,
API and conductor in one process, SQLite) on the bench's lab, its
``[conductor]sync_power_state_interval`` the bench's ``--interval``
(rounded to whole seconds: Ironic's option is an integer) and
``force_power_state_during_sync = false`` (Ironic's default, true, powers a
node back to its recorded state at the pass that finds it changed: the
outside change would show as Ironic undoing it). Every lab node is enrolled
and managed through the REST API with the row's hardware type (a fleet over
:data:`API_ENROLL_MAX` nodes is written to Ironic's database ``manageable``
before the conductor starts, as ``hwlab bench ironic-scale --enroll-via db``:
10,000 validations through the API would take the row's hour), then:

* ``redfish``: Ironic's stock ``redfish`` type (sushy): every node read every pass;
* ``bmaas-polling``: ``bmaas-redfish`` with ``[bmaas]events = false``: every
  node read every pass;
* ``bmaas-events``: ``bmaas-redfish`` with ``[bmaas]events = true`` (the
  default) and ``events_safety_interval`` the bench's ``--safety-interval``:
  the conductor holds one SSE stream per service and answers the sync's
  reads from it (:mod:`bmaas.drivers.ironic.streams`);
* ``bmaas-push``: as ``bmaas-events``, through push subscriptions to the
  conductor's own listener (``[bmaas]events_listen`` on a free port of
  127.0.0.1, ``events_prefer_push = true``): no socket held per service.

Detection is when Ironic's API shows the node's new ``power_state``
(``GET /v1/nodes?fields=power_state`` every :data:`TICK` seconds while a
change is pending). The events reach the conductor's cache at once, but
Ironic records a power state only in its sync pass, so inside Ironic the
bound is the sync interval either way; what events change is what the pass
costs the BMCs (counted there, as the bmaas rows are) and so what sync
interval a fleet can afford. CPU is every Ironic process's (user + system,
the API's share of the bench's own watching included: the same in every
Ironic row); threads, file descriptors and RSS are the conductor's process
tree's, sampled through the steady window.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bmaas.hwlab.harness import ironic as harness
from bmaas.hwlab.harness.bench.common import sampled
from bmaas.hwlab.harness.bench.ironic_scale import enroll_all, enroll_in_db
from bmaas.hwlab.harness.bench.outside import (
    Measured,
    Options,
    count_requests,
    counted,
    first_passes,
    late_grace,
    outside_changes,
    steady_window,
)
from bmaas.hwlab.harness.ironic import IronicError
from bmaas.hwlab.harness.ironic_rest import IronicRest
from bmaas.hwlab.proxy.stock import free_port

__all__ = [
    "MODES",
    "TICK",
    "IronicError",
    "driver_of",
    "ironic_label",
    "notes",
    "one_mode",
    "settings",
]

#: the rows, stock first
MODES = ("redfish", "bmaas-polling", "bmaas-events", "bmaas-push")
#: seconds between looks at Ironic's API while a change is pending
TICK = 0.2
#: seconds Ironic may take to start, and the enrollment to finish
START_CAP = 240.0
ENROLL_CAP = 300.0
#: pending changes up to which a look asks Ironic for those nodes one by one,
#: not for the whole fleet (10 pages of 1,000 every TICK at 10,000 nodes:
#: the watch would load the conductor it measures)
FEW = 20
#: the largest fleet enrolled through Ironic's REST API; a larger one is
#: written to its database before the conductor starts
API_ENROLL_MAX = 1000
_STATES = {"power on": "on", "power off": "off"}


def driver_of(mode: str) -> str:
    return "redfish" if mode == "redfish" else "bmaas-redfish"


def settings(mode: str, options: Options) -> harness.IronicSettings:
    """The row's ironic.conf: Ironic's defaults but the sync interval, the
    README's ``[bmaas]`` budget, events as the row says."""
    if mode not in MODES:
        raise ValueError(f"no Ironic row {mode!r} (known: {', '.join(MODES)})")
    bmaas: dict[str, Any] = {
        "events": "false" if mode in ("redfish", "bmaas-polling") else "true",
        "events_safety_interval": options.safety_interval,
    }
    if options.liveness_interval is not None:  # else the driver's default (300 s)
        bmaas["events_liveness_interval"] = options.liveness_interval
    if mode == "bmaas-push":
        bmaas |= {"events_listen": f"127.0.0.1:{free_port()}", "events_prefer_push": "true"}
    return harness.IronicSettings(
        sync_interval=max(1, round(options.interval)),
        sync_max_retries=3,
        power_timeout=60,
        bmaas_call_deadline=5.0,
        bmaas_operation_deadline=60.0,
        bmaas_sync_deadline=15.0,
        extra={
            "conductor": {"force_power_state_during_sync": "false"},
            "bmaas": bmaas,
        },
    )


def ironic_label(mode: str, interval: float, safety: float) -> str:
    """An Ironic row as the tables name it."""
    every = max(1, round(interval))
    if mode in ("redfish", "bmaas-polling"):
        return f"Ironic {driver_of(mode)}: polling every {every} s"
    via = "push" if mode == "bmaas-push" else "SSE"
    return (
        f"Ironic bmaas-redfish: events ({via}) + safety net every {safety:g} s, "
        f"sync every {every} s"
    )


def enrolled_via(nodes: int) -> str:
    """How a row enrolls ``nodes``: ``api`` (Ironic's REST API, each node
    managed: its power validated at the BMC) or ``db`` (written to Ironic's
    database ``manageable`` before the conductor starts)."""
    return "api" if nodes <= API_ENROLL_MAX else "db"


def notes(options: Options) -> list[str]:
    every = max(1, round(options.interval))
    enrolled = (
        "enrolled and managed through Ironic's REST API"
        if enrolled_via(options.nodes) == "api"
        else "written to Ironic's database manageable before its conductor started "
        f"(over {API_ENROLL_MAX} nodes, as ironic-scale --enroll-via db)"
    )
    return [
        f"Ironic rows: every lab node {enrolled}",
        "Ironic rows: a fresh standalone Ironic each (API + conductor, SQLite) on the same "
        f"lab, sync every {every} s, force_power_state_during_sync false; detection is "
        "Ironic's API showing the new power_state (Ironic records power only in its sync "
        "pass: with events too the bound is one sync interval); CPU is every Ironic "
        "process's (its API answering the bench's watch, its own periodic tasks included); "
        "'steady' starts once the sync has read every node (polling), or once every node's "
        "stream has opened and one more pass has reconciled it (events), at most "
        f"{options.duration / 2:g} s in; a total leaves out Ironic's start and the enrollment",
    ]


def one_mode(
    mode: str,
    lab: Any,
    workdir: Path,
    names: list[str],
    options: Options,
    progress: Callable[[str], None],
) -> Measured:
    """One Ironic row (the module doc): a fresh Ironic under ``workdir``,
    every lab node enrolled, ``options.duration`` seconds of outside changes."""
    conf = settings(mode, options)
    driver = driver_of(mode)
    interval = float(conf.sync_interval)
    rng = random.Random(f"{options.seed}/ironic-{mode}")
    measured = Measured(f"ironic-{mode}")
    ironic = harness.IronicService(workdir / f"ironic-{mode}", conf)
    try:
        progress(f"ironic {mode}: starting Ironic")
        ironic.start(timeout=START_CAP)
        rest = IronicRest(ironic.url)
        via = enrolled_via(len(names))
        progress(f"ironic {mode}: enrolling {len(names)} nodes ({driver}, via {via})")
        # counted from before the enrollment: a stream opens at a node's first
        # sync pass, which may come before the last node is manageable
        count_requests(lab, names)
        if via == "api":
            uuids = enroll_all(rest, lab, driver, 4, ENROLL_CAP)
        else:
            uuids = enroll_in_db(ironic, lab, driver, cap=ENROLL_CAP, start_cap=START_CAP)
        by_name = dict(zip(names, uuids, strict=True))
        enrolled = counted(lab, names)  # the enrollment's requests: not the row's
        started, cpu_at_start = time.monotonic(), ironic.cpu_seconds()
        # start-up: the first pass that reads every node; with events the
        # stream opens at a node's first pass and the next one reconciles it
        streamed = mode not in ("redfish", "bmaas-polling")
        first_passes(lab, names, streamed, interval, started + options.duration / 2)
        end = started + options.duration

        def recorded(wanted: list[str]) -> dict[str, str]:
            if len(wanted) <= FEW:  # the common case: a change or two pending
                found = {n: rest.node(by_name[n], ("power_state",)) for n in wanted}
                return {n: _STATES.get(str(found[n].get("power_state")), "?") for n in wanted}
            states = {
                str(n["uuid"]): _STATES.get(str(n.get("power_state")), "?")
                for n in rest.nodes(("power_state",))
            }
            return {name: states.get(by_name[name], "?") for name in wanted}

        if ironic.process is None:
            raise IronicError("ironic is not running")
        with sampled(ironic.process.pid) as measured.footprint:
            steady_window(lab, names, measured, ironic.cpu_seconds, started, lambda ended: (
                outside_changes(lab, names, rng, measured, recorded, options.every, end,
                                end - interval - 5.0, TICK, ended, late_grace(interval))
            ))  # fmt: skip
        measured.cpu -= cpu_at_start  # Ironic's start and the enrollment left out
        measured.requests -= enrolled  # subscribes: every open, the first ones too
    finally:
        ironic.stop()
    progress(f"ironic {mode}: {measured.changes} changes, {len(measured.latencies)} seen")
    return measured
