"""``hwlab bench ironic``: stock ``ipmi``/``redfish`` vs ``bmaas-ipmi``/``bmaas-redfish``
through the same real Ironic, on the same lab.

Two phases, one Ironic (standalone, see :mod:`bmaas.hwlab.harness.ironic`):

1. **Faults.** For each fault class and hardware type, one node whose BMC
   has that fault on every operation is asked to power on (all trials at
   once). Measured: seconds from the API call until Ironic gave up (the
   power change no longer pending; ``--cap`` bounds the wait), what
   ``last_error`` said, whether the failure's code can be read from it
   (bmaas's prefix; stock messages carry none), and whether the node was in
   maintenance after ``--settle`` more seconds of power sync.
2. **Sync.** ``--sync-nodes`` nodes per type whose BMCs answer busy now and
   then (``--busy`` probability on a power read) are left to Ironic's power
   sync for ``--passes`` intervals, one type at a time, so the conductor's
   CPU time can be split per type. Measured: nodes fenced (maintenance with
   fault ``power failure``) and conductor CPU seconds per node per pass.

Requires ``scripts/ironic-env.sh`` (Ironic in ``.venv-ironic``) and ipmitool
(stock ``ipmi`` shells out to it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bmaas import faulttext
from bmaas.fakes.machine import Hardware
from bmaas.hwlab.harness import ironic as harness
from bmaas.hwlab.harness.bench.common import ironic_enroll, ironic_running, running_lab
from bmaas.hwlab.harness.bench.report import Report, Table, fmt_seconds, short
from bmaas.hwlab.lab import Lab
from bmaas.hwlab.labspec import generate

__all__ = ["FAULTS", "TYPES", "Options", "run"]

TYPES = ("ipmi", "bmaas-ipmi", "redfish", "bmaas-redfish")

#: fault name -> rule put on the node's BMC (every operation, as a sick BMC does)
FAULTS: dict[str, dict[str, Any]] = {
    "busy": {"effect": "busy"},
    "internal_error": {"effect": "internal_error"},
    "auth_fail": {"effect": "auth_fail"},
    "hang": {"effect": "hang"},
    "power_stuck": {"effect": "power_stuck", "operation": "power.set"},
}


def _incident(name: str, protocol: str, **when: Any) -> dict[str, Any]:
    return {"effect": "incident", "incident": name, "protocol": protocol, **when}


#: the field-incident catalogue (bmaas.fakes.incidents) as a power-on meets it,
#: windows in seconds an Ironic can show (longer than the lab's, shorter
#: than the documented 60 s); each is tried on the hardware types of its
#: protocol. The trial powers the node off first, so a window after a
#: power-off or a power change opens when the API call is made.
INCIDENT_FAULTS: dict[str, dict[str, Any]] = {
    "idrac10-power-on-conflict": _incident("idrac10-power-on-conflict", "redfish", within=15),
    "ilo-settling": _incident("ilo-settling", "redfish", within=8),
    "idrac-already-on": _incident("idrac-already-on", "redfish", times=1),
    "ilo-already-on": _incident("ilo-already-on", "redfish", times=1),
    # the licence answer on the trial's one operation (a power-on): how each
    # driver reports a licence-gated feature
    "supermicro-licence": _incident("supermicro-licence", "redfish", operation="power.set"),
    "idrac-licence": _incident("idrac-licence", "redfish", operation="power.set"),
    "ipmi-node-busy": _incident("ipmi-node-busy", "ipmi", times=6),
    "ipmi-not-in-present-state": _incident("ipmi-not-in-present-state", "ipmi", within=8),
    "ipmi-no-session-slot": _incident("ipmi-no-session-slot", "ipmi", times=4),
    # a BMC rebooting to apply a firmware update: unreachable for 10 s, once
    "firmware-update": {"effect": "bmc_reboot", "duration": 10.0, "times": 1},
}
FAULTS.update(INCIDENT_FAULTS)


def _applies(fault: str, driver: str) -> bool:
    """Whether ``fault`` is tried on hardware type ``driver`` (its protocol's)."""
    protocol = FAULTS[fault].get("protocol")
    return protocol is None or driver.removeprefix("bmaas-") == protocol


QUICK = Hardware(power_on_time=0.3, power_off_time=0.2, soft_off_time=0.5, os_boot_time=1.0)


@dataclasses.dataclass(frozen=True)
class Options:
    faults: tuple[str, ...] = tuple(FAULTS)
    #: seconds to wait for Ironic to give up on one power-on
    cap: float = 150.0
    #: seconds of power sync after the fault phase before maintenance is read
    settle: float = 40.0
    sync_nodes: int = 10
    passes: int = 10
    sync_interval: int = 5
    busy: float = 0.5
    #: the [bmaas] budget under test
    operation_deadline: float = 20.0
    sync_deadline: float = 8.0
    call_deadline: float = 2.0

    @classmethod
    def smoke(cls) -> Options:
        return cls(
            faults=("internal_error",), cap=90, settle=5, sync_nodes=2, passes=2, sync_interval=3
        )


class _Nodes:
    """Hands out lab nodes, enrolled on demand."""

    def __init__(self, lab: Lab, ironic: harness.IronicService, conn: Any) -> None:
        self.entries = list(lab.inventory()["nodes"])
        self.ironic = ironic
        self.conn = conn
        self.lock = threading.Lock()

    def enroll(self, driver: str) -> tuple[Any, str]:
        with self.lock:
            entry = self.entries.pop(0)
        node = ironic_enroll(self.conn, self.ironic, entry, driver=driver, prefix=driver)
        return node, entry["name"]


def _fault_trial(
    nodes: _Nodes, lab: Lab, conn: Any, driver: str, fault: str, cap: float
) -> dict[str, Any]:
    node, lab_name = nodes.enroll(driver)
    if fault in INCIDENT_FAULTS:
        lab.power(lab_name, "off")  # a power window opens now (after a power-off)
    lab.add_faults(lab_name, [FAULTS[fault]])
    start = time.monotonic()
    conn.baremetal.set_node_power_state(node, "power on", wait=False)
    gave_up = True
    power = None
    try:
        power = harness.wait_for_power_settled(conn, node, timeout=cap, poll=0.5).power_state
    except harness.IronicError:
        gave_up = False
    elapsed = time.monotonic() - start
    text = harness.failure_text(conn, node)
    parsed = faulttext.parse(text)
    return {
        "driver": driver,
        "fault": fault,
        "node": node.id,
        "lab_name": lab_name,
        "seconds": round(elapsed, 1),
        "gave_up": gave_up,
        "power": power,
        "last_error": text,
        "code": parsed.code if parsed else None,
    }


def _fault_phase(
    o: Options, nodes: _Nodes, lab: Lab, conn: Any, progress: Callable[[str], None]
) -> list[dict[str, Any]]:
    trials = [(d, f) for f in o.faults for d in TYPES if _applies(f, d)]
    progress(f"fault phase: {len(trials)} power-ons at once, cap {o.cap:g}s")
    with ThreadPoolExecutor(len(trials)) as pool:
        results = list(
            pool.map(lambda t: _fault_trial(nodes, lab, conn, t[0], t[1], o.cap), trials)
        )
    progress(f"letting the power sync run {o.settle:g}s")
    time.sleep(o.settle)
    for result in results:
        fresh = conn.baremetal.get_node(result["node"])
        result["maintenance"] = bool(fresh.is_maintenance)
        result["fault_field"] = fresh.fault
        if not result["last_error"]:
            result["last_error"] = harness.failure_text(conn, fresh)
    # Out of the way of the sync phase: a pass waits for its slowest read, and
    # a stock node still retrying its BMC would stretch every pass.
    for result in results:
        lab.clear_faults(result["lab_name"])
        with contextlib.suppress(Exception):  # a node still locked by a hung call stays
            conn.baremetal.delete_node(result["node"])
    return results


def _sync_phase(
    o: Options,
    nodes: _Nodes,
    lab: Lab,
    ironic: harness.IronicService,
    conn: Any,
    progress: Callable[[str], None],
) -> list[dict[str, Any]]:
    out = []
    for driver in TYPES:
        progress(f"sync phase: {o.sync_nodes} {driver} nodes, {o.passes} passes")
        with ThreadPoolExecutor(8) as pool:
            enrolled = list(pool.map(nodes.enroll, [driver] * o.sync_nodes))
        rule = {"effect": "busy", "operation": "power.get", "probability": o.busy}
        for _, lab_name in enrolled:
            lab.add_faults(lab_name, [rule])
        # The conductor's own cost over the same window, its sync skipping
        # these nodes (maintenance), is subtracted: with 10 nodes, periodic
        # tasks, the API and what earlier trials left running are most of
        # its CPU (the first published column divided all of it by the nodes).
        for node, _ in enrolled:
            conn.baremetal.set_node_maintenance(node, reason="bench: idle baseline")
        baseline = _conductor_cpu(ironic, o.sync_interval * o.passes)
        for node, _ in enrolled:
            conn.baremetal.unset_node_maintenance(node)
        cpu = _conductor_cpu(ironic, o.sync_interval * o.passes)
        status = lab.status()["nodes"]
        busy_answers = sum(_fired(status[name]["fired"]) for _, name in enrolled)
        fenced = 0
        for node, lab_name in enrolled:
            fresh = conn.baremetal.get_node(node.id)
            fenced += bool(fresh.is_maintenance)
            lab.clear_faults(lab_name)
        # out of the sync: maintenance keeps Ironic's sync off these nodes
        for node, _ in enrolled:
            conn.baremetal.set_node_maintenance(node, reason="bench: sync phase over")
        out.append(
            {
                "driver": driver,
                "nodes": o.sync_nodes,
                "passes": o.passes,
                "fenced": fenced,
                "cpu_per_node_pass_ms": round(
                    1000 * max(0.0, cpu - baseline) / (o.sync_nodes * o.passes), 2
                ),
                "baseline_cpu_s": round(baseline, 3),
                "cpu_s": round(cpu, 3),
                "busy_answers": busy_answers,
            }
        )
    return out


def _conductor_cpu(ironic: harness.IronicService, seconds: float) -> float:
    """Ironic's CPU seconds (its children's included) over ``seconds`` of wall time."""
    cpu0 = ironic.cpu_seconds()
    time.sleep(seconds)
    return ironic.cpu_seconds() - cpu0


def _fired(counts: Any) -> int:
    """How often a node's rules fired (the lab reports a count per rule)."""
    if isinstance(counts, dict):
        return int(sum(counts.values()))
    return int(sum(counts))


def run(options: Options, *, progress: Callable[[str], None] = lambda _: None) -> Report:
    o = options
    count = sum(_applies(f, d) for f in o.faults for d in TYPES) + o.sync_nodes * len(TYPES)
    spec = generate(count, protocols="both", seed=5, hardware=QUICK)
    import tempfile

    settings = harness.IronicSettings.budget(o, power_timeout=30)
    progress(f"starting a lab of {count} nodes and Ironic")
    with (
        tempfile.TemporaryDirectory(prefix="bench-ironic-") as tmp,
        running_lab(spec, Path(tmp) / "lab") as lab,
        ironic_running(Path(tmp) / "ironic", settings, None) as (ironic, conn),
    ):
        nodes = _Nodes(lab, ironic, conn)
        faults = _fault_phase(o, nodes, lab, conn, progress)
        sync = _sync_phase(o, nodes, lab, ironic, conn, progress)
    return _report(o, faults, sync)


def _report(o: Options, faults: list[dict[str, Any]], sync: list[dict[str, Any]]) -> Report:
    rows = []
    for r in faults:
        ok = r.get("power") == "power on" and not r["last_error"]
        rows.append(
            [
                r["fault"],
                r["driver"],
                "on" if ok else ("error" if r["gave_up"] else "pending"),
                fmt_seconds(r["seconds"], lower_bound=not r["gave_up"]),
                r["code"] or "-",
                "yes" if r["maintenance"] else "no",
                short(r["last_error"], 90),
            ]
        )
    fault_table = Table(
        "Power on with one fault or field incident on the BMC: time to success or error",
        ["fault", "hardware type", "result", "time", "code", "maintenance", "last_error"],
        rows,
    )
    sync_table = Table(
        f"Power sync, BMCs busy on {o.busy:.0%} of reads: {o.passes} passes",
        [
            "hardware type",
            "nodes",
            "busy answers",
            "fenced",
            "conductor CPU per node per pass",
            "conductor CPU, idle baseline",
        ],
        [
            [
                s["driver"],
                s["nodes"],
                s["busy_answers"],
                s["fenced"],
                f"{s['cpu_per_node_pass_ms']} ms",
                f"{s.get('baseline_cpu_s', 0.0):.2f} s",
            ]
            for s in sync
        ],
    )
    bmaas = [r for r in faults if r["driver"].startswith("bmaas-")]
    stock = [r for r in faults if not r["driver"].startswith("bmaas-")]
    within = [r for r in bmaas if r["gave_up"] and r["seconds"] <= o.operation_deadline * 1.1 + 10]
    headline: dict[str, float | None] = {
        "bmaas_codes_readable": sum(1 for r in bmaas if r["code"]) / len(bmaas) if bmaas else None,
        "stock_codes_readable": sum(1 for r in stock if r["code"]) / len(stock) if stock else None,
        "bmaas_within_budget": len(within) / len(bmaas) if bmaas else None,
        "bmaas_busy_fences": float(
            sum(s["fenced"] for s in sync if s["driver"].startswith("bmaas-"))
        ),
        "stock_busy_fences": float(
            sum(s["fenced"] for s in sync if not s["driver"].startswith("bmaas-"))
        ),
    }
    notes = [
        f"[bmaas] operation_deadline={o.operation_deadline:g}s sync_deadline={o.sync_deadline:g}s "
        f"call_deadline={o.call_deadline:g}s; Ironic defaults otherwise "
        "(ipmi min_command_interval 5, power_state_sync_max_retries 3)",
        "conductor CPU per node per pass: user+system of every Ironic process and of the "
        "children it waited for (ipmitool), over the passes, minus the same window measured "
        "just before with these nodes in maintenance (the sync skips them), over nodes x passes",
        "time to error is measured by the client from the API call until no power change is "
        "pending (Ironic's API and task overhead included); '≥' means still pending at --cap",
    ]
    return Report(
        scenario="ironic",
        title="Stock vs bmaas hardware types through one real Ironic",
        params=dataclasses.asdict(o),
        tables=[fault_table, sync_table],
        headline=headline,
        notes=notes,
        data={"faults": faults, "sync": sync},
    )
