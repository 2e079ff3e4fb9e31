"""``hwlab bench ironic-scale``: how many nodes one Ironic conductor syncs, per hardware type.

For each size and hardware type: a fresh hwlab lab and a fresh standalone
Ironic (API and conductor in one process, SQLite, as the ``ironic`` tests run
it, Ironic's defaults: 8 sync workers, ``[ipmi]min_command_interval`` 5 s,
``power_state_sync_max_retries`` 3). Every IPMI BMC listens on a loopback
address of its own (:func:`bmaas.hwlab.labspec.loopback_hosts`): stock ``ipmi``
spaces its ipmitool calls per address *string*, and a fleet on one
127.0.0.1 would be throttled as one BMC. The nodes are enrolled and managed
through the REST API, then measured:

* **a clean sync pass**: its duration, as Ironic itself times
  ``ConductorManager._sync_power_states`` (statsd, heard by
  :class:`~bmaas.hwlab.harness.statsd.StatsdSink`); the first pass that starts
  after enrollment is skipped (the CPU window needs a pass end before it);
* **conductor CPU per node per pass**: user + system of every Ironic process
  and of the children it waited for (stock ``ipmi``'s ipmitool), from one
  pass end to the next, minus the idle conductor's rate over the same time,
  over the nodes -- everything one cycle costs, keepalives included;
* **API p95 during the sync**: ``GET /v1/nodes/<uuid>`` of random nodes
  every 0.25 s, the calls made while a measured pass ran;
* **logins per node per pass** at the lab's BMCs (1/passes: sessions last);
* **time to fence one dead BMC**: ``hang`` on one node, seconds until
  Ironic has it in maintenance with fault ``power failure``;
* with ``--hung-fraction``, **the stretch**: that share of the BMCs hangs,
  and over the clean median: the first pass that began with them hung
  (it meets every one of them before anything is known about them), the
  longest pass until Ironic has fenced them, and the median of those passes.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bmaas.fakes.machine import Hardware
from bmaas.faults import InputError
from bmaas.hwlab.harness import ironic as harness
from bmaas.hwlab.harness.bench.common import percentile
from bmaas.hwlab.harness.bench.report import Report, Table, fmt_seconds
from bmaas.hwlab.harness.ironic_rest import IronicRest
from bmaas.hwlab.harness.statsd import Metric, StatsdSink
from bmaas.hwlab.lab import Lab
from bmaas.hwlab.labspec import generate, loopback_hosts

__all__ = ["FLOOR", "TYPES", "Options", "enroll_all", "run"]

TYPES = ("ipmi", "bmaas-ipmi", "redfish", "bmaas-redfish")
#: Ironic's own fake-hardware, only when asked for (``--type fake-hardware``):
#: no BMC is asked, so its pass is what Ironic's sync costs by itself (task
#: locks, node loads, its database) -- the floor under every driver's pass
FLOOR = "fake-hardware"
#: Ironic's timer around one whole power-sync pass
SYNC_TIMER = "ConductorManager._sync_power_states"
QUICK = Hardware(power_on_time=0.3, power_off_time=0.2, soft_off_time=0.5, os_boot_time=1.0)


@dataclasses.dataclass(frozen=True)
class Options:
    sizes: tuple[int, ...] = (100, 1000)
    types: tuple[str, ...] = TYPES
    #: [conductor]sync_power_state_interval (Ironic's default: 120)
    interval: int = 120
    #: clean passes measured per size and type
    passes: int = 2
    fence: bool = True
    #: the hardware types whose fencing is timed (stock ipmi takes minutes on a hung BMC)
    fence_types: tuple[str, ...] = TYPES
    #: share of BMCs hung for the stretch (0: not measured)
    hung_fraction: float = 0.0
    #: threads enrolling nodes
    enroll_workers: int = 4
    #: "api": create and manage through the REST API (a verify each);
    #: "db": through Ironic's object layer before it starts (bmaas.hwlab.harness.ironic_bulk)
    enroll_via: str = "api"
    #: seconds any one wait (enrollment, a pass, a fence) may take
    cap: float = 1800.0
    #: more ironic.conf settings, each ``section.option=value`` (e.g.
    #: ``bmaas.keep_sessions=false``), for every Ironic of the run
    conf: tuple[str, ...] = ()
    #: append each finished row here as a JSON line (a long run keeps what it
    #: measured if it is interrupted)
    journal: str | None = None

    @classmethod
    def smoke(cls) -> Options:
        return cls(
            sizes=(6,),
            types=("ipmi", "bmaas-ipmi"),
            # over [ipmi]min_command_interval (5 s): stock ipmi would wait for it
            interval=6,
            passes=1,
            hung_fraction=0.0,
            fence_types=("bmaas-ipmi",),
            cap=60.0,
        )


@dataclasses.dataclass
class _Pass:
    start: float
    end: float
    cpu: float  # Ironic's CPU seconds (children included) when the pass ended


class _Watch:
    """The passes Ironic reports, each with the conductor's CPU at its end."""

    def __init__(self, ironic: harness.IronicService) -> None:
        self.ironic = ironic
        self.passes: list[_Pass] = []
        self.cond = threading.Condition()

    def heard(self, metric: Metric) -> None:
        if SYNC_TIMER not in metric.name or metric.kind != "ms":
            return
        cpu = self.ironic.cpu_seconds()
        with self.cond:
            self.passes.append(_Pass(metric.at - metric.value / 1000.0, metric.at, cpu))
            self.cond.notify_all()

    def after(self, since: float, count: int, cap: float) -> list[_Pass]:
        """The first ``count`` passes that started at or after ``since``
        (waits for them, up to ``cap`` seconds; fewer if it ran out)."""
        end = time.monotonic() + cap
        with self.cond:
            while True:
                found = [p for p in self.passes if p.start >= since]
                left = end - time.monotonic()
                if len(found) >= count or left <= 0:
                    return found[:count]
                self.cond.wait(min(left, 1.0))


class _Prober:
    """``GET /v1/nodes/<uuid>`` of random nodes every 0.25 s, timed."""

    def __init__(self, rest: IronicRest, nodes: list[str], seed: int = 3) -> None:
        self.rest = rest
        self.nodes = nodes
        self.random = random.Random(seed)
        self.samples: list[tuple[float, float]] = []  # (started, seconds)
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="api-prober", daemon=True)

    def __enter__(self) -> _Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            node = self.random.choice(self.nodes)
            start = time.monotonic()
            try:
                self.rest.node(node)
            except (harness.IronicError, ValueError):  # counted, not fatal
                self.errors += 1
                continue
            self.samples.append((start, time.monotonic() - start))

    def within(self, passes: list[_Pass]) -> list[float]:
        return [s for t, s in self.samples if any(p.start <= t <= p.end for p in passes)]


def _settings(o: Options, statsd_port: int) -> harness.IronicSettings:
    extra: dict[str, dict[str, str | int]] = {
        "metrics": {"backend": "statsd"},
        "metrics_statsd": {"statsd_host": "127.0.0.1", "statsd_port": statsd_port},
    }
    for section, option, value in parse_conf(o.conf):
        extra.setdefault(section, {})[option] = value
    return harness.IronicSettings(sync_interval=o.interval, extra=extra)


def parse_conf(items: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """``section.option=value`` settings; every malformed one named at once."""
    out, bad = [], []
    for item in items:
        key, sep, value = item.partition("=")
        section, dot, option = key.strip().partition(".")
        if not (sep and dot and section and option):
            bad.append(item)
            continue
        out.append((section, option.strip(), value.strip()))
    if bad:
        raise InputError(
            f"--conf takes section.option=value, not {', '.join(map(repr, bad))}", field="--conf"
        )
    return out


def enroll_all(rest: IronicRest, lab: Lab, driver: str, workers: int, cap: float) -> list[str]:
    """Every lab node enrolled with ``driver`` and managed (power validated at
    its BMC); their UUIDs. Raises if they are not all manageable by ``cap``."""
    entries = lab.inventory()["nodes"]

    def one(entry: dict[str, Any]) -> str:
        info = harness.driver_info_for(entry, driver)
        uuid = rest.create_node(name=f"{driver}-{entry['name']}", driver=driver, driver_info=info)
        rest.provision(uuid, "manage")
        return uuid

    with ThreadPoolExecutor(workers) as pool:
        uuids = list(pool.map(one, entries))
    end = time.monotonic() + cap
    while True:
        nodes = list(rest.nodes(("provision_state", "target_provision_state")))
        waiting = [n for n in nodes if n["provision_state"] != "manageable"]
        if not waiting:
            return uuids
        if time.monotonic() > end:
            raise harness.IronicError(
                f"{len(waiting)} of {len(nodes)} nodes not manageable by {cap:g}s"
            )
        # a manage request lost to a timeout, or verified too early: ask again
        for node in waiting:
            if node["provision_state"] == "enroll" and not node["target_provision_state"]:
                rest.provision(node["uuid"], "manage")
        time.sleep(2.0)


def enroll_in_db(
    ironic: harness.IronicService, lab: Lab, driver: str, *, cap: float, start_cap: float
) -> list[str]:
    """Every lab node written to ``ironic``'s database ``manageable`` with
    ``driver`` (the conductor stopped for it and started again, by
    ``start_cap``); their UUIDs. 10,000 validations through the API would
    take an hour (:func:`enroll_all`)."""
    ironic.stop()
    uuids = ironic.bulk_enroll(_bulk(lab, driver), timeout=cap)
    ironic.launch(timeout=start_cap)
    return uuids


def _bulk(lab: Lab, driver: str) -> list[dict[str, Any]]:
    return [
        {
            "name": f"{driver}-{entry['name']}",
            "driver": driver,
            "driver_info": harness.driver_info_for(entry, driver),
        }
        for entry in lab.inventory()["nodes"]
    ]


def _logins(lab: Lab, protocol: str) -> int:
    status = lab.status()["nodes"]
    return sum(n.get("sessions", {}).get(protocol, {}).get("logins", 0) for n in status.values())


def _fenced(rest: IronicRest, uuids: set[str]) -> int:
    """How many of ``uuids`` Ironic has fenced. Asks for nodes in maintenance
    only: listing all 1000 every 2 s cost the conductor (API and conductor
    are one process here) 0.25 s a call, 13% of a core during the very
    passes the stretch measures."""
    return sum(
        1
        for n in rest.nodes(("fault",), maintenance=True)
        if n["uuid"] in uuids and n.get("fault") == "power failure"
    )


def _idle_rate(ironic: harness.IronicService, seconds: float) -> float:
    cpu0, t0 = ironic.cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    return (ironic.cpu_seconds() - cpu0) / (time.monotonic() - t0)


def _trial(
    o: Options, size: int, driver: str, workdir: Path, progress: Callable[[str], None]
) -> dict[str, Any]:
    # the floor's nodes get a lab of IPMI BMCs too (never asked: fake power)
    protocol = "ipmi" if driver == FLOOR else driver.removeprefix("bmaas-")
    spec = generate(size, protocols=protocol, seed=11, hardware=QUICK)
    hosts = loopback_hosts([n.name for n in spec.nodes]) if protocol == "ipmi" else {}
    lab = Lab(spec, workdir / "lab", ipmi_hosts=hosts)
    #: the node whose BMC dies for the fence timing (the stretch spares it)
    dead = size // 2
    out: dict[str, Any] = {"driver": driver, "nodes": size}
    with StatsdSink([SYNC_TIMER]) as sink:
        ironic = harness.IronicService(workdir / "ironic", _settings(o, sink.port))
        watch = _Watch(ironic)
        sink.on_metric = watch.heard
        try:
            lab.start(timeout=300)
            ironic.start(timeout=180)
            idle = _idle_rate(ironic, 3.0)
            rest = IronicRest(ironic.url)
            progress(f"{driver} x {size}: enrolling ({o.enroll_via})")
            t0 = time.monotonic()
            if o.enroll_via == "db":
                uuids = enroll_in_db(ironic, lab, driver, cap=o.cap, start_cap=300)
            else:
                uuids = enroll_all(rest, lab, driver, o.enroll_workers, o.cap)
            enrolled = time.monotonic()
            out["enroll_s"] = round(enrolled - t0, 1)
            out["enroll_via"] = o.enroll_via
            progress(f"{driver} x {size}: enrolled in {enrolled - t0:.0f}s; timing passes")
            with _Prober(rest, uuids) as prober:
                first = watch.after(enrolled, 1, o.cap + o.interval)
                logins0 = _logins(lab, protocol)
                measured = watch.after(enrolled, 1 + o.passes, o.cap + o.interval * o.passes)[1:]
                logins1 = _logins(lab, protocol)
                out.update(_passes(first + measured, size, idle))
                api = prober.within(measured)
            out["api_p95_ms"] = _ms(percentile(api, 0.95))
            out["api_samples"] = len(api)
            out["api_errors"] = prober.errors
            counted = len(measured)
            out["logins_per_node_pass"] = (
                round((logins1 - logins0) / (size * counted), 3) if counted else None
            )
            if o.fence and driver in o.fence_types:
                out.update(_fence(o, rest, lab, spec.nodes[dead].name, uuids[dead]))
            if o.hung_fraction > 0 and driver != FLOOR:  # fake power never hangs
                clean = out.get("pass_median_s")
                out.update(_stretch(o, rest, lab, watch, spec, uuids, dead, clean))
        finally:
            ironic.stop()
            lab.stop()
    return out


def _passes(passes: list[_Pass], size: int, idle: float) -> dict[str, Any]:
    """Durations of the measured passes (all but the first given) and the
    conductor's CPU per node per pass between consecutive pass ends."""
    durations = [p.end - p.start for p in passes[1:]]
    cpu = [
        max(0.0, (b.cpu - a.cpu) - idle * (b.end - a.end)) / size
        for a, b in itertools.pairwise(passes)
    ]
    return {
        "passes": len(durations),
        "pass_s": [round(d, 2) for d in durations],
        "pass_median_s": round(statistics.median(durations), 2) if durations else None,
        "cpu_per_node_pass_ms": _ms(statistics.median(cpu)) if cpu else None,
        "idle_cpu_per_s": round(idle, 4),
    }


def _fence(o: Options, rest: IronicRest, lab: Lab, name: str, uuid: str) -> dict[str, Any]:
    """Seconds until Ironic fences node ``uuid`` (lab node ``name``), whose
    BMC hangs from now on."""
    lab.add_faults(name, [{"effect": "hang"}])
    start = time.monotonic()
    cap = min(o.cap, (3 + 3) * o.interval + 120)
    while time.monotonic() - start < cap:
        node = rest.node(uuid)
        if node.get("maintenance") and node.get("fault") == "power failure":
            return {"fence_s": round(time.monotonic() - start, 1), "fence_capped": False}
        time.sleep(1.0)
    return {"fence_s": round(cap, 1), "fence_capped": True}


def _stretch(
    o: Options,
    rest: IronicRest,
    lab: Lab,
    watch: _Watch,
    spec: Any,
    uuids: list[str],
    spared: int,
    clean: float | None,
) -> dict[str, Any]:
    """The longest pass while ``hung_fraction`` of the BMCs hang (never node
    ``spared``, already fenced), until all are fenced (or ``cap``), over the
    clean median."""
    every = max(1, round(1 / o.hung_fraction))
    picked = [i for i in range(0, len(uuids), every) if i != spared]
    for i in picked:
        lab.add_faults(spec.nodes[i].name, [{"effect": "hang"}])
    start = time.monotonic()
    hung = {uuids[i] for i in picked}
    end = start + o.cap
    while time.monotonic() < end and _fenced(rest, hung) < len(hung):
        time.sleep(2.0)
    fenced_at = time.monotonic()
    # the pass running when the last one was fenced counts too
    watch.after(fenced_at - 0.001, 1, o.interval * 2 + 60)
    with watch.cond:
        during, first = _hung_passes(watch.passes, start)
    longest = max(during) if during else None
    return {
        "hung": len(hung),
        "hung_fenced": _fenced(rest, hung),
        "hung_fenced_s": round(fenced_at - start, 1),
        "hung_pass_s": [round(d, 2) for d in during],
        "first_hung_pass_s": round(first, 2) if first is not None else None,
        "stretch_first": round(first / clean, 2) if first and clean else None,
        "stretch": round(longest / clean, 2) if longest and clean else None,
        # the longest of a few passes is the noisiest figure there is: the
        # median of the hung passes over the clean median says the same thing
        # with less of one pass's luck in it
        "stretch_median": (
            round(statistics.median(during) / clean, 2) if during and clean else None
        ),
    }


def _hung_passes(passes: list[_Pass], start: float) -> tuple[list[float], float | None]:
    """The durations of the passes that ended after the BMCs began to hang
    at ``start``, and of the first that began after it: that one meets
    every hung BMC before anything is known about them (issue 35)."""
    during = [p.end - p.start for p in passes if p.end > start]
    first = next((p.end - p.start for p in passes if p.start >= start), None)
    return during, first


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def run(options: Options, *, progress: Callable[[str], None] = lambda _: None) -> Report:
    o = options
    parse_conf(o.conf)  # a malformed setting is an input error before anything starts
    trials = []
    for size in o.sizes:
        for driver in o.types:
            with tempfile.TemporaryDirectory(prefix="bench-ironic-scale-") as tmp:
                try:
                    trials.append(_trial(o, size, driver, Path(tmp), progress))
                except harness.IronicError as exc:  # the other rows still count
                    progress(f"{driver} x {size}: {exc}")
                    trials.append({"driver": driver, "nodes": size, "error": str(exc)})
            if o.journal:
                with open(o.journal, "a", encoding="utf-8") as journal:
                    journal.write(json.dumps(trials[-1]) + "\n")
    return _report(o, trials)


def _stretch_cell(t: dict[str, Any]) -> str:
    if not t.get("stretch"):
        return "—"
    median = t.get("stretch_median")
    first = t.get("stretch_first")
    return (
        (f"first {first}, " if first else "")
        + f"longest {t['stretch']}"
        + (f" (median {median})" if median else "")
    )


def _report(o: Options, trials: list[dict[str, Any]]) -> Report:
    rows = [
        [
            t["nodes"],
            t["driver"],
            fmt_seconds(t.get("enroll_s")),
            fmt_seconds(t.get("pass_median_s")),
            f"{t['cpu_per_node_pass_ms']} ms" if t.get("cpu_per_node_pass_ms") is not None else "—",
            f"{t['api_p95_ms']} ms" if t.get("api_p95_ms") is not None else "—",
            t.get("logins_per_node_pass", "—"),
            fmt_seconds(t.get("fence_s"), lower_bound=bool(t.get("fence_capped"))),
            _stretch_cell(t),
        ]
        for t in trials
    ]
    table = Table(
        f"One Ironic conductor's power sync (every {o.interval}s, 8 workers)",
        [
            "nodes",
            "hardware type",
            "enroll",
            "sync pass (median)",
            "conductor CPU per node per pass",
            "API p95 during sync",
            "logins per node per pass",
            "time to fence one dead BMC",
            (
                f"pass with {o.hung_fraction:.0%} hung / clean: first, longest (median)"
                if o.hung_fraction
                else "hung stretch"
            ),
        ],
        rows,
    )
    headline: dict[str, float | None] = {}
    for t in trials:
        key = f"{t['driver']}_{t['nodes']}"
        headline[f"{key}_pass_s"] = t.get("pass_median_s")
        headline[f"{key}_api_p95_ms"] = t.get("api_p95_ms")
        if t.get("stretch_first") is not None:
            headline[f"{key}_first_hung_pass_ratio"] = t["stretch_first"]
    notes = [f"ironic.conf: {item}" for item in o.conf] + [
        "one standalone Ironic per row (API + conductor, SQLite), Ironic's defaults: "
        "sync_power_state_workers 8, ipmi min_command_interval 5, "
        "power_state_sync_max_retries 3; bmaas-* with the Ironic guide's [bmaas] defaults",
        "every IPMI BMC on its own loopback address (127.1.x.y): stock ipmi spaces its "
        "commands per address string",
        "pass duration: Ironic's own statsd timer ConductorManager._sync_power_states; "
        "the first pass after enrollment is not counted",
        "conductor CPU: every Ironic process and the children it waited for (ipmitool), "
        "from one pass end to the next, minus the idle conductor's rate, over the nodes",
        "API p95: GET /v1/nodes/<uuid> of random nodes every 0.25 s, calls made while a "
        "measured pass ran",
    ]
    if FLOOR in o.types:
        notes.append(
            f"{FLOOR}: Ironic's own fake power interface (reads the database, asks no BMC): "
            "the floor of a sync pass, Ironic's own work alone"
        )
    unmeasured = [f"{t['driver']} x {t['nodes']}: {t['error']}" for t in trials if "error" in t]
    notes += [f"{row.replace(': ', ': not measured: ', 1)}" for row in unmeasured]
    return Report(
        scenario="ironic-scale",
        title="Nodes per Ironic conductor: power sync by hardware type",
        params=dataclasses.asdict(o),
        tables=[table],
        headline=headline,
        notes=notes,
        data={"trials": trials},
        unmeasured=unmeasured,
    )
