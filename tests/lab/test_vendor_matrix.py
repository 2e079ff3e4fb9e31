"""The vendor matrix (issue 34): every hwlab shape x every operation, and a
whole ``bmaas deploy --image`` on every shape.

One lab (one worker's servers, in this process) serves ``NODES`` Redfish
BMCs of every shape in :mod:`bmaas.hwlab.redfish.shapes`; each shape's nodes
have the shape's name as resource class, so a deploy lands on that shape
only. The operations run on one node per shape, all shapes at once (a
thread each); the deploys run per shape with ``NODES`` workers. What must
hold: every operation works on every shape (the machine behind the BMC
shows it), the shape without a CD slot gets ``UnsupportedOperation``
naming its node (and so the shape), and no node is ever fenced or counted
for its vendor's shape.

``BMAAS_MATRIX_NODES`` (default 8) sets the nodes per shape.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from bmaas.cli import App, cli
from bmaas.deadline import Deadline
from bmaas.driver import BootDevice, BootSetting, PowerAction, PowerState, Quirk
from bmaas.drivers.redfish.service import ServiceRegistry
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.faults import BMCBusy, BMCInternalError, UnsupportedOperation
from bmaas.hwlab.labspec import NodeSpec
from bmaas.hwlab.proxy import ProxyHost, ProxySpec
from bmaas.hwlab.redfish.shapes import SHAPES, names
from bmaas.hwlab.worker import ShardServers
from bmaas.policy import policy_for
from bmaas.registry import build_driver
from bmaas.retry import RetryLimits
from bmaas.secrets import Secret
from bmaas.store import Store
from tests.lab.redfish_support import served_shard

pytestmark = pytest.mark.lab

NODES = int(os.environ.get("BMAAS_MATRIX_NODES", "8"))
QUICK = Hardware(
    power_on_time=0.2, power_off_time=0.1, soft_off_time=0.2, os_boot_time=0.3, reset_time=0.1
)
#: an https URL: OpenBMC's slot lists CIFS and HTTPS only (the driver checks)
IMAGE = "https://images.example/deploy.iso"
#: one driver call's budget, and how long a state may take to show
CALL = 10.0
#: the shapes run here: every one but ``no-override`` (no boot override, no soft
#: power: its operations are refusals by design, checked on the recorded tree
#: in tests/lab/test_redfish_vendor_gaps.py and by ``hwlab matrix``)
SHAPE_NAMES = tuple(n for n in names() if n != "no-override")
#: shapes with a CD slot, and without one
WITH_CD = [n for n in SHAPE_NAMES if n == "hwlab" or SHAPES[n].has_cd]
WITHOUT_CD = [n for n in SHAPE_NAMES if n not in WITH_CD]
PASSWORD = "matrix-password"


def call() -> Deadline:
    return Deadline.after(CALL)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ShardServers, Path]]:
    tmp = tmp_path_factory.mktemp("matrix")
    nodes = tuple(
        NodeSpec(
            name=f"{shape}-{i:02d}",
            protocols=("redfish",),
            hardware=QUICK,
            password=Secret(PASSWORD),
            # every node with a CD slot in one deploy; the shapes without apart
            resource_class="cd" if shape in WITH_CD else "no-cd",
            shape=shape,
        )
        for shape in SHAPE_NAMES
        for i in range(1, NODES + 1)
    )
    with served_shard(nodes, tmp) as served:
        yield served


def _url(servers: ShardServers, node: str) -> str:
    return f"http://127.0.0.1:{servers.endpoints[node]['redfish']}"


@contextlib.contextmanager
def driver(address: str, node: str, **info: Any) -> Iterator[Any]:
    built: Any = build_driver(
        node,
        "redfish",
        {
            "redfish_address": address,
            "redfish_username": "admin",
            "redfish_password": PASSWORD,
            **info,
        },
        bmc_timeout=CALL,
    )
    built.services = ServiceRegistry()  # this test's own
    built.vmedia_poll_interval = 0.02
    try:
        yield built
    finally:
        built.close()


def until(check: Callable[[], bool], what: str) -> None:
    """Wait (bounded) until the machine shows ``check``."""
    deadline = Deadline.after(CALL)
    while not check():
        if deadline.expired:
            raise AssertionError(f"not reached in {CALL} s: {what}")
        time.sleep(0.02)


def not_the_nodes(fault: BaseException) -> None:
    row = policy_for(type(fault))
    assert not row.counts_for_health, fault
    assert not row.fences, fault


def _held(shape: str) -> str | None:
    """The image another tool left in one of ``shape``'s CD slots, if any."""
    if shape == "hwlab":
        return None
    return next((s.held for s in SHAPES[shape].slots if s.held and s.is_cd), None)


def operations(shape: str, machine: FakeMachine, address: str) -> dict[str, str]:
    """Every operation on one node of ``shape``; what each showed."""
    node = machine.name
    seen: dict[str, str] = {}
    with driver(address, node) as d:
        d.set_power_state(PowerAction.ON, deadline=call())
        until(lambda: machine.power_state() is PowerState.ON, "on")
        assert d.get_power_state(deadline=call()) is PowerState.ON
        seen["power on"] = "ok"
        boots = machine.boots
        d.set_power_state(PowerAction.REBOOT, deadline=call())
        until(lambda: machine.boots > boots, "rebooted")
        seen["power reboot"] = "ok"
        until(lambda: machine.power_state() is PowerState.ON, "on after the reboot")
        d.set_power_state(PowerAction.SOFT_OFF, deadline=call())
        until(lambda: machine.power_state() is PowerState.OFF, "soft off")
        seen["power soft off"] = "ok"
        d.set_power_state(PowerAction.ON, deadline=call())
        until(lambda: machine.power_state() is PowerState.ON, "on again")
        d.set_power_state(PowerAction.OFF, deadline=call())
        until(lambda: machine.power_state() is PowerState.OFF, "off")
        assert d.get_power_state(deadline=call()) is PowerState.OFF
        seen["power off"] = "ok"

        # boot once: set, booted from once, then the firmware consumed it
        d.set_boot_device(BootDevice.PXE, persistent=False, deadline=call())
        assert machine.boot_device() == BootSetting(BootDevice.PXE, persistent=False)
        boots = machine.boots
        d.set_power_state(PowerAction.ON, deadline=call())
        until(lambda: machine.boots > boots, "booted")
        assert machine.last_boot_device is BootDevice.PXE
        after = d.get_boot_device(deadline=call())
        assert after == BootSetting(BootDevice.DISK, persistent=True), (shape, after)
        seen["boot once"] = "ok"

        # persistent: Continuous where allowed, else Once before every boot
        d.set_boot_device(BootDevice.PXE, persistent=True, deadline=call())
        kept = machine.boot_device()
        if Quirk.BOOT_NO_CONTINUOUS in d.quirks:
            assert kept == BootSetting(BootDevice.PXE, persistent=False)
            seen["boot persistent"] = "once before every boot"
        else:
            assert kept == BootSetting(BootDevice.PXE, persistent=True)
            assert d.get_boot_device(deadline=call()) == kept
            seen["boot persistent"] = "ok"
        d.set_boot_device(BootDevice.DISK, persistent=True, deadline=call())
        d.set_power_state(PowerAction.OFF, deadline=call())
        until(lambda: machine.power_state() is PowerState.OFF, "off at the end")

        if shape in WITHOUT_CD:
            with pytest.raises(UnsupportedOperation, match="no CD/DVD slot") as refused:
                d.insert_virtual_media(IMAGE, deadline=call())
            not_the_nodes(refused.value)
            assert node in str(refused.value)
            seen["vmedia"] = "UnsupportedOperation"
        else:
            d.insert_virtual_media(IMAGE, deadline=call())
            assert machine.media == IMAGE
            d.eject_virtual_media(deadline=call())
            # what another tool put in a CD slot stays there (dmtf-held's CD2)
            assert machine.media == _held(shape), (shape, machine.media)
            seen["vmedia"] = "ok"

    for mode in ("bios", "uefi"):
        with driver(address, node, boot_mode=mode) as d:
            d.set_boot_device(BootDevice.DISK, persistent=True, deadline=call())
            assert d.get_boot_mode(deadline=call()) == mode, (shape, mode)
    seen["boot mode"] = "ok"
    return seen


def test_every_operation_on_every_shape(lab: tuple[ShardServers, Path]) -> None:
    servers, _ = lab
    with concurrent.futures.ThreadPoolExecutor(len(SHAPE_NAMES)) as pool:
        futures = {
            shape: pool.submit(
                operations,
                shape,
                servers.machines[f"{shape}-01"],
                _url(servers, f"{shape}-01"),
            )
            for shape in SHAPE_NAMES
        }
        results = {shape: future.result() for shape, future in futures.items()}
    for shape, seen in results.items():
        assert seen["vmedia"] == ("ok" if shape in WITH_CD else "UnsupportedOperation"), seen
        expected = {"power on", "power off", "power reboot", "power soft off", "boot once"}
        assert {k for k, v in seen.items() if v == "ok"} >= expected, (shape, seen)
    assert results["xcc"]["boot persistent"] == "once before every boot"


def bmaas(db: Path, *args: str) -> Any:
    app = App(db=str(db), retry=RetryLimits(total=30.0))
    return CliRunner().invoke(cli, list(args), obj=app, catch_exceptions=False)


# A hang guard, not a timing: 96 deploys at once took 148 s on 2 cores at
# load 46-48 and ran past the suite's 120 s at load 28 (docs/development.md).
@pytest.mark.timeout(360)
def test_deploy_with_an_image_on_every_shape(
    lab: tuple[ShardServers, Path], tmp_path: Path
) -> None:
    """``bmaas deploy --image`` on every node of every shape at once: all
    active, by virtual media, where the shape has a CD slot;
    ``UnsupportedOperation`` naming the node (and so its shape) where it has
    none; no node fenced or counted either way."""
    servers, inventory = lab
    db = tmp_path / "matrix.db"
    enrolled = bmaas(db, "enroll", str(inventory))
    assert enrolled.exit_code == 0, enrolled.output
    reports = {}
    for kind, shapes in (("cd", WITH_CD), ("no-cd", WITHOUT_CD)):
        count = NODES * len(shapes)
        # Without a slot every node refuses: one attempt each, so each request
        # ends on its own node's UnsupportedOperation. With more, a request
        # could find every other slotless node held by the others and end
        # NoCandidates ("5 allocated"), as one did in CI's floor step.
        attempts = "3" if kind == "cd" else "1"
        deployed = bmaas(
            db,
            "deploy",
            "--count", str(count),
            "--max-attempts", attempts,
            "--workers", str(count),
            "--resource-class", kind,
            "--image", IMAGE,
            "--name-prefix", f"m-{kind}",
            "--settle", "0.2",
            "--power-timeout", "10",
            "--json",
        )  # fmt: skip
        reports[kind] = yaml.safe_load(deployed.stdout)
    cd = reports["cd"]
    failed = [r for r in cd["requests"] if not r["ok"]]
    assert cd["ok"] == NODES * len(WITH_CD), failed
    assert {r["boot"] for r in cd["requests"]} == {"vmedia"}, cd
    landed = sorted(r["node"] for r in cd["requests"])
    assert landed == sorted(f"{s}-{n:02d}" for s in WITH_CD for n in range(1, NODES + 1))
    # ejected: bmaas's image; another tool's (dmtf-held's CD2) stays
    left = [m for n, m in servers.machines.items() if m.media != _held(n.rsplit("-", 1)[0])]
    assert left == []
    refused = reports["no-cd"]
    assert refused["ok"] == 0, refused
    for row in refused["requests"]:
        assert set(row["faults"]) == {"unsupported_operation"}, row
        assert "no CD/DVD slot" in row["error"], row
        assert any(f"{shape}-" in row["error"] for shape in WITHOUT_CD), row
    store = Store.open(str(db))
    try:
        fenced = [
            (n.name, n.fault)
            for n in store.nodes.find()
            if n.maintenance or n.fault or n.fault_count
        ]
    finally:
        store.close()
    assert fenced == []


@pytest.mark.parametrize("shape", SHAPE_NAMES)
def test_fault_effects_and_the_proxy_on_every_shape(
    shape: str, lab: tuple[ShardServers, Path], tmp_path: Path
) -> None:
    """A rule on ``power.set`` and one on ``vmedia.insert`` fire on the
    shape's emulated BMC and, in front of another node, at the fault proxy:
    operations are named by request on every shape's paths."""
    servers, _ = lab
    rules: list[dict[str, Any]] = [
        {"name": "busy-power", "effect": "busy", "operation": "power.set", "nth": [1]},
        {
            "name": "vmedia-500",
            "effect": "internal_error",
            "operation": "vmedia.insert",
            "nth": [1],
        },
    ]
    node = f"{shape}-02"
    servers.add_rules(node, rules)
    try:
        _two_faults(shape, _url(servers, node), node, servers.machines[node])
    finally:
        servers.clear_rules(node)
    upstream = f"{shape}-03"
    spec = ProxySpec(upstream, "redfish", "127.0.0.1", servers.endpoints[upstream]["redfish"])
    host = ProxyHost([spec], events_path=tmp_path / "events.jsonl", tls_dir=tmp_path / "tls")
    host.start()
    try:
        host.add_faults(upstream, rules)
        proxy: Any = host.proxies[upstream]
        _two_faults(shape, proxy.url, upstream, servers.machines[upstream])
    finally:
        host.stop()


def _two_faults(shape: str, address: str, node: str, machine: FakeMachine) -> None:
    machine.force_power(PowerState.OFF)  # so that "on" is sent, not found done
    with driver(address, node) as d:
        with pytest.raises(BMCBusy):
            d.set_power_state(PowerAction.ON, deadline=call())
        d.set_power_state(PowerAction.ON, deadline=call())  # the rule fired once
        if shape in WITH_CD:
            with pytest.raises(BMCInternalError):
                d.insert_virtual_media(IMAGE, deadline=call())
            d.insert_virtual_media(IMAGE, deadline=call())
            d.eject_virtual_media(deadline=call())
        d.set_power_state(PowerAction.OFF, deadline=call())
