"""``hwlab bench lifecycle``: a BIOS change and a firmware update through a
BMC reboot, three ways side by side (issue 51): stock Ironic ``redfish`` and
``bmaas-redfish`` through a real Ironic's API (manual clean steps without a
ramdisk, and servicing an active node), and bmaas's own CLI on the same lab.

Rows (each ``--trials`` times, every row of a trial at once, one fresh lab
node per trial):

* **BIOS change**: ``bios.apply_configuration`` (Ironic) or ``bmaas bios set
  ... --reboot`` (the CLI: set, reboot, read back); right when the settings
  read applied;
* **BIOS change, left pending** (hwlab ``bios_pending``: the boot applies
  nothing): right when the run *says* it failed -- a success, or a wait
  past ``--pending-cap`` (stock) or ``--cap`` (bmaas's ways), is the wrong
  end;
* **firmware update through a BMC reboot** (hwlab ``update_reboot``): the
  ``firmware.update`` clean step of ``bmaas-redfish`` and ``bmaas firmware
  update``, both with bmaas's default bounds (the BMC back after 3 answers
  30 s apart); right when the new version reads back. Stock's clean row is
  listed as not run: its clean step boots the ramdisk (IPA), which hwlab has
  not;
* **the same, servicing an active node**: ``firmware.update`` as a service
  step (API 1.87; stock's needs no ramdisk there, nor does bmaas's) on a
  node deployed by the harness's ramdisk deploy, both types with their
  defaults; right when the node is ``active`` again with the new version in
  Ironic's firmware table.

Per row: trials that ended right, the median seconds from the request to the
end state, the end states and the faults (``[bmaas CODE ...]`` parsed by
:mod:`bmaas.faulttext`, or the CLI's JSON code: typed; otherwise untyped).

Requires ``scripts/ironic-env.sh`` (Ironic in ``.venv-ironic``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bmaas import faulttext
from bmaas.hwlab.harness import ironic as harness
from bmaas.hwlab.harness.bench.common import (
    bmaas_console,
    enrolled_lab,
    ironic_enroll,
    ironic_running,
)
from bmaas.hwlab.harness.bench.ironic_reboot import POLL, QUICK
from bmaas.hwlab.harness.bench.report import Report, Table, fmt_seconds, short
from bmaas.hwlab.labspec import generate

__all__ = ["ROWS", "Options", "Row", "run"]

#: manual cleaning without a ramdisk (disable_ramdisk: 1.70), firmware API (1.86)
API = "1.86"
#: servicing an active node
SERVICE_API = "1.87"
WANTED = {"ProcTurboMode": "Disabled", "ProcCoreDisable": "2"}
IMAGE = "http://127.0.0.1:9/fw/bmc-2.0.bin"
#: the version the lab's BMC reads after IMAGE lands
VERSION = "bmc-2.0.bin"
STOCK, OURS, CLI = "redfish", "bmaas-redfish", "bmaas CLI"
#: the hardware types' bios and firmware interfaces
INTERFACE = {STOCK: "redfish", OURS: "bmaas"}


@dataclasses.dataclass(frozen=True)
class Row:
    what: str
    way: str
    #: the hwlab fault put on the node's BMC before the request
    rule: dict[str, Any] | None = None
    #: why the row is not run ("": it is)
    skip: str = ""
    #: through Ironic: ``clean`` (a manageable node) or ``service`` (an active one)
    via: str = "clean"


BIOS, PENDING, FIRMWARE, SERVICE = (
    "BIOS change",
    "BIOS change, left pending",
    "firmware update through a BMC reboot",
    "firmware update through a BMC reboot, servicing",
)
_PENDING_RULE = {"effect": "bios_pending", "operation": "bios.set"}
_REBOOT_RULE = {"effect": "update_reboot", "duration": 1.0, "operation": "firmware.update"}
ROWS = (
    *(Row(BIOS, way) for way in (STOCK, OURS, CLI)),
    *(Row(PENDING, way, _PENDING_RULE) for way in (STOCK, OURS, CLI)),
    Row(
        FIRMWARE,
        STOCK,
        skip="not run: stock's firmware.update clean step boots the ramdisk (IPA), "
        "which hwlab has not (its service step does not: the servicing row)",
    ),
    Row(FIRMWARE, OURS, _REBOOT_RULE),
    Row(FIRMWARE, CLI, _REBOOT_RULE),
    *(Row(SERVICE, way, _REBOOT_RULE, via="service") for way in (STOCK, OURS)),
)


@dataclasses.dataclass(frozen=True)
class Options:
    trials: int = 3
    #: seconds a trial may wait for its end state (stock's BMC update waits
    #: firmware_update_reboot_delay, 300 s, before it looks at the version)
    cap: float = 600.0
    #: seconds stock's pending-BIOS trial may wait (it keeps waiting in ``clean
    #: wait``; bmaas's ways end by themselves, bounded by ``cap``)
    pending_cap: float = 60.0
    #: another Ironic release ("": the current one, ``.venv-ironic``)
    release: str = ""
    #: [bmaas]lifecycle_deadline: seconds each BIOS apply or component update may take
    lifecycle_deadline: float = 300.0
    #: [redfish]firmware_update_reboot_delay (stock's wait before it reads the
    #: BMC's version; None: Ironic's default, 300 s, what the bench measures)
    stock_reboot_delay: int | None = None

    @classmethod
    def smoke(cls) -> Options:
        """One trial of each row, stock's BMC update looking after 10 s: the
        smoke run checks the harness, not stock's waits."""
        return cls(trials=1, pending_cap=30.0, cap=240.0, stock_reboot_delay=10)


def _settings(o: Options) -> harness.IronicSettings:
    return harness.IronicSettings(
        extra={
            "DEFAULT": {
                "enabled_bios_interfaces": "no-bios,redfish,bmaas",
                "enabled_firmware_interfaces": "no-firmware,redfish,bmaas",
            },
            # stock's BIOS apply is finished by a periodic task (default every 60 s)
            "redfish": {
                "firmware_update_status_interval": 2,
                **(
                    {"firmware_update_reboot_delay": o.stock_reboot_delay}
                    if o.stock_reboot_delay is not None
                    else {}
                ),
            },
            "bmaas": {"events": "false", "lifecycle_deadline": int(o.lifecycle_deadline)},
        }
    )


def _fault(out: dict[str, Any], text: str | None, code: str | None = None) -> None:
    out["fault"] = " ".join(text.split()) if text else None
    parsed = faulttext.parse(text) if text and not code else None
    out["code"] = code or (parsed.code if parsed else None)


# -- through Ironic -----------------------------------------------------------------


def _step(row: Row) -> dict[str, Any]:
    if row.what in (FIRMWARE, SERVICE):
        args: dict[str, Any] = {"settings": [{"component": "bmc", "url": IMAGE}]}
        return {"interface": "firmware", "step": "update", "args": args}
    args = {"settings": [{"name": k, "value": v} for k, v in WANTED.items()]}
    return {"interface": "bios", "step": "apply_configuration", "args": args}


def _applied(conn: Any, node: Any, row: Row) -> bool:
    if row.what in (FIRMWARE, SERVICE):
        answer = conn.baremetal.get(f"/nodes/{node.id}/firmware", microversion=API)
        versions = {c["component"]: c["current_version"] for c in answer.json()["firmware"]}
        return versions.get("bmc") == VERSION
    answer = conn.baremetal.get(f"/nodes/{node.id}/bios", microversion=API)
    cached = {s["name"]: s["value"] for s in answer.json()["bios"]}
    return all(cached.get(k) == v for k, v in WANTED.items())


def _ironic_trial(
    conn: Any, service: Any, lab: Any, entry: dict[str, Any], row: Row, cap: float
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    node = ironic_enroll(
        conn, service, entry, driver=row.way, prefix=f"lc-{row.way}", provide=False
    )
    kind = INTERFACE[row.way]
    node = conn.baremetal.update_node(node, bios_interface=kind, firmware_interface=kind)
    verbs = ("manage", "provide", "active") if row.via == "service" else ("manage",)
    for verb in verbs:  # active: the harness's ramdisk deploy (no IPA)
        conn.baremetal.set_node_provision_state(node, verb, wait=True, timeout=120)
    if row.rule:
        lab.add_faults(entry["name"], [row.rule])
    done = _ENDS[row.via][0]
    start = time.monotonic()
    answer = conn.baremetal.put(f"/nodes/{node.id}/states/provision", **_request(row))
    if answer.status_code != 202:
        raise harness.IronicError(f"{row.via} refused {answer.status_code}: {answer.text[:200]}")
    end = start + cap
    while not _settled(row, fresh := harness.read_node(conn, node.id)) and time.monotonic() < end:
        time.sleep(POLL)
    out["seconds"] = round(time.monotonic() - start, 1)
    out["end"] = fresh.provision_state
    out["settled"] = _settled(row, fresh)
    _fault(out, harness.failure_text(conn, node) if out["settled"] else None)
    out["applied"] = out["end"] == done and not out["fault"] and _applied(conn, node, row)
    if fresh.provision_state in ("clean wait", "service wait"):  # still waiting at the cap
        with contextlib.suppress(Exception):  # the run is measured; the node is left
            conn.baremetal.set_node_provision_state(node, "abort")
    return out


#: (done, failed) for a clean and for servicing
_ENDS = {"clean": ("manageable", "clean failed"), "service": ("active", "service failed")}


def _settled(row: Row, node: Any) -> bool:
    """At the end: failed (which keeps its target), or done with no target
    left (servicing starts from ``active`` as it ends there)."""
    done, failed = _ENDS[row.via]
    state = node.provision_state
    return state == failed or (state == done and not node.target_provision_state)


def _request(row: Row) -> dict[str, Any]:
    """The provision request's body and microversion: a manual clean without a
    ramdisk, or servicing (whose steps here need none)."""
    if row.via == "service":
        body: dict[str, Any] = {"target": "service", "service_steps": [_step(row)]}
        return {"json": body, "microversion": SERVICE_API}
    body = {"target": "clean", "clean_steps": [_step(row)], "disable_ramdisk": True}
    return {"json": body, "microversion": API}


# -- through bmaas's CLI ------------------------------------------------------------


def _cli_args(row: Row, name: str, cap: float) -> list[str]:
    if row.what == FIRMWARE:
        verb = ["firmware", "update", name, "--image", IMAGE, "--targets", "BMC"]
    else:
        verb = ["bios", "set", name, *(f"{k}={v}" for k, v in WANTED.items()), "--reboot"]
    return [bmaas_console(), *verb, "--json", "--deadline", f"{cap:g}"]


def _cli_trial(db: Path, lab: Any, name: str, row: Row, cap: float) -> dict[str, Any]:
    if row.rule:
        lab.add_faults(name, [row.rule])
    start = time.monotonic()
    done = subprocess.run(  # noqa: S603 - our own console script
        _cli_args(row, name, cap),
        env={**os.environ, "BMAAS_DB": str(db)},
        capture_output=True,
        text=True,
        timeout=cap + 60,
        check=False,
    )
    out: dict[str, Any] = {"seconds": round(time.monotonic() - start, 1), "settled": True}
    try:
        result = json.loads(done.stdout)["results"][0]
    except (ValueError, KeyError, IndexError) as exc:
        raise RuntimeError(f"exit {done.returncode}: {done.stderr.strip()[-200:]}") from exc
    out["end"] = "ok" if result["ok"] else "failed"
    fault = result.get("fault") or {}
    _fault(out, fault.get("message"), fault.get("code"))
    if row.what == FIRMWARE:
        versions = {c.get("id"): c.get("version") for c in result.get("result") or []}
        out["applied"] = result["ok"] and versions.get("BMC") == VERSION
    else:
        out["applied"] = bool(result["ok"])
    return out


# -- the run ------------------------------------------------------------------------


def _right(row: Row, r: dict[str, Any]) -> bool:
    """A change applied and read back; a pending one reported failed."""
    if row.what == PENDING:
        return bool(r["settled"] and not r["applied"] and r["end"] != "manageable")
    return bool(r["applied"])


def run(options: Options, *, progress: Callable[[str], None] = lambda _: None) -> Report:
    o = options
    rows = [r for r in ROWS if not r.skip]
    ironic_rows = [r for r in rows if r.way != CLI]
    per_trial = len(rows)
    spec = generate(o.trials * per_trial, protocols="redfish", seed=51, hardware=QUICK)
    results: list[dict[str, Any]] = []
    unmeasured: list[str] = []
    venv = harness.find_venv(o.release)
    progress("starting a lab and Ironic")
    with (
        enrolled_lab(spec, "bench-lifecycle-") as (lab, db, _names),
        tempfile.TemporaryDirectory(prefix="bench-lifecycle-ironic-") as tmp,
        ironic_running(Path(tmp), _settings(o), venv) as (service, conn),
    ):
        entries = list(lab.inventory()["nodes"])
        for t in range(1, o.trials + 1):
            progress(f"trial {t}/{o.trials}: {per_trial} rows at once")
            with ThreadPoolExecutor(per_trial) as pool:
                futures = []
                for row in rows:
                    entry = entries.pop(0)
                    # only stock keeps waiting on a pending setting; bmaas's ways end
                    # by themselves, and a short cap on them only measured how slowly
                    # a loaded runner started the CLI (load 28: a 30 s deadline spent
                    # before its driver was built)
                    cap = o.pending_cap if row.what == PENDING and row.way == STOCK else o.cap
                    if row in ironic_rows:
                        future = pool.submit(_ironic_trial, conn, service, lab, entry, row, cap)
                    else:
                        future = pool.submit(_cli_trial, db, lab, entry["name"], row, cap)
                    futures.append((row, future))
                for row, future in futures:
                    try:
                        r = future.result()
                    except Exception as exc:  # a row not measured: the run says why
                        unmeasured.append(
                            f"trial {t} {row.what} / {row.way}: {type(exc).__name__}: "
                            f"{' '.join(str(exc).split())[:200]}"
                        )
                        continue
                    r.update(trial=t, what=row.what, way=row.way)
                    r["right"] = _right(row, r)
                    results.append(r)
    report = _report(o, results, ironic=harness.ironic_version(venv))
    report.unmeasured = unmeasured
    return report


def _summary(row: Row, results: list[dict[str, Any]]) -> list[Any]:
    mine = [r for r in results if r["what"] == row.what and r["way"] == row.way]
    if row.skip:
        return [row.what, row.way, "-", "-", "-", row.skip]
    if not mine:
        return [row.what, row.way, "-", "-", "-", "not measured"]
    median = statistics.median(r["seconds"] for r in mine)
    ends = ", ".join(sorted({r["end"] + ("" if r["settled"] else " (at the cap)") for r in mine}))
    faults = sorted({f"{r['code']}: typed" if r["code"] else "untyped" for r in mine if r["fault"]})
    return [
        row.what,
        row.way,
        f"{sum(r['right'] for r in mine)}/{len(mine)}",
        fmt_seconds(median, lower_bound=not all(r["settled"] for r in mine)),
        ends,
        "; ".join(faults) or "-",
    ]


def _report(o: Options, results: list[dict[str, Any]], *, ironic: str | None) -> Report:
    order = {(r.what, r.way): i for i, r in enumerate(ROWS)}
    results.sort(key=lambda r: (r["trial"], order[(r["what"], r["way"])]))
    overview = Table(
        f"BIOS change and firmware update, {o.trials} trial(s): ended right, median "
        "seconds to the end state, end states, faults",
        ["change", "way", "right", "median", "end state", "faults"],
        [_summary(row, results) for row in ROWS],
    )
    trials = Table(
        "Each trial",
        ["trial", "change", "way", "end state", "seconds", "right", "fault"],
        [
            [
                r["trial"],
                r["what"],
                r["way"],
                r["end"],
                fmt_seconds(r["seconds"], lower_bound=not r["settled"]),
                "yes" if r["right"] else "no",
                short(r["fault"], 70),
            ]
            for r in results
        ],
    )

    def share(way: str) -> float | None:
        mine = [r for r in results if r["way"] == way]
        return sum(r["right"] for r in mine) / len(mine) if mine else None

    return Report(
        scenario="lifecycle",
        title="BIOS change and firmware update: stock redfish vs bmaas-redfish in Ironic, "
        "and bmaas's CLI",
        params=dataclasses.asdict(o),
        tables=[overview, trials],
        headline={"stock_right": share(STOCK), "bmaas_right": share(OURS), "cli_right": share(CLI)},
        notes=[
            # no brackets: the console's markup would eat "[bmaas]"
            f"Ironic {ironic or '(version unknown)'}: manual clean with disable_ramdisk, "
            "or servicing an active node (ramdisk deploy, no IPA); "
            "redfish.firmware_update_status_interval 2 (stock's BIOS apply and firmware "
            "update are followed by that periodic), its other firmware options Ironic's "
            f"defaults; bmaas.lifecycle_deadline {o.lifecycle_deadline:g} s",
            "right: the settings or the version read back applied; for a setting left "
            "pending, the run reported a failure (clean failed, or the CLI's node failed)",
            "seconds: from the request to the end state (Ironic: manageable or clean failed; "
            "servicing: active or service failed; "
            f"≥: still waiting at the cap, {o.cap:g} s, {o.pending_cap:g} s for stock's "
            "pending setting; a node in clean or service wait is then aborted)",
            "faults: typed when the text carries bmaas's marker (bmaas CODE retry=SCOPE, in "
            "brackets) or the CLI's JSON a code; untyped otherwise",
        ],
        data={"trials": results},
    )
