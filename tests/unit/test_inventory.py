"""Inventory files: every problem named by file, line and field; atomic,
idempotent enrollment; passwords inline, from the environment, from a file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bmaas import credentials, inventory
from bmaas.faults import InputError
from bmaas.inventory import InventoryError
from bmaas.ops import driver_factory
from bmaas.store import Store
from bmaas.store.schema import metadata
from tests.fleet import PASSWORD, StubIpmiDriver, ipmi_node, write_inventory

pytestmark = pytest.mark.usefixtures("stub_drivers")

GOOD = """\
networks:
  - name: prov
    segments:
      - name: rack1
        cidr: 10.1.0.0/24
        gateway_ip: 10.1.0.1
        allocation_pools: [{start: 10.1.0.10, end: 10.1.0.50}]
      - name: rack2
        cidr: 10.2.0.0/29
nodes:
  - name: r1-n01
    driver: ipmi
    driver_info:
      ipmi_address: 10.0.0.11
      ipmi_username: admin
      ipmi_password: inline-pw
    resource_class: baremetal.small
    properties: {cpus: 16, memory_mb: 65536, local_gb: 480, cpu_arch: x86_64}
    network_segment: rack1
  - name: r1-n02
    driver: fake
    network_segment: rack2
"""


def problems_of(path: Path, **kw: object) -> list[tuple[int | None, str | None, str | None, str]]:
    with pytest.raises(InventoryError) as info:
        inventory.load(path, **kw)  # type: ignore[arg-type]
    return [(p.line, p.node, p.field, p.message) for p in info.value.problems]


def test_a_good_file_parses_in_ironic_and_neutron_terms(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(GOOD)
    inv = inventory.load(path)
    assert [n.name for n in inv.nodes] == ["r1-n01", "r1-n02"]
    n1 = inv.nodes[0]
    assert (n1.driver, n1.resource_class, n1.network_segment) == (
        "ipmi",
        "baremetal.small",
        "rack1",
    )
    assert n1.properties == {"cpus": 16, "memory_mb": 65536, "local_gb": 480, "cpu_arch": "x86_64"}
    assert n1.line == 11
    rack1, rack2 = inv.networks[0].segments
    assert rack1.allocation_pools == [{"start": "10.1.0.10", "end": "10.1.0.50"}]
    assert rack1.gateway_ip == "10.1.0.1"
    # No pools given: the whole subnet, as Neutron does.
    assert rack2.allocation_pools == [{"start": "10.2.0.1", "end": "10.2.0.6"}]


@pytest.mark.parametrize(
    ("snippet", "line", "field", "needle"),
    [
        ("  - name: x1\n    driver: ipmx\n", 2, "driver", "unknown driver 'ipmx'"),
        (
            "  - name: x1\n    driver: ipmi\n    driver_info:\n      ipmi_username: a\n"
            "      ipmi_password: b\n",
            3,
            "driver_info.ipmi_address",
            "is required",
        ),
        (
            "  - name: x1\n    driver: ipmi\n    driver_info:\n      ipmi_address: h\n"
            "      ipmi_username: a\n      ipmi_password: b\n      ipmi_port: 70000\n",
            7,
            "driver_info.ipmi_port",
            "from 1 to 65535",
        ),
        (
            "  - name: x1\n    driver: ipmi\n    driver_info:\n      ipmi_address: h\n"
            "      ipmi_username: a\n      ipmi_password: b\n      ipmi_adress: h\n",
            7,
            "driver_info.ipmi_adress",
            "did you mean 'ipmi_address'",
        ),
        ("  - name: x1\n    driver: fake\n    colour: red\n", 3, "colour", "unknown key"),
        (
            "  - name: x1\n    driver: fake\n    properties: {cpus: 0}\n",
            3,
            "properties.cpus",
            ">= 1",
        ),
        ("  - name: 'bad name'\n    driver: fake\n", 1, "name", "letters, digits"),
        ("  - driver: fake\n", 1, "nodes[0].name", "is required"),
        (
            "  - name: x1\n    driver: fake\n    network_segment: nowhere\n",
            3,
            "network_segment",
            "unknown segment 'nowhere'",
        ),
    ],
)
def test_each_problem_names_file_line_and_field(
    tmp_path: Path, snippet: str, line: int, field: str, needle: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("nodes:\n" + snippet)
    with pytest.raises(InventoryError) as info:
        inventory.load(path, known_segments=[])
    problem = info.value.problems[0]
    assert problem.source == str(path)
    assert problem.line == line + 1  # +1 for the "nodes:" line
    assert problem.field == field
    assert needle in problem.message
    text = str(problem)
    assert text.startswith(f"{path}:{line + 1}: ")
    assert field in text


def test_every_problem_is_reported_not_just_the_first(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "nodes:\n"
        "  - name: a\n    driver: fake\n"
        "  - name: a\n    driver: fake\n"  # duplicate
        "  - name: b\n    driver: nope\n"
        "  - name: c\n    driver: fake\n    properties: {memory_mb: lots}\n"
    )
    found = problems_of(path)
    assert [(line, node, field) for line, node, field, _ in found] == [
        (4, "a", "name"),
        (7, "b", "driver"),
        (10, "c", "properties.memory_mb"),
    ]
    assert "first at line 2" in found[0][3]


def test_network_problems_are_located_too(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "networks:\n"
        "  - name: prov\n"
        "    segments:\n"
        "      - name: s1\n"
        "        cidr: 10.0.0.0/33\n"
        "      - name: s2\n"
        "        cidr: 10.0.1.0/24\n"
        "        allocation_pools: [{start: 10.0.1.50, end: 10.0.1.10}]\n"
        "      - name: s3\n"
        "        cidr: 10.0.2.0/24\n"
        "        gateway_ip: 10.9.9.9\n"
        "nodes: []\n"
    )
    found = problems_of(path)
    assert [(line, field) for line, _, field, _ in found] == [
        (5, "networks[0].segments[0].cidr"),
        (8, "networks[0].segments[1].allocation_pools[0]"),
        (11, "networks[0].segments[2].gateway_ip"),
    ]


def test_yaml_syntax_errors_and_json_files_are_located(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("nodes:\n  - name: a\n   driver: [\n")
    with pytest.raises(InputError) as info:
        inventory.load(broken)
    assert info.value.source == str(broken)
    assert info.value.line is not None

    as_json = tmp_path / "inv.json"
    as_json.write_text(json.dumps({"nodes": [{"name": "j1", "driver": "fake", "x": 1}]}, indent=2))
    [(line, node, field, _)] = problems_of(as_json)
    assert (line, node, field) == (6, "j1", "x")


def test_enrollment_is_atomic_one_bad_node_enrolls_nothing(tmp_path: Path, store: Store) -> None:
    path = write_inventory(
        tmp_path / "inv.yaml",
        [{"name": f"n{i}", "driver": "fake"} for i in range(5)]
        + [{"name": "bad", "driver": "fake", "network_segment": "missing"}],
    )
    inv = inventory.load(path)  # parses: segments are checked against the store
    with pytest.raises(InventoryError, match="unknown segment 'missing'"):
        inventory.enroll(store, inv)
    assert store.nodes.find() == []


def test_enrollment_is_one_transaction_even_when_the_store_refuses(
    tmp_path: Path, store: Store
) -> None:
    # The store refuses a segment that already belongs to another network;
    # nodes written before that point in the same transaction must vanish.
    store.nodes.enroll(
        [], [inventory.NetworkSpec("a", [inventory.SegmentSpec("s", "10.0.0.0/24", None, [])])]
    )
    inv = inventory.parse(
        {
            "networks": [{"name": "b", "segments": [{"name": "s", "cidr": "10.0.0.0/24"}]}],
            "nodes": [{"name": "n1", "driver": "fake"}],
        }
    )
    with pytest.raises(InputError, match="another network"):
        inventory.enroll(store, inv)
    assert store.nodes.find() == []


def test_re_enrolling_updates_in_place_and_keeps_state(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(GOOD)
    first = inventory.enroll(store, inventory.load(path))
    assert first.created == ["r1-n01", "r1-n02"]
    store.nodes.set_maintenance("r1-n01", reason="fan", by="alice")
    path.write_text(GOOD.replace("baremetal.small", "baremetal.large"))
    second = inventory.enroll(store, inventory.load(path))
    assert (second.created, second.updated, second.unchanged) == ([], ["r1-n01"], ["r1-n02"])
    node = store.nodes.get("r1-n01")
    assert node.resource_class == "baremetal.large"
    assert node.maintenance  # state kept
    assert node.maintenance_by == "alice"
    kinds = [e.kind for e in store.nodes.events("r1-n01")]
    assert kinds == ["enrolled", "maintenance_set", "updated"]
    # A file that leaves a node out does not delete it: it reports it.
    write_inventory(path, [{"name": "r1-n02", "driver": "fake", "network_segment": "rack2"}])
    third = inventory.enroll(store, inventory.load(path))
    assert third.not_in_file == ["r1-n01"]
    assert len(store.nodes.find()) == 2


def test_password_from_env_is_stored_as_a_reference_and_resolved_at_use(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BMC_PW_TEST", PASSWORD)
    path = write_inventory(tmp_path / "inv.yaml", [ipmi_node("e1", password="${BMC_PW_TEST}")])
    inventory.enroll(store, inventory.load(path))
    record = store.nodes.get("e1")
    assert record.driver_info["ipmi_password"] == "${BMC_PW_TEST}"
    with store.engine.connect() as conn:  # nowhere in the database: nodes, events, ...
        dump = [conn.execute(table.select()).all() for table in metadata.sorted_tables]
    assert PASSWORD not in repr(dump)
    driver = driver_factory()(record)
    assert isinstance(driver, StubIpmiDriver)
    assert driver.info.ipmi_password.reveal() == PASSWORD
    # Rotated in the environment: the next driver uses the new one, no re-enroll.
    monkeypatch.setenv("BMC_PW_TEST", "rotated")
    assert driver_factory()(record).info.ipmi_password.reveal() == "rotated"
    monkeypatch.delenv("BMC_PW_TEST")
    with pytest.raises(InputError, match="BMC_PW_TEST is not set") as info:
        driver_factory()(record)
    assert info.value.node == "e1"
    assert info.value.field == "driver_info.ipmi_password"


def test_unset_env_variable_fails_enrollment_with_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOPE_NOT_SET", raising=False)
    path = write_inventory(tmp_path / "inv.yaml", [ipmi_node("e1", password="${NOPE_NOT_SET}")])
    [(line, node, field, message)] = problems_of(path)
    assert (line, node, field) == (8, "e1", "driver_info.ipmi_password")
    assert "NOPE_NOT_SET is not set" in message


def test_password_from_a_file_relative_to_the_inventory(tmp_path: Path, store: Store) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "r1.pass").write_text(PASSWORD + "\n")
    path = write_inventory(
        tmp_path / "inv.yaml", [ipmi_node("f1", password="file:secrets/r1.pass")]
    )
    inventory.enroll(store, inventory.load(path))
    stored = store.nodes.get("f1").driver_info["ipmi_password"]
    assert stored == f"file:{secrets / 'r1.pass'}"
    assert driver_factory()(store.nodes.get("f1")).info.ipmi_password.reveal() == PASSWORD
    assert credentials.sources(store.nodes.get("f1").driver_info) == {
        "ipmi": f"file {secrets / 'r1.pass'}"
    }


def test_missing_or_empty_password_file_is_located(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("\n")
    path = write_inventory(
        tmp_path / "inv.yaml",
        [ipmi_node("f1", password="file:nothere"), ipmi_node("f2", password="file:empty")],
    )
    found = problems_of(path)
    assert [(node, field) for _, node, field, _ in found] == [
        ("f1", "driver_info.ipmi_password"),
        ("f2", "driver_info.ipmi_password"),
    ]
    assert "cannot read password file" in found[0][3]
    assert "is empty" in found[1][3]


def test_no_problem_message_carries_an_inline_password(tmp_path: Path) -> None:
    node = ipmi_node("p1")
    node["driver_info"]["ipmi_port"] = "not-a-port"
    node["driver_info"]["ipmi_bogus"] = 1
    path = write_inventory(tmp_path / "inv.yaml", [node])
    with pytest.raises(InventoryError) as info:
        inventory.load(path)
    assert PASSWORD not in str(info.value)
    assert all(PASSWORD not in str(p) for p in info.value.problems)
