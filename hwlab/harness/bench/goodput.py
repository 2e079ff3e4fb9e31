"""goodput: how many deploys succeed on a flaky rack, how fast, at what cost.

A fixed stream of deploy requests (``workers`` at a time) runs against a
seeded lab (default profile ``flaky,dead-bmc,brownout``: busy and lossy
BMCs, slow power, dead BMCs, power that never comes on, nodes that fall
over after boot) three ways, each on a fresh lab started from the same seed:

* **no retry**: bmaas's :class:`~bmaas.provision.Provisioner` with
  ``RetryLimits.no_retry()`` and ``max_attempts=1``: a failed build ends in
  ERROR;
* **blind reschedule**: :mod:`bmaas.hwlab.harness.bench.blind`, what Nova did: any
  exception moves the request to another host (up to 3), no operation-level
  retries, no classification, a new port per attempt;
* **bmaas**: the ``Provisioner`` with its typed retries (``RetryLimits()``,
  up to 3 nodes, faults recorded so broken nodes stop being picked).

For each: success rate, time to active (p50, p95) of the successful ones,
deploys per minute, BMC calls made, ports created, and allocations and ports
leaked after the batch (held by anything but an instance:
:func:`bmaas.hwlab.harness.demo.leaks`). BMC calls are counted at the client: each call of
a driver's BMC methods (probe, power read/request, boot device, virtual
media, boot progress) through a wrapped driver factory; one driver call is
one bounded BMC operation (1 UDP exchange for IPMI, 1-3 HTTP requests for
Redfish). Ports are counted at ``store.ports.create``.

Then the same three against labs where a growing share of the nodes is
faulty (half with a dead BMC, half whose power never comes on): success
rate against that share, as a chart.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

from bmaas.deploy import DeploySettings
from bmaas.driver import BMCDriver
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.machine import Hardware
from bmaas.faults import BmaasError, ProvisionFailed
from bmaas.hwlab.harness.bench.blind import BlindReschedule, Placement
from bmaas.hwlab.harness.bench.common import CallCounter, enrolled_lab, percentile
from bmaas.hwlab.harness.bench.report import Report, Table, fmt_seconds
from bmaas.hwlab.harness.demo import leaks
from bmaas.hwlab.labspec import LabSpec, generate
from bmaas.ops import driver_factory
from bmaas.provision import Provisioner, Request
from bmaas.retry import RetryLimits
from bmaas.store import Store
from bmaas.store.records import NodeRecord

__all__ = ["STRATEGIES", "Options", "run"]

STRATEGIES = ("no retry", "blind reschedule", "bmaas")
#: driver methods that talk to the BMC: what "BMC calls" counts
BMC_METHODS = (
    "probe",
    "get_power_state",
    "request_power",
    "get_boot_device",
    "set_boot_device",
    "insert_virtual_media",
    "eject_virtual_media",
    "get_inventory",
    "get_boot_progress",
)
DEAD = FaultRule.from_dict({"name": "dead", "effect": "hang"})
STUCK = FaultRule.from_dict(
    {"name": "power-stuck", "effect": "power_stuck", "operation": "power.set"}
)


@dataclasses.dataclass(frozen=True)
class Options:
    nodes: int = 48
    requests: int = 32
    profile: str = "flaky,dead-bmc,brownout"
    seed: int = 7
    workers: int = 8
    #: every driver call's deadline, the same for all three strategies
    bmc_deadline: float = 2.0
    #: longer than the brownout profile's boot_crash (up 3 s): crashes are caught
    settle: float = 3.5
    shares: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5)
    share_nodes: int = 24
    share_requests: int = 12
    #: seconds to power on (off: half; the OS boots in twice this)
    power_on_time: float = 1.0

    @classmethod
    def smoke(cls) -> Options:
        return cls(
            nodes=8,
            requests=4,
            bmc_deadline=0.5,
            settle=0.5,
            shares=(0.5,),
            share_nodes=6,
            share_requests=3,
            power_on_time=0.2,
        )

    def hardware(self) -> Hardware:
        t = self.power_on_time
        return Hardware(power_on_time=t, power_off_time=t / 2, soft_off_time=t, os_boot_time=2 * t)

    def settings(self) -> DeploySettings:
        return DeploySettings(
            power_timeout=8.0, settle=self.settle, boot_timeout=20.0, deadline_s=60.0
        )


@dataclasses.dataclass(frozen=True)
class Outcome:
    request: str
    ok: bool
    elapsed: float
    faults: tuple[str, ...]


Provision = Callable[[Request], Outcome]


def counting_factory(
    inner: Callable[[NodeRecord], BMCDriver], counter: CallCounter
) -> Callable[[NodeRecord], BMCDriver]:
    """Drivers whose BMC methods count their calls (internal ones included)."""
    return lambda record: counter.wrap(inner(record), BMC_METHODS, prefix="bmc.")


@contextlib.contextmanager
def _strategy(
    name: str, store: Store, factory: Callable[[NodeRecord], BMCDriver], options: Options
) -> Iterator[Provision]:
    if name == "blind reschedule":
        blind = BlindReschedule(store, driver_factory=factory, settings=options.settings())

        def place(request: Request) -> Outcome:
            start = time.monotonic()
            done: Placement = blind.provision(request)
            return Outcome(request.name, done.ok, time.monotonic() - start, done.faults)

        yield place
        return
    policy, attempts = (RetryLimits.no_retry(), 1) if name == "no retry" else (RetryLimits(), 3)
    with Provisioner(
        store,
        driver_factory=factory,
        limits=policy,
        settings=options.settings(),
        max_attempts=attempts,
        deadline_s=180.0,
    ) as provisioner:

        def provision(request: Request) -> Outcome:
            start = time.monotonic()
            try:
                done = provisioner.provision(request)
            except ProvisionFailed as exc:
                faults = tuple(str(a.fault_class) for a in exc.attempts)
                return Outcome(request.name, False, time.monotonic() - start, faults)
            except BmaasError as exc:  # the store failed under us: one failed request
                return Outcome(request.name, False, time.monotonic() - start, (type(exc).__name__,))
            faults = tuple(str(a.fault_class) for a in done.attempts if not a.succeeded)
            return Outcome(request.name, True, time.monotonic() - start, faults)

        yield provision


def _run_strategy(name: str, spec: LabSpec, requests: int, options: Options) -> dict[str, Any]:
    with enrolled_lab(spec, "hwlab-bench-goodput-") as (_, db, _):
        store = Store.open(str(db))
        try:
            counter = CallCounter()
            counter.wrap(store.ports, ["create"], prefix="store.ports.")
            factory = counting_factory(driver_factory(bmc_timeout=options.bmc_deadline), counter)
            stream = [Request(f"gp-{i:03d}", network="lab") for i in range(1, requests + 1)]
            start = time.monotonic()
            with (
                _strategy(name, store, factory, options) as provision,
                concurrent.futures.ThreadPoolExecutor(options.workers) as pool,
            ):
                outcomes = list(pool.map(provision, stream))
            wall = time.monotonic() - start
            leaked_allocations, leaked_ports = leaks(store)
        finally:
            store.close()
    times = [o.elapsed for o in outcomes if o.ok]
    succeeded = len(times)
    return {
        "requests": requests,
        "succeeded": succeeded,
        "success_rate": succeeded / requests,
        "time_to_active_p50_s": percentile(times, 0.5),
        "time_to_active_p95_s": percentile(times, 0.95),
        "deploys_per_min": 60 * succeeded / wall if wall else None,
        "bmc_calls": counter.total("bmc."),
        "bmc_calls_by_method": {k[4:]: v for k, v in counter.counts().items() if k[:4] == "bmc."},
        "ports_created": counter.total("store.ports.create"),
        "leaked_allocations": leaked_allocations,
        "leaked_ports": leaked_ports,
        "faults": dict(collections.Counter(f for o in outcomes for f in o.faults).most_common()),
        "wall_s": wall,
    }


def share_spec(options: Options, share: float) -> LabSpec:
    """``share`` of the nodes faulty, seeded: half dead BMCs, half power stuck."""
    spec = generate(
        options.share_nodes, protocols="mixed", seed=options.seed, hardware=options.hardware()
    )
    names = sorted(n.name for n in spec.nodes)
    chosen = random.Random(f"{options.seed}/share").sample(names, round(share * len(names)))
    rules = {name: (DEAD if i % 2 == 0 else STUCK,) for i, name in enumerate(chosen)}
    nodes = tuple(dataclasses.replace(n, rules=rules.get(n.name, ())) for n in spec.nodes)
    return dataclasses.replace(spec, nodes=nodes)


def run(options: Options, *, progress: Callable[[str], None] = lambda _: None) -> Report:
    main_spec = generate(
        options.nodes,
        protocols="mixed",
        seed=options.seed,
        profile=options.profile,
        hardware=options.hardware(),
    )
    main = {}
    for name in STRATEGIES:
        main[name] = _run_strategy(name, main_spec, options.requests, options)
        progress(f"{name}: {main[name]['succeeded']}/{options.requests} active")
    shares: dict[str, dict[str, float]] = {}
    for share in options.shares:
        spec = share_spec(options, share)
        shares[f"{share:g}"] = {
            name: _run_strategy(name, spec, options.share_requests, options)["success_rate"]
            for name in STRATEGIES
        }
        progress(f"faulty share {share:g}: {shares[f'{share:g}']}")
    return _report(options, main, shares)


def _report(
    options: Options, main: dict[str, dict[str, Any]], shares: dict[str, dict[str, float]]
) -> Report:
    rows = [
        [
            name,
            f"{r['succeeded']}/{r['requests']} ({r['success_rate']:.0%})",
            fmt_seconds(r["time_to_active_p50_s"]),
            fmt_seconds(r["time_to_active_p95_s"]),
            f"{r['deploys_per_min']:.1f}" if r["deploys_per_min"] is not None else "—",
            r["bmc_calls"],
            r["ports_created"],
            r["leaked_allocations"],
            r["leaked_ports"],
        ]
        for name, r in main.items()
    ]
    share_rows = [
        [f"{float(share):.0%}", *(f"{rates[name]:.0%}" for name in STRATEGIES)]
        for share, rates in shares.items()
    ]
    ours = main["bmaas"]["success_rate"]
    headline: dict[str, float | None] = {
        f"success rate: {name}": round(r["success_rate"], 3) for name, r in main.items()
    }
    for name in ("no retry", "blind reschedule"):
        theirs = main[name]["success_rate"]
        headline[f"success: bmaas / {name}"] = round(ours / theirs, 2) if theirs else None
    notes = [
        f"{options.requests} requests on {options.nodes} nodes (profile {options.profile}, "
        f"seed {options.seed}), {options.workers} at a time; each strategy on a fresh lab "
        "from the same seed",
        f"every BMC call bounded at {options.bmc_deadline:g} s; settle {options.settle:g} s",
        "BMC calls: driver calls counted at the client (one bounded BMC operation each); "
        "ports: store.ports.create calls",
        "leaked: allocations and bmaas-made ports held by anything but an instance after the batch",
        f"faulty-share runs: {options.share_requests} requests on {options.share_nodes} nodes, "
        "faulty nodes half dead BMC, half power never on",
    ]
    return Report(
        scenario="goodput",
        title="Goodput: deploys on a flaky rack, three retry strategies",
        params=dataclasses.asdict(options),
        tables=[
            Table(
                "one stream of deploys, three strategies",
                [
                    "strategy",
                    "active",
                    "time to active p50",
                    "p95",
                    "deploys/min",
                    "BMC calls",
                    "ports created",
                    "leaked allocations",
                    "leaked ports",
                ],
                rows,
            ),
            Table("success rate as the faulty share grows", ["faulty", *STRATEGIES], share_rows),
        ],
        headline=headline,
        notes=notes,
        data={"strategies": main, "shares": shares},
        plot=plot,
    )


STYLES = {
    "no retry": ("#b2182b", "^:", 7),
    "blind reschedule": ("#d95f02", "s--", 11),
    "bmaas": ("#1b7837", "o-", 6),
}


def plot(fig: Any, report: Report) -> None:
    """Left: success rate against the faulty share; right: BMC calls per
    active node in the main run, with ports per active node on each bar."""
    shares = report.data["shares"]
    main = report.data["strategies"]
    left, right = fig.subplots(1, 2)
    xs = [float(s) * 100 for s in shares]
    for name in STRATEGIES:
        colour, style, size = STYLES[name]
        ys = [shares[s][name] * 100 for s in shares]
        left.plot(xs, ys, style, color=colour, markersize=size, label=name)
    left.set_xlabel("faulty nodes (%): half dead BMC, half power never on")
    left.set_ylabel("requests that became active (%)")
    left.set_ylim(-5, 105)
    left.set_xticks(xs)
    left.set_title("success rate as the rack gets worse")
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    positions = list(range(len(STRATEGIES)))
    calls = [main[n]["bmc_calls"] / max(1, main[n]["succeeded"]) for n in STRATEGIES]
    bars = right.bar(positions, calls, 0.6, color=[STYLES[n][0] for n in STRATEGIES])
    for bar, name in zip(bars, STRATEGIES, strict=True):
        ports = main[name]["ports_created"] / max(1, main[name]["succeeded"])
        right.text(
            bar.get_x() + bar.get_width() / 2,
            bar.get_height(),
            f"{ports:.2f} ports / active",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    labels = [f"{n}\n{main[n]['success_rate']:.0%} active" for n in STRATEGIES]
    right.set_xticks(positions, labels)
    right.set_ylabel("BMC calls per active node")
    right.set_title(f"cost per success ({report.params['profile']})")
    right.grid(axis="y", alpha=0.3)
    fig.suptitle(report.title)
    fig.tight_layout()
