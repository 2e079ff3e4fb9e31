"""The policy table on real emulated BMCs (issue 14): fleet commands retry a
rack that is busy now and then, the sync fences only broken nodes, and a
deploy onto a node that is already on succeeds over IPMI and Redfish."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bmaas import inventory
from bmaas.cli import App, cli
from bmaas.deploy import DeploySettings
from bmaas.driver import PowerState
from bmaas.fakes.machine import Hardware
from bmaas.hwlab.lab import Lab
from bmaas.hwlab.labspec import generate
from bmaas.hwlab.worker import ShardServers
from bmaas.ops import driver_factory
from bmaas.provision import Provisioner, Request
from bmaas.registry import available_drivers
from bmaas.retry import RetryLimits
from bmaas.store import Store
from tests.lab.redfish_support import served_shard

pytestmark = pytest.mark.lab

QUICK = Hardware(
    power_on_time=0.3, power_off_time=0.2, soft_off_time=0.3, os_boot_time=0.6, reset_time=0.3
)
#: profile rules that may rightly put a node into maintenance
BROKEN = {"dead", "power-stuck", "power-lost", "boot-crash"}
#: sync passes on a flaky lab (the issue asks for 100; BMAAS_SYNC_PASSES to change)
SYNC_PASSES = int(os.environ.get("BMAAS_SYNC_PASSES", "100"))


def bmaas(db: Path, *args: str, expect: int | None = 0, retry: RetryLimits | None = None) -> Result:
    app = App(db=str(db), retry=retry or RetryLimits(total=20.0))
    result = CliRunner().invoke(cli, list(args), obj=app, catch_exceptions=False)
    if expect is not None:
        assert result.exit_code == expect, result.stdout + result.stderr
    return result


def fired(lab: Lab) -> dict[str, int]:
    """How often each named rule fired, over the whole lab."""
    counts: dict[str, int] = {}
    for node in lab.status()["nodes"].values():
        for rule, count in node["fired"].items():
            counts[rule] = counts.get(rule, 0) + count
    return counts


def all_ok(result: Result, nodes: int) -> None:
    lines = result.stdout.splitlines()
    assert len(lines) == nodes
    assert all(line.split()[1] == "ok" for line in lines), result.stdout


@pytest.mark.parametrize("seed", [3, 4])
def test_power_on_all_on_a_flaky_lab_exits_0(
    hwlab_lab: Callable[..., Lab], tmp_path: Path, seed: int
) -> None:
    """Issue 14: on ``flaky`` (busy now and then, lossy links, slow power)
    ``power on --all`` printed FAIL BMCBusy and exited 1 on every run."""
    lab = hwlab_lab(nodes=12, protocols="mixed", profile="flaky", seed=seed, hardware=QUICK)
    db = tmp_path / "b.db"
    bmaas(db, "enroll", str(lab.inventory_path))
    all_ok(bmaas(db, "power", "on", "--all", "--timeout", "30", "--bmc-timeout", "1"), 12)
    # Reads too. A node on a lossy link (``drops``: 10% of its requests lost)
    # may still time out after the retries; no node is ever left BUSY.
    lossy = {n.name for n in lab.spec.nodes if any(r.name == "drops" for r in n.rules)}
    for args in (("power", "status", "--all"), ("sync",)):
        result = bmaas(db, *args, "--bmc-timeout", "1", expect=None)
        words = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()}
        assert len(words) == 12
        assert {n for n, w in words.items() if w != "ok"} <= lossy, result.stdout
        assert "BUSY" not in words.values()
    assert fired(lab).get("busy", 0) > 0  # the rack really was busy now and then


BUSY_NOW_AND_THEN = """
description: every BMC healthy, and busy now and then
groups:
  - share: 1.0
    rules:
      - {name: busy, effect: busy, probability: 0.15, retry_after: 0.2}
"""


def test_every_fleet_command_on_a_busy_lab_exits_0(
    hwlab_lab: Callable[..., Lab], tmp_path: Path
) -> None:
    profile = tmp_path / "busy.yaml"
    profile.write_text(BUSY_NOW_AND_THEN)
    lab = hwlab_lab(nodes=8, protocols="mixed", profile=str(profile), seed=1, hardware=QUICK)
    db = tmp_path / "b.db"
    bmaas(db, "enroll", str(lab.inventory_path))
    redfish = [n.name for n in lab.spec.nodes if "redfish" in n.protocols]
    url = "http://127.0.0.1:9/deploy.iso"
    for args in (
        ("power", "on", "--all", "--timeout", "30"),
        ("boot-device", "set", "--all", "--device", "pxe"),
        ("vmedia", "insert", *redfish, "--url", url),
        ("vmedia", "eject", *redfish),
        ("power", "reboot", "--all", "--timeout", "30"),
        ("sync",),
    ):
        result = bmaas(db, *args, "--bmc-timeout", "1")
        all_ok(result, len(redfish) if args[0] == "vmedia" else 8)
    assert fired(lab)["busy"] > 8
    raw = bmaas(db, "power", "status", "--all", "--no-retry", expect=None)
    assert raw.exit_code in (0, 1)  # the raw first answers: busy ones show as BUSY
    assert all(line.split()[1] in ("ok", "BUSY") for line in raw.stdout.splitlines())


@pytest.mark.timeout(600)  # 100 passes of about 1-2 s each (busy BMCs say "1 s later")
def test_sync_on_a_flaky_lab_fences_only_broken_nodes(
    hwlab_lab: Callable[..., Lab], tmp_path: Path
) -> None:
    lab = hwlab_lab(nodes=12, protocols="mixed", profile="flaky,dead-bmc", seed=5, hardware=QUICK)
    rules = {n.name: {r.name for r in n.rules} for n in lab.spec.nodes}
    broken = {name for name, names in rules.items() if names & BROKEN}
    assert broken, rules  # the positive control: a dead BMC must be fenced
    assert any("busy" in names for names in rules.values())
    db = tmp_path / "b.db"
    bmaas(db, "enroll", str(lab.inventory_path))
    began = time.monotonic()
    # Short waits after a timeout keep a dead BMC from setting the pace.
    quick = RetryLimits(total=10.0, timeout_wait=0.05, unreachable_wait=0.05)
    result = bmaas(
        db,
        *("sync", "--interval", "0.05", "--count", str(SYNC_PASSES), "--bmc-timeout", "0.2"),
        retry=quick,
    )
    took = time.monotonic() - began
    assert result.stdout.count("pass ") == SYNC_PASSES
    listed = json.loads(bmaas(db, "node", "list", "--json").stdout)
    fenced = {n["name"] for n in listed if n["maintenance"]}
    print(f"{SYNC_PASSES} passes in {took:.1f}s; fenced {sorted(fenced)}; broken {sorted(broken)}")
    assert fenced <= broken, {n: rules[n] for n in fenced - broken}
    dead = {name for name, names in rules.items() if "dead" in names}
    assert dead <= fenced


# -- deploy onto a node that is already on ---------------------------------------------


@pytest.fixture
def shard(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[ShardServers, Path]]:
    protocol = request.param
    if protocol not in available_drivers():
        pytest.fail(f"the {protocol} driver is not installed")
    spec = generate(2, protocols=protocol, hardware=QUICK)
    with served_shard(spec.nodes, tmp_path) as served:
        yield served


@pytest.mark.parametrize("shard", ["ipmi", "redfish"], indirect=True)
def test_deploy_onto_a_node_that_is_already_on(
    shard: tuple[ShardServers, Path], tmp_path: Path
) -> None:
    servers, path = shard
    store = Store.open(str(tmp_path / "b.db"), create=True)
    try:
        inventory.enroll(store, inventory.load(path))
        name = sorted(servers.machines)[0]
        machine = servers.machines[name]
        machine.force_power(PowerState.ON)
        time.sleep(QUICK.os_boot_time)  # the old OS runs
        boots = machine.boots
        settings = DeploySettings(
            power_timeout=5, settle=0.6, boot_timeout=8, poll_interval=0.1, deadline_s=30,
            restart_grace=1.0,
        )  # fmt: skip
        with Provisioner(
            store,
            driver_factory=driver_factory(bmc_timeout=1.0),
            limits=RetryLimits(total=6.0),
            settings=settings,
            deadline_s=60.0,
            max_attempts=1,
        ) as p:
            done = p.provision(Request("on-already", network="lab"), candidates=[name])
        assert done.node == name
        assert [a.outcome for a in done.attempts] == ["succeeded"]
        assert machine.boots == boots + 1  # restarted exactly once
        assert machine.power_state() is PowerState.ON
        assert store.nodes.get(name).fault is None
    finally:
        store.close()
