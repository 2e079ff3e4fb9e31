"""bmaas's reschedule in front of a real Ironic (drivers/ironic_backend).

One standalone Ironic and one hwlab lab for the module: dead-BMC and
brownout (power never comes on) nodes behind ``bmaas-ipmi``, healthy nodes
behind ``bmaas-ipmi`` and the stock ``ipmi``. Requests run concurrently
through :class:`bmaas.provision.Provisioner` with the Ironic backend, and the
test reads Ironic itself afterwards: every request that had a healthy
candidate is ``active``, no allocation is left without an instance, and every
node that failed is in maintenance with a reason naming the request and the
fault.

This Ironic keeps its database on PostgreSQL (the worker's test server, a
fresh database for the module), as operators run it: on SQLite the
concurrent allocations here were refused "database is locked" by Ironic's
own conductor and left ``allocating`` (marked ``pg`` too).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from bmaas.cli import cli as bmaas_cli
from bmaas.deadline import Deadline
from bmaas.drivers.ironic_backend import Api, IronicBackend
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.machine import Hardware
from bmaas.faults import ProvisionFailed
from bmaas.hwlab.harness import ironic as harness
from bmaas.hwlab.lab import Lab
from bmaas.hwlab.labspec import generate
from bmaas.provision import Provisioner, Request
from tests import pgserver

pytestmark = [
    pytest.mark.ironic,
    pytest.mark.pg,
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    # openstacksdk warns about its own deprecations on ordinary calls: not ours to fix
    pytest.mark.filterwarnings("ignore::openstack.warnings.OpenStackWarning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK50Warning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK60Warning"),
]

QUICK = Hardware(power_on_time=0.3, power_off_time=0.2, soft_off_time=0.5, os_boot_time=1.0)
DEAD = FaultRule.from_dict({"name": "dead", "effect": "hang"})
STUCK = FaultRule.from_dict(
    {"name": "power-stuck", "effect": "power_stuck", "operation": "power.set"}
)
#: lab node index -> (hardware type, fault put on it once it is available)
LAYOUT: dict[int, tuple[str, FaultRule | None]] = {
    0: ("bmaas-ipmi", DEAD),
    1: ("bmaas-ipmi", STUCK),
    2: ("bmaas-ipmi", DEAD),
    3: ("bmaas-ipmi", STUCK),
    4: ("bmaas-ipmi", None),
    5: ("bmaas-ipmi", None),
    6: ("ipmi", None),
    7: ("ipmi", None),
}


@dataclasses.dataclass
class Cloud:
    ironic: harness.IronicService
    lab: Lab
    conn: Any
    #: Ironic node name -> fault injected (None: healthy)
    faults: dict[str, str | None]

    def backend(self) -> IronicBackend:
        info = {
            "kernel": f"file://{self.ironic.kernel}",
            "ramdisk": f"file://{self.ironic.ramdisk}",
        }
        # a loaded CI runner (6 test workers, labs and this Ironic on 2 cores)
        # left an allocation "allocating" past the default 30 s twice
        # (2026-11-25): Ironic's own slowness, given the time here, not a
        # refusal of a healthy node
        return IronicBackend(Api(self.conn), instance_info=info, poll=0.5, allocation_timeout=90.0)


@pytest.fixture(scope="module")
def ironic_database(pg_server: str) -> Iterator[str]:
    """An empty PostgreSQL database for this module's Ironic."""
    with pgserver.fresh_database(pg_server) as url:
        yield url


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory, ironic_database: str) -> Iterator[Cloud]:
    spec = generate(len(LAYOUT), protocols="ipmi", seed=16, hardware=QUICK)
    workdir = tmp_path_factory.mktemp("ironic-backend")
    settings = harness.IronicSettings(
        # no power sync during the test: the deploy itself meets the dead BMC
        sync_interval=600,
        power_timeout=10,
        ipmi_min_command_interval=1,
        bmaas_call_deadline=1.0,
        bmaas_operation_deadline=6.0,
        # concurrent allocations: a database server, as operators run Ironic
        database_url=ironic_database,
        # Ironic 39 serves file:// images only from allowed paths
        extra={"conductor": {"file_url_allowed_paths": str(workdir / "ironic")}},
    )
    lab = Lab(spec, workdir / "lab")
    service = harness.IronicService(workdir / "ironic", settings)
    try:
        lab.start(timeout=120)
        service.start(timeout=180)
        conn = service.connect()
        entries = lab.inventory()["nodes"]
        faults: dict[str, str | None] = {}
        for index, (driver, rule) in LAYOUT.items():
            entry = entries[index]
            node = harness.enroll(
                conn,
                entry,
                driver=driver,
                name=f"{driver}-{entry['name']}",
                kernel=service.kernel,
                ramdisk=service.ramdisk,
            )
            if rule is not None:  # after provide: manage validates power
                lab.add_faults(entry["name"], [rule])
            faults[node.name] = rule.name if rule else None
        yield Cloud(service, lab, conn, faults)
    finally:
        service.stop()
        lab.stop()


def _allocations(conn: Any) -> list[Any]:
    return list(conn.baremetal.allocations())


def test_concurrent_requests_reschedule_through_ironic(cloud: Cloud) -> None:
    assert cloud.ironic.database_url.startswith("postgresql")  # not SQLite's file
    backend = cloud.backend()
    healthy = [n for n, f in cloud.faults.items() if f is None]
    dead = [n for n, f in cloud.faults.items() if f == "dead"]
    stuck = [n for n, f in cloud.faults.items() if f == "power-stuck"]
    requests = [Request(f"web-{i}", resource_class="baremetal", network="lab") for i in range(3)]
    with Provisioner(backend=backend, max_attempts=4, deadline_s=240.0) as provisioner:
        # one request that must walk past both kinds of broken node
        walker = provisioner.provision(
            Request("walker", resource_class="baremetal", network="lab"),
            candidates=[dead[0], stuck[0], healthy[0]],
        )
        results = provisioner.provision_many(requests, workers=3)

    assert walker.node == healthy[0]
    assert [a.node for a in walker.attempts] == [dead[0], stuck[0], healthy[0]]
    assert [a.fault_code for a in walker.attempts] == ["bmc_unreachable", "power_failure", None]
    assert walker.attempts[-1].succeeded
    failed = [r for r in results if isinstance(r, ProvisionFailed)]
    assert not failed, [(a.node, a.outcome, a.message) for f in failed for a in f.attempts]

    # Ironic's own view: one allocation per instance, owned by it, node active
    instances = {i.name: i for i in backend.instances()}
    assert set(instances) == {"walker", "web-0", "web-1", "web-2"}
    allocations = _allocations(cloud.conn)
    assert len(allocations) == 4
    assert all((a.extra or {}).get("bmaas_instance") for a in allocations)  # 0 without an instance
    for allocation in allocations:
        node = cloud.conn.baremetal.get_node(allocation.node_id)
        assert node.provision_state == "active"
        assert node.instance_id == allocation.id
        assert cloud.faults[node.name] is None
        ports = allocation.extra["bmaas_ports"]
        assert [p["created_by"] for p in ports] == ["bmaas"]  # made once, reused
    assert backend.ports.created == 4
    assert backend.ports.leaked == 0

    # every node that failed is out of service, with the request and the fault
    for node in cloud.conn.baremetal.nodes(details=True):
        tried_and_failed = any(
            node.name == a.node and a.failed for r in [walker, *results] for a in r.attempts
        )
        if tried_and_failed:
            assert node.is_maintenance, node.name
            assert node.maintenance_reason.startswith("bmaas: ")
            assert node.allocation_id is None
    reason = cloud.conn.baremetal.get_node(dead[0]).maintenance_reason
    assert "walker attempt 1: bmc_unreachable" in reason


def test_final_failure_leaves_nothing_allocated(cloud: Cloud) -> None:
    backend = cloud.backend()
    before = {a.id for a in _allocations(cloud.conn)}
    # the brownout nodes, back in service (an operator's mistake): still broken
    stuck = [n for n, f in cloud.faults.items() if f == "power-stuck"]
    for name in stuck:
        if cloud.conn.baremetal.get_node(name).is_maintenance:
            cloud.conn.baremetal.unset_node_maintenance(name)
    with (
        Provisioner(backend=backend, max_attempts=3, deadline_s=120.0) as provisioner,
        pytest.raises(ProvisionFailed) as failed,
    ):
        provisioner.provision(
            Request("doomed", resource_class="baremetal", network="lab", ports=("user-1",)),
            candidates=stuck,
        )
    # each stuck node tried and failed; a refusal's reason is in the message
    tried = [a for a in failed.value.attempts if not a.refused]
    assert len(tried) == len(stuck), [(a.node, a.outcome, a.message) for a in failed.value.attempts]
    assert {a.id for a in _allocations(cloud.conn)} == before  # nothing left allocated
    assert backend.ports.created == 1
    assert backend.ports.deleted == 1  # only what the request made; "user-1" kept
    assert backend.ports.leaked == 0


def test_undeploy_returns_the_node(cloud: Cloud) -> None:
    backend = cloud.backend()
    instance = next(i for i in backend.instances() if i.name == "web-0")
    released = backend.undeploy("web-0", deadline=Deadline.after(120))
    assert released == [instance.node]
    node = cloud.conn.baremetal.get_node(instance.node)
    assert node.provision_state == "available"
    assert node.allocation_id is None
    assert "web-0" not in {i.name for i in backend.instances()}


def _load_example() -> Any:
    path = Path(__file__).parents[2] / "docs" / "examples" / "provision_both.py"
    spec = importlib.util.spec_from_file_location("provision_both", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_example_and_cli_against_ironic(
    cloud: Cloud, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/examples/provision_both.py, unchanged, on Ironic (one healthy node is free)
    with Provisioner(backend=cloud.backend(), deadline_s=120.0) as provisioner:
        placed = _load_example().deploy_web(provisioner, count=1, prefix="example", network="lab")
    assert list(placed) == ["example-0"]

    # the CLI with --cloud, as an operator runs it (clouds.yaml, auth_type none)
    clouds = tmp_path / "clouds.yaml"
    info = {"kernel": f"file://{cloud.ironic.kernel}", "ramdisk": f"file://{cloud.ironic.ramdisk}"}
    entry = {"auth_type": "none", "auth": {"endpoint": cloud.ironic.url}}
    clouds.write_text(yaml.safe_dump({"clouds": {"lab": {**entry, "bmaas_instance_info": info}}}))
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(clouds))
    runner = CliRunner()

    listed = runner.invoke(bmaas_cli, ["instance", "list", "--cloud", "lab", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = {r["instance"]: r for r in json.loads(listed.output)}
    assert rows["example-0"]["node"] == placed["example-0"]
    assert rows["example-0"]["state"] == "active"

    gone = runner.invoke(bmaas_cli, ["undeploy", "--cloud", "lab", "example-0"])
    assert gone.exit_code == 0, gone.output
    assert f"example-0  ok    released {placed['example-0']}" in gone.output

    # move: the target (the node just freed) must be up before the source is given back
    source = rows["web-1"]["node"]
    moved = runner.invoke(bmaas_cli, ["move", "--cloud", "lab", "web-1", "--deadline", "120"])
    assert moved.exit_code == 0, moved.output
    assert f"web-1: moved {source} -> {placed['example-0']}" in moved.output
    assert cloud.conn.baremetal.get_node(source).provision_state == "available"

    deployed = runner.invoke(
        bmaas_cli,
        [
            "deploy",
            "--cloud",
            "lab",
            "-n",
            "1",
            "--name-prefix",
            "cli",
            "--resource-class",
            "baremetal",
            "--network",
            "lab",
            "--deadline",
            "120",
            "--json",
        ],
    )
    assert deployed.exit_code == 0, deployed.output
    summary = json.loads(deployed.output)
    assert summary["ok"] == 1
    assert summary["requests"][0]["node"] == source  # the node the move gave back

    # nothing free now: the same command fails the request, exit 1, nothing allocated
    before = {a.id for a in _allocations(cloud.conn)}
    full = runner.invoke(
        bmaas_cli,
        [
            "deploy",
            "--cloud",
            "lab",
            "-n",
            "1",
            "--name-prefix",
            "late",
            "--resource-class",
            "baremetal",
            "--json",
        ],
    )
    assert full.exit_code == 1, full.output
    assert {a.id for a in _allocations(cloud.conn)} == before

    checked = runner.invoke(bmaas_cli, ["status", "check", "--cloud", "lab", "--json"])
    report = json.loads(checked.output)
    by_name = {c["name"]: c for c in report["checks"]}
    assert by_name["ironic-api"]["result"] == "Success"
    assert by_name["ironic-allocations"]["result"] == "Success"  # 0 without an owner
    assert by_name["ironic-drivers"]["nodes"]["stock"]  # the stock ipmi nodes, named
    assert by_name["ironic-maintenance"]["nodes"]["bmaas"]  # the nodes bmaas fenced
    assert checked.exit_code == 1  # warnings: stock drivers, fenced nodes
