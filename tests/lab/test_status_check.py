"""``bmaas status check`` against hwlab labs through the real IPMI driver: a
healthy lab is all Success, and a dead BMC, rotated credentials, a missing
driver, an old schema and an orphaned allocation each turn the right check
to the right result."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from click.testing import CliRunner, Result

from bmaas import registry
from bmaas.cli import App, cli
from bmaas.hwlab.lab import Lab
from bmaas.hwlab.labspec import DEFAULT_PASSWORD
from bmaas.hwlab.profiles import PROFILES
from bmaas.store import OwnerKind, Store
from bmaas.store.migrate import MIGRATIONS

pytestmark = pytest.mark.lab

StartLab = Callable[..., Lab]


def bmaas(db: Path, *args: str, clock: Callable[[], float] = time.time) -> Result:
    app = App(db=str(db), clock=clock)
    return CliRunner().invoke(cli, list(args), obj=app, catch_exceptions=False)


def enrolled_lab(
    hwlab_lab: StartLab, tmp_path: Path, nodes: int = 3, **lab_kw: Any
) -> tuple[Lab, Path]:
    lab = hwlab_lab(nodes=nodes, **{"protocols": "ipmi", **lab_kw})
    db = tmp_path / "bmaas.db"
    enrolled = bmaas(db, "enroll", str(lab.inventory_path))
    assert enrolled.exit_code == 0, enrolled.stderr
    return lab, db


def check(db: Path, *args: str, **kw: Any) -> tuple[Result, dict[str, Any]]:
    """Run the check with --json; the result and the checks by name."""
    result = bmaas(db, "status", "check", "--json", *args, **kw)
    assert DEFAULT_PASSWORD not in result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["exit_code"] == result.exit_code
    return result, {c["name"]: c for c in report["checks"]}


def verdicts(checks: dict[str, Any]) -> dict[str, str]:
    return {name: c["result"] for name, c in checks.items()}


def test_a_healthy_lab_is_all_success(hwlab_lab: StartLab, tmp_path: Path) -> None:
    lab, db = enrolled_lab(hwlab_lab, tmp_path)
    result, checks = check(db, "--inventory", str(lab.inventory_path), "--deadline", "10")
    assert result.exit_code == 0, result.stdout
    assert set(verdicts(checks).values()) == {"Success"}
    assert checks["bmc"]["details"][0].startswith("3 of 3 BMC(s) answered")
    assert checks["power"]["details"] == ["3 of 3 read (off 3)"]
    table = bmaas(db, "status", "check", "--deadline", "10")
    assert table.exit_code == 0
    assert DEFAULT_PASSWORD not in table.stdout + table.stderr


def test_a_healthy_mixed_lab_over_verified_tls_is_all_success(
    hwlab_lab: StartLab, tmp_path: Path
) -> None:
    _lab, db = enrolled_lab(hwlab_lab, tmp_path, nodes=4, protocols="mixed", redfish_tls=True)
    result, checks = check(db, "--deadline", "10")
    assert result.exit_code == 0, result.stdout
    assert set(verdicts(checks).values()) == {"Success"}
    assert checks["bmc"]["details"][0].startswith("4 of 4 BMC(s) answered")


def test_a_default_lab_is_healthy_plain_http_on_loopback_noted(
    hwlab_lab: StartLab, tmp_path: Path
) -> None:
    # A default lab serves Redfish over plain HTTP on 127.0.0.1: nothing
    # crosses a network, so `status check` exits 0 and lab CI can rely on it.
    _lab, db = enrolled_lab(hwlab_lab, tmp_path, nodes=4, protocols="mixed")
    result, checks = check(db, "--deadline", "10")
    assert result.exit_code == 0, result.stdout
    assert set(verdicts(checks).values()) == {"Success"}
    assert "loopback" in checks["tls"]["details"][0]
    assert "node-002" in json.dumps(checks["tls"])


def _sweep_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("bmaas-node")]


def test_dead_bmcs_fail_reachability_and_the_check_keeps_its_deadline(
    hwlab_lab: StartLab, tmp_path: Path
) -> None:
    lab, db = enrolled_lab(hwlab_lab, tmp_path, nodes=6)
    dead = [f"node-{i:03d}" for i in range(2, 7)]
    for name in dead:
        lab.add_faults(name, [{"effect": "hang"}])
    # One worker, five BMCs that never answer, a 6 s deadline: each hang costs
    # a quarter of the 5.4 s budget, so the last one is never asked. (With 2 s,
    # 0.45 s a call, the healthy node-001's first answer at load 24 came late.)
    began = time.monotonic()
    result, checks = check(db, "--deadline", "6", "--workers", "1", "--only", "bmc,power")
    elapsed = time.monotonic() - began
    assert result.exit_code == 2
    # A bound the command promises (not a performance figure): the deadline,
    # plus what a loaded CI machine needs to print the report.
    assert elapsed < 6 + 1.0, elapsed
    bmc = checks["bmc"]
    assert bmc["result"] == "Failure"
    # a healthy node is never a Failure; if this starved client was late for
    # its answer it is a Warning that says so (bmaas.lateness), and so may be
    # a dead one the client was late for (the whole check printed on failure)
    late = bmc["nodes"].get("late", [])
    failing = sorted(n for key, names in bmc["nodes"].items() if key != "late" for n in names)
    assert set(failing) <= set(dead), bmc
    assert sorted(failing + late) in (dead, sorted([*dead, "node-001"])), bmc
    assert set(bmc["nodes"]) <= {"unreachable", "timeout", "not_asked", "late"}, bmc
    assert "not_asked" in bmc["nodes"], bmc
    assert checks["power"]["result"] == "Failure"
    # The calls still running when the check returned end on their own deadline.
    stop = time.monotonic() + 5
    while _sweep_threads() and time.monotonic() < stop:
        time.sleep(0.05)
    assert not _sweep_threads()


def test_rotated_credentials_fail_reachability(hwlab_lab: StartLab, tmp_path: Path) -> None:
    lab, db = enrolled_lab(hwlab_lab, tmp_path)
    lab.add_faults("node-002", [{"effect": "auth_fail"}])
    result, checks = check(db, "--deadline", "10")
    assert result.exit_code == 2
    assert checks["bmc"]["result"] == "Failure"
    assert checks["bmc"]["nodes"] == {"auth": ["node-002"]}
    assert checks["power"]["nodes"] == {"bmc_failed": ["node-002"]}
    assert verdicts(checks)["maintenance"] == "Success"


def test_a_missing_driver_fails_the_drivers_check(
    hwlab_lab: StartLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, db = enrolled_lab(hwlab_lab, tmp_path)
    # The ipmi entry point goes away (the package was uninstalled).
    installed = registry.entry_points
    monkeypatch.setattr(
        registry,
        "entry_points",
        lambda group: [ep for ep in installed(group=group) if ep.name != "ipmi"],
    )
    registry.load_driver.cache_clear()
    try:
        result, checks = check(db, "--deadline", "10")
    finally:
        registry.load_driver.cache_clear()
    assert result.exit_code == 2
    drivers = checks["drivers"]
    assert drivers["result"] == "Failure"
    assert drivers["details"][0].startswith("ipmi (3 node(s)): unknown driver 'ipmi'")
    assert checks["bmc"]["nodes"] == {"no_driver": ["node-001", "node-002", "node-003"]}


def test_an_old_schema_fails_the_database_check_naming_the_fix(
    hwlab_lab: StartLab, tmp_path: Path
) -> None:
    _, db = enrolled_lab(hwlab_lab, tmp_path)
    store = Store.open(str(db), check_schema=False)
    try:
        with store.engine.begin() as conn:
            config = Config()
            config.set_main_option("script_location", str(MIGRATIONS))
            config.attributes["connection"] = conn
            command.downgrade(config, "base")
    finally:
        store.close()
    result, checks = check(db, "--deadline", "10")
    assert result.exit_code == 2
    assert checks["database"]["result"] == "Failure"
    assert "run `bmaas db upgrade`" in checks["database"]["details"][0]
    assert checks["bmc"]["details"] == ["not checked: the database is not usable (see database)"]

    upgraded = bmaas(db, "db", "upgrade")
    assert upgraded.exit_code == 0, upgraded.stderr
    _, after = check(db, "--deadline", "10", "--only", "database")
    assert after["database"]["result"] == "Success"


def test_an_orphaned_allocation_warns_until_sync_reclaims_it(
    hwlab_lab: StartLab, tmp_path: Path
) -> None:
    _, db = enrolled_lab(hwlab_lab, tmp_path)
    store = Store.open(str(db))
    try:
        owner = store.owners.create(OwnerKind.ATTEMPT, name="r-9/1", ttl=30)
        store.owners.claim("node-001", owner.id)
    finally:
        store.close()

    def an_hour_later() -> float:
        return time.time() + 3600  # the holder died; its lease ran out long ago

    result, checks = check(db, "--deadline", "10", clock=an_hour_later)
    assert result.exit_code == 1
    allocations = checks["allocations"]
    assert allocations["result"] == "Warning"
    assert allocations["nodes"] == {"orphaned": ["node-001"]}
    assert "`bmaas sync`" in allocations["details"][0]
    assert verdicts(checks) == {**verdicts(checks), "bmc": "Success", "database": "Success"}

    synced = bmaas(db, "sync", "--deadline", "5", clock=an_hour_later)
    assert synced.exit_code == 0, synced.stdout + synced.stderr
    result, checks = check(db, "--deadline", "10", clock=an_hour_later)
    assert result.exit_code == 0, result.stdout


def test_busy_bmcs_are_a_warning_never_a_failure(hwlab_lab: StartLab, tmp_path: Path) -> None:
    """BMCs that only ever say "busy" work: the policy table's ``check``
    column makes busy a Warning in every check that asks them (bmc, power,
    boot), never a Failure (issue 23: power and boot failed on busy alone)."""
    lab, db = enrolled_lab(hwlab_lab, tmp_path, nodes=3)
    for name in ("node-001", "node-002", "node-003"):
        lab.add_faults(name, [{"effect": "busy", "retry_after": 0.1}])
    result, checks = check(db, "--deadline", "20", "--only", "bmc,power,boot")
    assert {n: c["result"] for n, c in checks.items()} == {
        "bmc": "Warning",
        "power": "Warning",
        "boot": "Warning",
    }, checks
    assert result.exit_code == 1
    assert set(checks["bmc"]["nodes"]) == {"busy"}


def test_a_flaky_lab_whose_bmcs_are_only_busy_passes(hwlab_lab: StartLab, tmp_path: Path) -> None:
    """The ``flaky`` profile's busy BMCs (busy now and then, Retry-After
    0.5 s) on every node: the check's reads retry a busy answer within their
    share of the deadline (by the policy table: busy is retried, never
    counted), so the check succeeds."""
    lab, db = enrolled_lab(hwlab_lab, tmp_path, nodes=4)
    (busy,) = [g.rules for g in PROFILES["flaky"].groups if g.rules[0].effect == "busy"]
    for i in range(1, 5):
        lab.add_faults(f"node-{i:03d}", list(busy))
    result, checks = check(db, "--deadline", "30", "--only", "bmc,power,boot")
    assert result.exit_code == 0, checks
