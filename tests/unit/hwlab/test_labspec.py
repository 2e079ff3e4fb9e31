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


# -- sse_keepalive: the Redfish SSE keepalive as a lab setting (issue 37) -------


@pytest.mark.parametrize(
    ("line", "wanted"),
    [
        ("", 30.0),  # not given: the default
        ("sse_keepalive: 0.2\n", 0.2),
        ("sse_keepalive: 5\n", 5.0),
        ("sse_keepalive: 86400\n", 86400.0),
        ("sse_keepalive: 0\n", None),  # none at all, as OpenBMC's bmcweb
        ("sse_keepalive: null\n", None),
    ],
)
def test_a_lab_file_sets_the_sse_keepalive(tmp_path: Path, line: str, wanted: float | None) -> None:
    spec = load_labfile(_write(tmp_path, line + "nodes:\n  - {name: a}\n"))
    assert spec.sse_keepalive == wanted


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("'30'", "must be a number of seconds"),
        ("true", "must be a number of seconds"),
        ("-1", "must be a number of seconds from 0 to 86400, not -1"),
        (".nan", "must be a finite number"),
        (".inf", "must be a finite number"),
        ("-.inf", "must be a finite number"),
        ("86401", "not 86401"),
        ("[30]", "must be a number of seconds"),
    ],
)
def test_a_bad_sse_keepalive_is_one_problem_with_its_line(
    tmp_path: Path, value: str, needle: str
) -> None:
    path = _write(tmp_path, f"seed: 1\nsse_keepalive: {value}\nnodes:\n  - {{name: a}}\n")
    with pytest.raises(LabFileError) as info:
        load_labfile(path)
    (problem,) = info.value.problems
    assert (problem.source, problem.line, problem.field) == (path, 2, "sse_keepalive")
    assert needle in problem.message
    assert "0 or null: no keepalive" in problem.message


def test_a_bad_sse_keepalive_is_reported_with_every_other_problem(tmp_path: Path) -> None:
    text = (
        "redfish_service_size: 0\nsse_keepalive: -5\nredfish_tls: maybe\nnodes:\n  - {name: '-a'}\n"
    )
    path = _write(tmp_path, text)
    with pytest.raises(LabFileError) as info:
        load_labfile(path)
    seen = sorted((p.line, p.field) for p in info.value.problems)
    assert seen == [
        (1, "redfish_service_size"),
        (2, "sse_keepalive"),
        (3, "redfish_tls"),
        (5, "nodes[0].name"),
    ]


def test_generate_takes_the_sse_keepalive_and_refuses_bad_ones() -> None:
    assert generate(1).sse_keepalive == 30.0
    assert generate(1, sse_keepalive=0.5).sse_keepalive == 0.5
    assert generate(1, sse_keepalive=0).sse_keepalive is None
    assert generate(1, sse_keepalive=None).sse_keepalive is None
    for bad in (-1, float("nan"), float("inf"), True, "30"):
        with pytest.raises(InputError) as info:
            generate(1, sse_keepalive=bad)  # type: ignore[arg-type]
        assert info.value.field == "--sse-keepalive"


def test_hwlab_up_options_set_the_sse_keepalive_over_the_lab_files(tmp_path: Path) -> None:
    from bmaas.hwlab.daemon import LabOptions, build_spec

    lab = _write(tmp_path, "sse_keepalive: 5\nnodes:\n  - {name: a}\n")
    assert build_spec(LabOptions(nodes=1)).sse_keepalive == 30.0
    assert build_spec(LabOptions(nodes=1, sse_keepalive=0.0)).sse_keepalive is None
    assert build_spec(LabOptions(nodes=1, sse_keepalive=2.5)).sse_keepalive == 2.5
    assert build_spec(LabOptions(labfile=lab)).sse_keepalive == 5.0  # not given: the file's
    assert build_spec(LabOptions(labfile=lab, sse_keepalive=0.0)).sse_keepalive is None
    assert build_spec(LabOptions(labfile=lab, sse_keepalive=1.0)).sse_keepalive == 1.0
    options = LabOptions(nodes=1, sse_keepalive=0.0)  # crosses to the daemon as JSON
    assert LabOptions.from_json(options.to_json()) == options


def test_the_cli_option_reaches_the_lab_options_and_refuses_bad_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from bmaas.hwlab import daemon
    from bmaas.hwlab.cli import cli as hwlab_cli
    from bmaas.inventory.specs import InventoryError

    stopped = InputError("stopped here by the test")
    seen: list[daemon.LabOptions] = []

    def stop_here(options: daemon.LabOptions) -> None:
        seen.append(options)
        raise InventoryError([stopped])  # `up` stops before anything starts

    monkeypatch.setattr(daemon, "build_spec", stop_here)
    state = ["--state-dir", str(tmp_path / "state")]
    for args, wanted in (
        ([], None),
        (["--sse-keepalive", "0"], 0.0),
        (["--sse-keepalive", "0.5"], 0.5),
    ):
        result = CliRunner().invoke(hwlab_cli, ["up", *args, *state], catch_exceptions=False)
        assert result.exit_code == 2, result.output
        assert "stopped here by the test" in result.output
        assert seen.pop().sse_keepalive == wanted
    for bad in ("-1", "nan", "inf", "soon", "86401"):
        result = CliRunner().invoke(
            hwlab_cli, ["up", "--sse-keepalive", bad, *state], catch_exceptions=False
        )
        assert result.exit_code == 2
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1, result.output
        assert "--sse-keepalive" in lines[0]
        assert "Traceback" not in result.output
    assert seen == []
    assert not (tmp_path / "state").exists()
    help_text = CliRunner().invoke(hwlab_cli, ["up", "--help"]).output
    assert "bmcweb" in help_text


def test_the_lab_reports_its_sse_keepalive(tmp_path: Path) -> None:
    from bmaas.hwlab.lab import Lab

    assert Lab(generate(1), tmp_path / "a").describe()["sse_keepalive"] == 30.0
    assert Lab(generate(1, sse_keepalive=0), tmp_path / "b").describe()["sse_keepalive"] is None


@pytest.mark.parametrize(
    ("value", "needle"),
    [("1001", "from 1 to 1000, not 1001"), ("10000000000", "from 1 to 1000"), ("0", "from 1")],
)
def test_a_lab_files_redfish_service_size_is_held_to_the_clis_bound(
    tmp_path: Path, value: str, needle: str
) -> None:
    """1 to 1000, as ``hwlab up --redfish-service-size`` (issue 44): one
    problem, its line and field."""
    path = _write(tmp_path, f"redfish_service_size: {value}\nnodes:\n  - {{name: a}}\n")
    with pytest.raises(LabFileError) as info:
        load_labfile(path)
    (problem,) = info.value.problems
    assert (problem.line, problem.field) == (1, "redfish_service_size")
    assert needle in problem.message
    assert load_labfile(_write(tmp_path, "redfish_service_size: 1000\nnodes:\n  - {name: a}\n"))


def test_generate_holds_the_redfish_service_size_to_the_same_bound() -> None:
    with pytest.raises(InputError, match="1000"):
        generate(2, redfish_service_size=1001)
