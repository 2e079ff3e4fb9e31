"""Lab files, generated labs and profiles: validation and determinism."""

from __future__ import annotations

from pathlib import Path

import pytest

from bmaas.driver import PowerState
from bmaas.fakes.faults import Effect
from bmaas.faults import InputError
from bmaas.hwlab import profiles
from bmaas.hwlab.cli import parse_rule_arg
from bmaas.hwlab.cli.lab import parse_rule_args
from bmaas.hwlab.labspec import LabFileError, generate, load_labfile

GOOD = """\
seed: 42
profile: flaky
defaults:
  protocols: [ipmi]
  credentials: {username: root, password: calvin}
  hardware: {vendor: Dell Inc., model: PowerEdge R650, cpus: 32, power_on_time: 0.5}
  network_segment: rack1
nodes:
  - name: r1-n01
    protocols: both
    power: on
    faults:
      - {effect: busy, operation: "power.*", probability: 0.2}
  - name: "r1-n{n:02d}"
    count: 3
    start: 2
    protocols: [redfish]
"""


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "lab.yaml"
    path.write_text(text)
    return str(path)


def test_good_labfile_expands_groups_and_defaults(tmp_path: Path) -> None:
    spec = load_labfile(_write(tmp_path, GOOD))
    assert [n.name for n in spec.nodes] == ["r1-n01", "r1-n02", "r1-n03", "r1-n04"]
    first, second = spec.nodes[0], spec.nodes[1]
    assert first.protocols == ("ipmi", "redfish")
    assert second.protocols == ("redfish",)
    assert first.power is PowerState.ON
    assert first.username == "root"
    assert first.password.reveal() == "calvin"
    assert "calvin" not in repr(first)
    assert first.hardware.cpus == 32
    assert first.hardware.power_on_time == 0.5
    assert first.rules[0].effect is Effect.BUSY
    assert second.rules == ()
    assert spec.seed == 42
    assert spec.profile == "flaky"


@pytest.mark.parametrize(
    ("text", "line", "field", "needle"),
    [
        ("nodes:\n  - name: a\n    protocol: ipmi\n", 3, "nodes[0].protocol", "unknown key"),
        ("nodes:\n  - name: a\n    protocols: [snmp]\n", 3, "nodes[0].protocols", "ipmi"),
        (
            "nodes:\n  - name: a\n    hardware: {cpus: many}\n",
            3,
            "nodes[0].hardware.cpus",
            "whole number",
        ),
        (
            "nodes:\n  - name: a\n    hardware: {gpus: 2}\n",
            3,
            "nodes[0].hardware.gpus",
            "unknown hardware",
        ),
        ("nodes:\n  - name: a\n  - name: a\n", None, "nodes", "duplicate node name 'a'"),
        ("nodes:\n  - name: a\n    count: 3\n", 2, "nodes[0].name", "pattern"),
        (
            "nodes:\n  - {name: a, faults: [{effect: zap}]}\n",
            2,
            "nodes[0].faults[0].effect",
            "unknown effect",
        ),
        ("nodes: []\n", 1, "nodes", "non-empty"),
        ("seed: [1]\nnodes:\n  - name: a\n", 1, "seed", "integer"),
        ("nodes:\n  - name: a\n    power: maybe\n", 3, "nodes[0].power", "on or off"),
        (
            "nodes:\n  - name: a\n    credentials: {user: x}\n",
            3,
            "nodes[0].credentials.user",
            "password, username",
        ),
    ],
)
def test_bad_labfiles_name_file_line_and_field(
    tmp_path: Path, text: str, line: int | None, field: str, needle: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_labfile(path)
    err = info.value
    assert err.source == path
    assert err.field == field
    if line is not None:
        assert err.line == line
    assert needle in str(err)


def test_missing_and_broken_files_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_labfile(str(tmp_path / "nope.yaml"))
    with pytest.raises(InputError, match="not valid YAML"):
        load_labfile(_write(tmp_path, "nodes: [\n"))


def test_generate_mixed_alternates_protocols() -> None:
    spec = generate(5, protocols="mixed", seed=3)
    assert [n.protocols for n in spec.nodes] == [("ipmi",), ("redfish",)] * 2 + [("ipmi",)]
    assert spec.nodes[0].name == "node-001"
    assert generate(2, protocols="both").nodes[0].protocols == ("ipmi", "redfish")
    with pytest.raises(InputError):
        generate(0)
    with pytest.raises(InputError):
        generate(3, protocols="snmp")


def test_every_builtin_profile_has_a_one_line_description() -> None:
    names = set(profiles.PROFILES)
    assert names == {
        "healthy",
        "flaky",
        "dead-bmc",
        "auth-rotation",
        "brownout",
        "reboot-storm",
        "chaos",
        # vendor profiles: field incidents (bmaas.fakes.incidents)
        "idrac9",
        "idrac10",
        "ilo5",
        "supermicro",
        "openbmc",
    }
    for p in profiles.PROFILES.values():
        assert p.description
        assert "\n" not in p.description


def test_profile_assignment_is_seeded_and_picks_at_least_one_node() -> None:
    nodes = [f"n{i}" for i in range(20)]
    flaky = profiles.resolve("flaky")
    a = profiles.assign(flaky, nodes, seed=1)
    assert a == profiles.assign(flaky, nodes, seed=1)
    assert a != profiles.assign(flaky, nodes, seed=2)
    assert sum(1 for rules in a.values() if any(r.effect is Effect.BUSY for r in rules)) == 6
    dead = profiles.assign(profiles.resolve("dead-bmc"), ["a", "b", "c"], seed=0)
    assert sum(1 for rules in dead.values() if rules) == 1


def test_profiles_combine_and_load_from_files(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("description: x\ngroups:\n  - share: 1\n    rules: [{effect: busy}]\n")
    found = profiles.resolve(f"dead-bmc,{path}")
    assert [p.name for p in found] == ["dead-bmc", "mine.yaml"]
    with pytest.raises(InputError, match="unknown profile 'nope'"):
        profiles.resolve("nope")
    path.write_text("groups:\n  - share: 2\n")
    with pytest.raises(InputError) as info:
        profiles.resolve(str(path))
    assert info.value.field == "groups[0].share"


def test_rule_arguments_on_the_command_line() -> None:
    assert parse_rule_arg("effect=busy,operation=power.*,probability=0.5,retry_after=2") == {
        "effect": "busy",
        "operation": "power.*",
        "probability": 0.5,
        "retry_after": 2,
    }
    assert parse_rule_arg("{effect: hang, nth: [1, 2]}") == {"effect": "hang", "nth": [1, 2]}
    with pytest.raises(InputError):
        parse_rule_arg("effect")
    with pytest.raises(InputError):
        parse_rule_arg("{effect: [")


def test_the_effect_is_positional_and_key_value_rules_still_work() -> None:
    assert parse_rule_args(["hang"]) == [{"effect": "hang"}]
    assert parse_rule_args(["busy", "operation=power.*", "probability=0.5,retry_after=2"]) == [
        {"effect": "busy", "operation": "power.*", "probability": 0.5, "retry_after": 2}
    ]
    assert parse_rule_args(["effect=hang", "{effect: busy}"]) == [
        {"effect": "hang"},
        {"effect": "busy"},
    ]
    with pytest.raises(InputError, match="given twice"):
        parse_rule_args(["hang", "effect=busy"])


FIVE_MISTAKES = """\
nodes:
  - name: "bad name!"
  - name: b
    hardware: {power_on_time: -5}
    credentials: {username: admin, password: null}
  - name: "c{n}"
    count: 10000000
  - name: d
    faults: [{effect: zap}]
"""


def test_a_lab_file_reports_every_problem_at_once(tmp_path: Path) -> None:
    path = _write(tmp_path, FIVE_MISTAKES)
    with pytest.raises(LabFileError) as info:
        load_labfile(path)
    seen = [(p.line, p.field) for p in info.value.problems]
    assert seen == [
        (2, "nodes[0].name"),
        (4, "nodes[1].hardware.power_on_time"),
        (5, "nodes[1].credentials.password"),
        (7, "nodes[2].count"),
        (9, "nodes[3].faults[0].effect"),
    ]
    assert all(p.source == path for p in info.value.problems)
    assert "MAX_NODES" in str(info.value.problems[3])


@pytest.mark.parametrize(
    ("node", "needle"),
    [
        ("{name: a, credentials: {password: 1234}}", "must be a non-empty string"),
        ("{name: a, hardware: {os_boot_time: 1e9}}", "from 0 to 86400"),
        ("{name: '-a'}", "not a name bmaas enroll accepts"),
        ("{name: a, faults: [" + ", ".join(["{effect: hang}"] * 65) + "]}", "MAX_RULES"),
    ],
)
def test_lab_file_bounds_and_types(tmp_path: Path, node: str, needle: str) -> None:
    path = _write(tmp_path, f"nodes:\n  - {node}\n")
    with pytest.raises(LabFileError, match=needle):
        load_labfile(path)


def test_hwlab_names_are_the_ones_bmaas_enroll_accepts() -> None:
    from bmaas.inventory.nodes import is_valid_name

    assert is_valid_name("r1-n01.rack_2")
    assert not is_valid_name("bad name!")


def test_vendor_profiles_replay_incidents_in_lab_time() -> None:
    from bmaas.fakes.incidents import INCIDENTS

    for name in ("idrac9", "idrac10", "ilo5", "supermicro", "openbmc"):
        rules = [r for g in profiles.PROFILES[name].groups for r in g.rules]
        incidents = [r for r in rules if r.effect == "incident"]
        assert incidents, name
        for rule in incidents:
            incident = INCIDENTS[rule.params["incident"]]
            if incident.trigger.within is not None:
                assert rule.within == incident.trigger.within * profiles.LAB_TIME
            if len(incident.protocols) == 1:
                assert rule.protocol == incident.protocols[0]
        assert any(r.name == "firmware-update" for r in rules), name


def test_a_node_group_names_its_vendor_profile(tmp_path) -> None:
    from bmaas.hwlab.lab import _with_profile_rules

    path = tmp_path / "lab.yaml"
    path.write_text(
        "nodes:\n  - {name: 'd-{n}', count: 2, profile: idrac10}\n  - {name: 'h-{n}', count: 2}\n"
    )
    spec = _with_profile_rules(load_labfile(str(path)))
    rules = {n.name: {r.name for r in n.rules} for n in spec.nodes}
    assert "idrac10-power-on-conflict" in rules["d-1"]
    assert "idrac10-power-on-conflict" in rules["d-2"]
    assert rules["h-1"] == rules["h-2"] == set()
    path.write_text("nodes:\n  - {name: x, profile: nosuch}\n")
    with pytest.raises(InputError, match=r"nodes\[0\]\.profile: unknown profile 'nosuch'"):
        load_labfile(str(path))
