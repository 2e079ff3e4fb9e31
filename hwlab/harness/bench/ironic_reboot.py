"""``hwlab bench ironic-reboot``: power on through a rebooting BMC and past
"busy" answers, through a real Ironic's API as an operator drives it, stock
and bmaas hardware types side by side in one run (issue 35's measurement).

One lab (every machine speaks IPMI and Redfish, every IPMI BMC on a loopback
address of its own: stock ``ipmi`` spaces its commands per address) and one
standalone Ironic (``--release``: another release ``scripts/ironic-env.sh
--release`` installed) with the ``[bmaas]`` defaults (call 5 s, operation
180 s, sync 15 s) and Ironic's own otherwise (a power sync every 60 s,
``power_state_change_timeout`` 60 s, ``[ipmi]min_command_interval`` 5).

Each **round** powers on, at once, one node per hardware type and reboot
window (``--window``, default 10 s, 45 s and 120 s: a BMC rebooting to apply
a firmware update, hwlab's ``bmc_reboot`` effect, once: the BMC answers
nothing for the window, from the first request after the rule is put on)
and, for the IPMI types, one node whose BMC answers "node busy" (0xC0,
the ``ipmi-node-busy`` field incident) ``--busy`` times. Each trial:

1. powers the node off through the API and waits until Ironic has let go
   of it: no power change pending and no conductor holding its lock
   (``reservation`` empty) -- a request made earlier is refused 409
   "locked", which the first version of this measurement met;
2. puts the fault on the node's BMC;
3. asks for ``power on`` (a 409 all the same -- a power sync took the lock
   in between -- is asked again, counted, within ``--cap``) and waits until
   no power change is pending: the outcome (``on``, or the error Ironic
   recorded, with bmaas's code where there is one) and the seconds from the
   first request;
4. watches the machine itself (the lab's power, not Ironic's record) for
   ``--watch`` seconds, a power-sync pass and more: a machine seen on that
   goes off was **switched off by Ironic** (its sync forcing the state it
   recorded: ``force_power_state_during_sync``) after the BMC took the
   power-on, whatever Ironic said of the action (issue 48).

Requires ``scripts/ironic-env.sh`` (Ironic in ``.venv-ironic``) and ipmitool
(stock ``ipmi`` shells out to it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bmaas import faulttext
from bmaas.fakes.machine import Hardware
from bmaas.hwlab.harness import ironic as harness
from bmaas.hwlab.harness.bench.common import ironic_enroll, ironic_running, running_lab
from bmaas.hwlab.harness.bench.report import Report, Table, fmt_seconds, short
from bmaas.hwlab.lab import Lab
from bmaas.hwlab.labspec import generate, loopback_hosts

__all__ = ["BUSY_TYPES", "TYPES", "Options", "Trial", "plan", "run"]

#: bmaas first, its stock counterpart beside it
TYPES = ("bmaas-ipmi", "ipmi", "bmaas-redfish", "redfish")
#: the "node busy" trials: IPMI's 0xC0
BUSY_TYPES = ("bmaas-ipmi", "ipmi")

QUICK = Hardware(power_on_time=0.3, power_off_time=0.2, soft_off_time=0.5, os_boot_time=1.0)
#: seconds between reads of a node the bench waits on
POLL = 0.5
#: seconds between reads of a watched machine's power
WATCH_POLL = 1.0


@dataclasses.dataclass(frozen=True)
class Options:
    rounds: int = 2
    #: BMC reboot windows, seconds (a firmware update's reset: 90-120 s in the field)
    windows: tuple[float, ...] = (10.0, 45.0, 120.0)
    #: "node busy" answers per busy trial (0: no busy trials)
    busy: int = 6
    types: tuple[str, ...] = TYPES
    #: seconds a trial may wait for Ironic at each step
    cap: float = 300.0
    #: seconds the machine is watched after the outcome (0: not watched): a
    #: power sync (every ``sync_interval``) and its read
    watch: float = 75.0
    #: another Ironic release ("": the current one, ``.venv-ironic``)
    release: str = ""
    #: the [bmaas] budget under test (its defaults)
    call_deadline: float = 5.0
    operation_deadline: float = 180.0
    sync_deadline: float = 15.0
    #: Ironic's own defaults
    sync_interval: int = 60
    power_timeout: int = 60

    @classmethod
    def smoke(cls) -> Options:
        return cls(
            rounds=1, windows=(10.0,), busy=6, types=("bmaas-ipmi", "ipmi"), cap=180, watch=0
        )


@dataclasses.dataclass(frozen=True)
class Trial:
    """One power-on: which round, hardware type and fault."""

    round: int
    driver: str
    #: "reboot 10s", "busy x6"
    fault: str
    rule: dict[str, Any]


def plan(o: Options) -> list[Trial]:
    """Every trial of the run, round by round (each round's run at once)."""
    trials = []
    for r in range(1, o.rounds + 1):
        for window in o.windows:
            rule = {"effect": "bmc_reboot", "duration": float(window), "times": 1}
            trials += [Trial(r, d, f"reboot {window:g}s", rule) for d in o.types]
        if o.busy:
            rule = {
                "effect": "incident",
                "incident": "ipmi-node-busy",
                "protocol": "ipmi",
                "times": o.busy,
            }
            trials += [Trial(r, d, f"busy x{o.busy}", rule) for d in o.types if d in BUSY_TYPES]
    return trials


def _released(conn: Any, node: Any, cap: float) -> Any:
    """Wait until Ironic has let go of ``node``: no power or provision
    change pending, no conductor holding its lock. The node as read."""
    end = time.monotonic() + cap
    while True:
        fresh = harness.read_node(conn, node.id)
        if (
            not fresh.target_power_state
            and not fresh.target_provision_state
            and not fresh.reservation
        ):
            return fresh
        if time.monotonic() > end:
            raise harness.IronicError(
                f"node {fresh.name}: still held after {cap:g}s (power target "
                f"{fresh.target_power_state}, reservation {fresh.reservation})"
            )
        time.sleep(POLL)


def _conflict(exc: Exception) -> bool:
    """Ironic's 409: the node is locked by a conductor."""
    return getattr(exc, "status_code", None) == 409 or "409" in str(exc)[:64]


def _ask(conn: Any, node: Any, target: str, end: float) -> int:
    """Ask for a power change; a 409 (locked) is asked again until ``end``.
    How many 409s were met."""
    conflicts = 0
    while True:
        try:
            conn.baremetal.set_node_power_state(node, target, wait=False)
            return conflicts
        except Exception as exc:
            if not _conflict(exc) or time.monotonic() > end:
                raise
            conflicts += 1
            _released(conn, node, max(1.0, end - time.monotonic()))


def _switched_off(power: Callable[[], str], seconds: float) -> bool:
    """Whether the machine, read through ``power`` every second for
    ``seconds``, was seen on and then off: nothing but Ironic asks it to
    power off meanwhile."""
    seen_on = False
    end = time.monotonic() + seconds
    while True:
        state = power()
        if state == "on":
            seen_on = True
        elif seen_on and state == "off":
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(WATCH_POLL)


def _trial(conn: Any, lab: Lab, node: Any, lab_name: str, t: Trial, o: Options) -> dict[str, Any]:
    cap = o.cap
    out: dict[str, Any] = {
        "round": t.round,
        "driver": t.driver,
        "fault": t.fault,
        "node": node.id,
        "lab_name": lab_name,
    }
    # 1. off, and Ironic done with the node
    _ask(conn, node, "power off", time.monotonic() + cap)
    harness.wait_for_power_settled(conn, node, timeout=cap, poll=POLL)
    before = _released(conn, node, cap)
    out["off_first"] = before.power_state == "power off"
    # 2. the fault, 3. the operator's request
    lab.add_faults(lab_name, [t.rule])
    start = time.monotonic()
    out["conflicts"] = _ask(conn, node, "power on", start + cap)
    settled = None
    with contextlib.suppress(harness.IronicError):  # still pending at the cap: a figure too
        settled = harness.wait_for_power_settled(conn, node, timeout=cap, poll=POLL)
    out["seconds"] = round(time.monotonic() - start, 1)
    out["settled"] = settled is not None
    fresh = settled or harness.read_node(conn, node.id)
    out["power"] = fresh.power_state
    text = str(fresh.last_error) if fresh.last_error else None
    out["last_error"] = text
    parsed = faulttext.parse(text) if text else None
    out["code"] = parsed.code if parsed else None
    out["on"] = out["settled"] and fresh.power_state == "power on" and not text
    fired = lab.status()["nodes"][lab_name]["fired"]
    out["fired"] = int(sum(fired.values()) if isinstance(fired, dict) else sum(fired))
    lab.clear_faults(lab_name)
    # 4. the machine itself: did Ironic switch it back off?
    out["switched_off"] = _switched_off(
        lambda: str(lab.status()["nodes"][lab_name]["power"]), o.watch
    )
    out["machine"] = str(lab.status()["nodes"][lab_name]["power"])
    return out


def run(options: Options, *, progress: Callable[[str], None] = lambda _: None) -> Report:
    o = options
    trials = plan(o)
    spec = generate(len(trials), protocols="both", seed=35, hardware=QUICK)
    ipmi_hosts = loopback_hosts([n.name for n in spec.nodes if "ipmi" in n.protocols])
    results: list[dict[str, Any]] = []
    unmeasured: list[str] = []
    venv = harness.find_venv(o.release)
    settings = harness.IronicSettings.budget(o, power_timeout=o.power_timeout)
    progress(f"starting a lab of {len(trials)} nodes and Ironic")
    with (
        tempfile.TemporaryDirectory(prefix="bench-ironic-reboot-") as tmp,
        running_lab(spec, Path(tmp) / "lab", ipmi_hosts=ipmi_hosts) as lab,
        ironic_running(Path(tmp) / "ironic", settings, venv) as (ironic, conn),
    ):
        entries = list(lab.inventory()["nodes"])
        lock = threading.Lock()

        def enroll(t: Trial) -> tuple[Trial, Any, str]:
            with lock:
                entry = entries.pop(0)
            node = ironic_enroll(
                conn, ironic, entry, driver=t.driver, prefix=f"r{t.round}-{t.driver}"
            )
            return t, node, entry["name"]

        progress(f"enrolling {len(trials)} nodes")
        with ThreadPoolExecutor(4) as pool:
            enrolled = list(pool.map(enroll, trials))
        for r in range(1, o.rounds + 1):
            batch = [e for e in enrolled if e[0].round == r]
            progress(f"round {r}/{o.rounds}: {len(batch)} power-ons at once")
            with ThreadPoolExecutor(len(batch)) as pool:
                futures = [
                    (t, pool.submit(_trial, conn, lab, node, name, t, o)) for t, node, name in batch
                ]
                for t, future in futures:
                    try:
                        results.append(future.result())
                    except Exception as exc:  # a row not measured: the run says why
                        unmeasured.append(
                            f"round {t.round} {t.driver} {t.fault}: {type(exc).__name__}: "
                            f"{' '.join(str(exc).split())[:200]}"
                        )
    report = _report(o, results, ironic=harness.ironic_version(venv))
    report.unmeasured = unmeasured
    return report


def _outcome(r: dict[str, Any]) -> str:
    if r["on"]:
        return "on"
    if not r["settled"]:
        return "pending"
    return r["code"] or "error"


def summary(results: Sequence[dict[str, Any]], fault: str, driver: str) -> str:
    """``on n/m, a-b s`` for one fault and hardware type over the rounds."""
    rows = [r for r in results if r["fault"] == fault and r["driver"] == driver]
    if not rows:
        return "-"
    on = [r for r in rows if r["on"]]
    text = f"on {len(on)}/{len(rows)}"
    if on:
        lo, hi = min(r["seconds"] for r in on), max(r["seconds"] for r in on)
        text += f", {lo:.1f} s" if lo == hi else f", {lo:.1f}-{hi:.1f} s"
    codes = sorted({_outcome(r) for r in rows if not r["on"]})
    if codes:
        text += f"; {', '.join(codes)}"
    off = [r for r in rows if r.get("switched_off")]
    if off:
        text += f"; switched off {len(off)}"
    return text


def _report(o: Options, results: list[dict[str, Any]], *, ironic: str | None = None) -> Report:
    order = list(dict.fromkeys(t.fault for t in plan(o)))
    results.sort(
        key=lambda r: (
            r["round"],
            order.index(r["fault"]) if r["fault"] in order else len(order),
            o.types.index(r["driver"]),
        )
    )
    trials = Table(
        "Power on through Ironic's API: each trial",
        [
            "round",
            "fault",
            "hardware type",
            "outcome",
            "seconds",
            "409s",
            "fired",
            "switched off",
            "last_error",
        ],
        [
            [
                r["round"],
                r["fault"],
                r["driver"],
                _outcome(r),
                fmt_seconds(r["seconds"], lower_bound=not r["settled"]),
                r["conflicts"],
                r["fired"],
                "yes" if r.get("switched_off") else "no",
                short(r["last_error"], 80),
            ]
            for r in results
        ],
    )
    faults = list(dict.fromkeys(r["fault"] for r in results))
    overview = Table(
        f"Power on, {o.rounds} round(s): nodes on, seconds from the request, "
        "the codes of the others, machines Ironic switched back off",
        ["fault", *o.types],
        [[f, *(summary(results, f, d) for d in o.types)] for f in faults],
    )
    bmaas = [r for r in results if r["driver"].startswith("bmaas-")]
    stock = [r for r in results if not r["driver"].startswith("bmaas-")]
    # the API's own bookkeeping (a request, the conductor's task, the poll)
    # on top of the operation budget
    slack = 5.0
    within = [r for r in bmaas if r["on"] and r["seconds"] <= o.operation_deadline + slack]
    headline: dict[str, float | None] = {
        "bmaas_on": len([r for r in bmaas if r["on"]]) / len(bmaas) if bmaas else None,
        "stock_on": len([r for r in stock if r["on"]]) / len(stock) if stock else None,
        "bmaas_on_within_operation_deadline": len(within) / len(bmaas) if bmaas else None,
        "bmaas_switched_off": len([r for r in bmaas if r.get("switched_off")]) if bmaas else None,
        "stock_switched_off": len([r for r in stock if r.get("switched_off")]) if stock else None,
    }
    notes = [
        f"[bmaas] call_deadline={o.call_deadline:g}s operation_deadline="
        f"{o.operation_deadline:g}s sync_deadline={o.sync_deadline:g}s (the defaults); "
        f"Ironic {ironic or '(version unknown)'}: sync every {o.sync_interval}s, "
        "power_state_change_timeout "
        f"{o.power_timeout}s, [ipmi]min_command_interval 5 (its defaults)",
        "seconds: from the 'power on' request until Ironic had no power change pending "
        "(the API's and the conductor's bookkeeping included); within the operation "
        f"deadline means <= {o.operation_deadline:g} s + {slack:g} s of that bookkeeping",
        "fault: 'reboot Ns' is hwlab's bmc_reboot (the BMC answers nothing for N s, once, "
        "from the first request after the rule is put on); 'busy xN' the ipmi-node-busy "
        "incident (completion code 0xC0) on N power requests",
        "409s: requests Ironic refused because a conductor held the node (asked again); "
        "each trial starts once Ironic holds no lock on the node",
        f"switched off: the machine (the lab's power, not Ironic's record) was seen on "
        f"and then off within {o.watch:g} s after the outcome: Ironic's power sync "
        "forcing the state it had recorded",
    ]
    return Report(
        scenario="ironic-reboot",
        title="Power on through a rebooting or busy BMC: bmaas vs stock, one real Ironic",
        params=dataclasses.asdict(o),
        tables=[overview, trials],
        headline=headline,
        notes=notes,
        data={"trials": results},
    )
