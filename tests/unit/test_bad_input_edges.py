"""Issue 36: one error line for every input, at every edge. A corpus of bad
input at the edges the first corpus (test_bad_input_corpus.py) did not reach:
clouds.yaml, driver_info values (``.inf``, ``2.9``, null, non-text keys,
credentials in an address), ``BMAAS_BMC_*``, ``hwlab bench`` arguments and
incident rules for the other protocol. Each: exit 2, exactly the expected
``error:`` lines (all problems at once), no traceback, no secret in the
output, nothing started."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from bmaas.cli import App, cli
from bmaas.hwlab.cli import cli as hwlab_cli

#: a credential an input smuggles in; it must never be printed
SECRET = "S3cr3t-pw-36"


def refused(result: Result, expected: list[str]) -> None:
    """Exit 2, no traceback, no secret, stdout empty, and stderr exactly one
    ``error:`` line per expected fragment, in order, each containing it."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert SECRET not in result.output
    assert SECRET.replace("-", "%2D") not in result.output
    assert result.stdout == ""
    assert len(lines) == len(expected), lines
    for line, fragment in zip(lines, expected, strict=True):
        assert line.startswith("error: "), line
        assert fragment in line, (fragment, line)


# -- clouds.yaml ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Clouds:
    id: str
    text: str | None  # None: made by the test (FIFO, directory, missing)
    expected: list[str]


CLOUDS = [
    Clouds(
        "unknown-auth-type",
        "clouds:\n  lab:\n    auth_type: bogus\n    auth: {endpoint: 'http://127.0.0.1:9'}\n",
        [":3: clouds.lab.auth_type: no auth plugin 'bogus'"],
    ),
    Clouds("cloud-is-a-list", "clouds:\n  lab: [1, 2]\n", [":2: clouds.lab: must be a mapping"]),
    Clouds(
        "cloud-key-is-a-number",
        "clouds:\n  lab:\n    cloud: 5\n    auth_type: none\n",
        [":3: clouds.lab.cloud: must be a vendor profile's name, not an int"],
    ),
    Clouds(
        "endpoint-unclosed-ipv6",
        "clouds:\n  lab:\n    auth_type: none\n    auth: {endpoint: 'http://[::1'}\n",
        [":4: clouds.lab.auth.endpoint: is not a valid URL"],
    ),
    Clouds(
        "endpoint-with-credential-in-port",
        f"clouds:\n  lab:\n    auth_type: none\n    auth: {{endpoint: 'http://ironic:{SECRET}'}}\n",
        [":4: clouds.lab.auth.endpoint: is not a valid URL"],
    ),
    Clouds(
        "override-not-http",
        f"clouds:\n  lab:\n    auth_type: none\n"
        f"    baremetal_endpoint_override: 'ftp://u:{SECRET}@ironic'\n",
        [":4: clouds.lab.baremetal_endpoint_override: must be an http or https URL"],
    ),
    Clouds(
        "remote-profile",
        "clouds:\n  lab:\n    profile: https://vendor.example\n    auth_type: none\n",
        [":3: clouds.lab.profile: a remote profile (a URL) is not fetched"],
    ),
    Clouds(
        "every-problem-at-once",
        "clouds:\n  lab:\n    auth_type: [none]\n    auth: {password: {a: 1}}\n"
        "    regions: 5\n    api_timeout: .nan\n    bmaas_instance_info: [1]\n",
        [
            ":3: clouds.lab.auth_type: must be an auth plugin's name, not a list",
            ":4: clouds.lab.auth.password: must be a plain value, not a mapping",
            ":5: clouds.lab.regions: must be a list of region names",
            ":6: clouds.lab.api_timeout: must be a finite number",
            ":7: clouds.lab.bmaas_instance_info: must be a mapping",
        ],
    ),
    Clouds("clouds-is-a-list", "clouds: [lab]\n", [":1: clouds: must be a mapping of cloud names"]),
    Clouds("top-level-list", "- lab\n", [":1: must be a mapping with a 'clouds' key"]),
    Clouds("yaml-syntax", "clouds: [\n", [":2: not valid YAML/JSON"]),
    Clouds("fifo", None, ["cannot read: is a FIFO (named pipe), not a regular file"]),
    Clouds("directory", None, ["cannot read: is a directory"]),
    Clouds("missing", None, ["does not exist (named by OS_CLIENT_CONFIG_FILE)"]),
    Clouds(
        "auth-plugin-needs-options",
        "clouds:\n  lab:\n    auth_type: password\n    auth: {username: u}\n",
        [":4: clouds.lab.auth: the auth plugin needs auth_url"],
    ),
]


def _clouds_file(tmp_path: Path, case: Clouds) -> Path:
    path = tmp_path / "clouds.yaml"
    if case.id == "fifo":
        os.mkfifo(path)  # nobody writes: openstacksdk's open() blocked forever
    elif case.id == "directory":
        path.mkdir()
    elif case.text is not None:
        path.write_text(case.text)
    return path


COMMANDS = [
    ["status", "check", "--cloud", "lab", "--deadline", "30"],
    ["deploy", "--cloud", "lab", "-n", "1", "--deadline", "30"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=["status-check", "deploy"])
@pytest.mark.parametrize("case", CLOUDS, ids=[c.id for c in CLOUDS])
def test_a_bad_clouds_yaml_is_one_line_per_problem(
    case: Clouds, command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openstack")
    path = _clouds_file(tmp_path, case)
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(path))
    monkeypatch.delenv("OS_CLOUD", raising=False)
    args = ["--db", str(tmp_path / "b.db"), *command]
    result = CliRunner().invoke(cli, args, obj=App(), catch_exceptions=False)
    refused(result, case.expected)
    if case.id not in ("fifo", "directory", "missing"):
        assert all(str(path) in line for line in result.stderr.splitlines() if line.strip())
    assert not (tmp_path / "b.db").exists()


def test_a_fifo_clouds_yaml_ends_well_within_the_deadline(tmp_path: Path) -> None:
    """The process, not only the in-process command: before issue 36 it hung
    past --deadline until killed (>= 110 s seen with --deadline 2)."""
    pytest.importorskip("openstack")
    fifo = tmp_path / "clouds.yaml"
    os.mkfifo(fifo)
    deadline = 30.0
    env = {**os.environ, "OS_CLIENT_CONFIG_FILE": str(fifo), "BMAAS_DB": str(tmp_path / "b.db")}
    start = time.monotonic()
    command = ["status", "check", "--cloud", "lab", "--deadline", str(deadline)]
    main = "import sys; from bmaas.cli import main; sys.argv[0] = 'bmaas'; main()"
    done = subprocess.run(
        [sys.executable, "-c", main, *command],
        capture_output=True,
        text=True,
        env=env,
        timeout=deadline * 4,  # the guard: a hang fails here, not at the suite's timeout
        check=False,
    )
    elapsed = time.monotonic() - start
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: {fifo}: cannot read: is a FIFO (named pipe), not a regular file"
    ]
    assert elapsed < deadline, f"{elapsed:.1f}s: the refusal did not come by the deadline"


def test_an_oversized_clouds_yaml_is_refused_by_its_size_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 64 GiB sparse file: refused from fstat, not one byte of it read
    (before issue 36, 28 MB took 213 s and 1.47 GiB)."""
    pytest.importorskip("openstack")
    from bmaas.drivers.ironic_backend.clouds import MAX_CLOUDS_BYTES

    path = tmp_path / "clouds.yaml"
    with open(path, "wb") as f:
        f.truncate(64 * 1024**3)
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(path))
    read_from: list[int] = []
    real_read = os.read

    def spy(fd: int, n: int) -> bytes:
        if os.path.realpath(f"/proc/self/fd/{fd}") == str(path.resolve()):
            read_from.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(os, "read", spy)
    args = ["--db", str(tmp_path / "b.db"), "status", "check", "--cloud", "lab"]
    result = CliRunner().invoke(cli, args, obj=App(), catch_exceptions=False)
    refused(result, [f"is {64 * 1024**3} bytes; at most {MAX_CLOUDS_BYTES} are read"])
    assert read_from == []


def test_a_good_clouds_yaml_still_connects_and_keeps_its_instance_info(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bounded reader changes how the file is read, not what it means
    (no request is made: connecting builds the session only)."""
    pytest.importorskip("openstack")
    from bmaas.drivers.ironic_backend.api import connect

    path = tmp_path / "clouds.yaml"
    path.write_text(
        "clouds:\n  lab:\n    auth_type: none\n"
        "    baremetal_endpoint_override: http://127.0.0.1:9\n"
        "    bmaas_instance_info: {kernel: k, ramdisk: r}\n"
    )
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(path))
    conn = connect("lab")
    assert conn.config.name == "lab"
    assert conn.config.config["bmaas_instance_info"] == {"kernel": "k", "ramdisk": "r"}
    assert conn.config.config["baremetal_endpoint_override"] == "http://127.0.0.1:9"


# -- driver_info values ---------------------------------------------------------------


def _node(driver: str, info: str) -> str:
    return f"nodes:\n  - name: n1\n    driver: {driver}\n    driver_info: {{{info}}}\n"


IPMI = "ipmi_address: 10.0.0.1, ipmi_username: a, ipmi_password: b"
REDFISH = "redfish_address: 'https://bmc', redfish_username: a, redfish_password: b"

#: (id, inventory, the expected lines' fragments)
INVENTORIES: list[tuple[str, str, list[str]]] = [
    (
        "max-requests-infinity",
        _node("ipmi", f"{IPMI}, bmc_max_requests: .inf"),
        ["driver_info.bmc_max_requests: must be a whole number from 1 to 1024, not inf"],
    ),
    (
        "max-requests-fraction",
        _node("ipmi", f"{IPMI}, bmc_max_requests: 2.9"),
        ["driver_info.bmc_max_requests: must be a whole number from 1 to 1024, not 2.9"],
    ),
    (
        "max-requests-arabic-indic",
        _node("ipmi", f"{IPMI}, bmc_max_requests: '\u0665'"),
        ["driver_info.bmc_max_requests: must be a whole number from 1 to 1024"],
    ),
    (
        "max-requests-nbsp",
        _node("ipmi", f"{IPMI}, bmc_max_requests: '5\u00a0'"),
        ["driver_info.bmc_max_requests: must be a whole number from 1 to 1024"],
    ),
    (
        "min-interval-nan",
        _node("ipmi", f"{IPMI}, bmc_min_interval: .nan"),
        ["driver_info.bmc_min_interval: must be a finite number"],
    ),
    (
        "ipmi-address-null",
        _node("ipmi", "ipmi_address: null"),
        ["driver_info.ipmi_address: is required, not null"],
    ),
    (
        "redfish-address-null",
        _node("redfish", "redfish_address: null, redfish_username: a, redfish_password: b"),
        ["driver_info.redfish_address: is required, not null"],
    ),
    (
        "redfish-credentials-null",
        _node(
            "redfish",
            "redfish_address: 'https://bmc', redfish_username: null, redfish_password: null",
        ),
        [
            "driver_info.redfish_username: is required, not null",
            "driver_info.redfish_password: is required, not null",
        ],
    ),
    (
        "driver-info-int-key",
        _node("ipmi", f"{IPMI}, 1: x"),
        ["driver_info: unknown key 1 (keys are text)"],
    ),
    (
        "driver-info-list",
        "nodes:\n  - {name: n1, driver: ipmi, driver_info: [1, 2]}\n",
        ["driver_info: must be a mapping"],
    ),
    (
        "pct-encoded-credentials",
        _node(
            "redfish",
            f"redfish_address: 'https://admin%3A{SECRET}%40bmc', "
            "redfish_username: a, redfish_password: b",
        ),
        ["driver_info.redfish_address: must not carry credentials"],
    ),
    (
        "password-as-port",
        _node(
            "redfish",
            f"redfish_address: 'https://bmc:{SECRET}', redfish_username: a, redfish_password: b",
        ),
        ["driver_info.redfish_address: has a port that is not a number"],
    ),
    (
        "password-in-ipmi-address",
        _node("ipmi", f"ipmi_address: 'admin:{SECRET}@10.0.0.1'"),
        ["driver_info.ipmi_address: must be a host name or an IP address"],
    ),
    (
        "every-value-at-once",
        _node(
            "redfish",
            "redfish_address: null, redfish_username: a, redfish_password: b, "
            "bmc_max_requests: 2.9, bmc_min_interval: -1",
        ),
        [
            "driver_info.bmc_max_requests: must be a whole number",
            "driver_info.bmc_min_interval: must be a number of seconds",
            "driver_info.redfish_address: is required, not null",
        ],
    ),
]


@pytest.mark.parametrize("dry_run", [False, True], ids=["enroll", "dry-run"])
@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in INVENTORIES], ids=[c[0] for c in INVENTORIES]
)
def test_a_bad_driver_info_value_is_one_line_each(
    text: str, expected: list[str], dry_run: bool, tmp_path: Path
) -> None:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(text, encoding="utf-8")
    args = ["enroll", str(inventory), *(["--dry-run"] if dry_run else [])]
    result = CliRunner().invoke(
        cli, args, obj=App(db=str(tmp_path / "b.db")), catch_exceptions=False
    )
    refused(result, expected)
    assert all("inv.yaml:" in line for line in result.stderr.splitlines() if line.strip())
    assert not (tmp_path / "b.db").exists()


# -- BMAAS_BMC_* -----------------------------------------------------------------------

ENVIRONMENTS: list[tuple[str, dict[str, str], list[str]]] = [
    ("max-requests-text", {"BMAAS_BMC_MAX_REQUESTS": "abc"}, ["BMAAS_BMC_MAX_REQUESTS: must be"]),
    ("max-requests-fraction", {"BMAAS_BMC_MAX_REQUESTS": "2.9"}, ["not 2.9"]),
    ("max-requests-zero", {"BMAAS_BMC_MAX_REQUESTS": "0"}, ["BMAAS_BMC_MAX_REQUESTS: must be"]),
    ("max-requests-arabic-indic", {"BMAAS_BMC_MAX_REQUESTS": "\u0665"}, ["not '\u0665'"]),
    ("min-interval-nan", {"BMAAS_BMC_MIN_INTERVAL": "nan"}, ["BMAAS_BMC_MIN_INTERVAL: must be"]),
    ("min-interval-negative", {"BMAAS_BMC_MIN_INTERVAL": "-1"}, ["BMAAS_BMC_MIN_INTERVAL"]),
    ("min-interval-nbsp", {"BMAAS_BMC_MIN_INTERVAL": "1\u00a0"}, ["BMAAS_BMC_MIN_INTERVAL"]),
    (
        "both",
        {"BMAAS_BMC_MAX_REQUESTS": "1e9999", "BMAAS_BMC_MIN_INTERVAL": "inf"},
        ["environment: BMAAS_BMC_MAX_REQUESTS", "environment: BMAAS_BMC_MIN_INTERVAL"],
    ),
]


@pytest.fixture
def two_ipmi_nodes(tmp_path: Path) -> App:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(
        "nodes:\n"
        + "".join(
            f"  - {{name: n{i}, driver: ipmi, driver_info: {{ipmi_address: 127.0.0.{i}, "
            "ipmi_port: 9, ipmi_username: a, ipmi_password: b}}\n"
            for i in (1, 2)
        )
    )
    app = App(db=str(tmp_path / "b.db"))
    assert CliRunner().invoke(cli, ["enroll", str(inventory)], obj=app).exit_code == 0
    return app


@pytest.mark.parametrize(
    "command",
    [["power", "status", "--all"], ["sync", "--count", "1"]],
    ids=["power-status", "sync"],
)
@pytest.mark.parametrize(
    ("env", "expected"), [c[1:] for c in ENVIRONMENTS], ids=[c[0] for c in ENVIRONMENTS]
)
def test_a_bad_bmc_environment_variable_is_exit_2_up_front(
    env: dict[str, str],
    expected: list[str],
    command: list[str],
    two_ipmi_nodes: App,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before issue 36: exit 1 with the problem repeated on every node's line."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    calls: list[Any] = []
    two_ipmi_nodes.make_factory = lambda *a, **k: calls.append(a) or pytest.fail("a driver built")
    result = CliRunner().invoke(cli, command, obj=two_ipmi_nodes, catch_exceptions=False)
    refused(result, expected)
    assert calls == []


def test_an_empty_bmc_environment_variable_is_unset(
    two_ipmi_nodes: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BMAAS_BMC_MAX_REQUESTS", "")
    result = CliRunner().invoke(cli, ["node", "list"], obj=two_ipmi_nodes, catch_exceptions=False)
    assert result.exit_code == 0, result.output


# -- hwlab bench arguments --------------------------------------------------------------

BENCH: list[tuple[str, list[str], list[str]]] = [
    ("hung-fraction-nan", ["fleet-sweep", "--hung-fraction", "nan"], ["--hung-fraction"]),
    ("ironic-scale-hung-nan", ["ironic-scale", "--hung-fraction", "nan"], ["--hung-fraction"]),
    ("duration-nan", ["lab-scale", "--duration", "nan"], ["--duration"]),
    ("deadline-nan", ["overrun", "--deadline", "nan"], ["--deadline"]),
    ("deadline-arabic-indic", ["overrun", "--deadline", "\u0665"], ["--deadline"]),
    ("share-nan", ["goodput", "--share", "nan"], ["--share"]),
    ("busy-infinity", ["ironic", "--busy", "inf"], ["--busy"]),
    ("cap-nan", ["fault-detection", "--cap", "nan"], ["--cap"]),
    ("settle-nan", ["ironic", "--settle", "nan"], ["--settle"]),
    (
        "only-bogus-twice",
        ["overrun", "--only", "bogus", "--only", "hang", "--only", "nope"],
        ["--only: no matrix scenario 'bogus'", "--only: no matrix scenario 'nope'"],
    ),
    (
        "bad-environment",
        ["overhead", "--env", "BMAAS_BMC_MIN_INTERVAL=nan"],
        ["BMAAS_BMC_MIN_INTERVAL"],
    ),
]


@pytest.mark.parametrize(("args", "expected"), [c[1:] for c in BENCH], ids=[c[0] for c in BENCH])
def test_a_bad_bench_argument_is_one_line_and_starts_nothing(
    args: list[str], expected: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bmaas.hwlab.harness.bench import cli as bench_cli

    if "--env" in args:
        name, _, value = args.pop(args.index("--env") + 1).partition("=")
        args.remove("--env")
        monkeypatch.setenv(name, value)
    started: list[str] = []
    monkeypatch.setattr(bench_cli, "_scenario", lambda ctx, name: started.append(name))
    result = CliRunner().invoke(hwlab_cli, ["bench", *args], catch_exceptions=False)
    refused(result, expected)
    assert started == []


def test_a_bench_that_measured_nothing_exits_1_with_a_line_per_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``hwlab bench ironic-scale`` exited 0 when every row failed."""
    from bmaas.hwlab.harness.bench import ironic_scale, report

    def failing_trial(o: Any, size: int, driver: str, tmp: Path, progress: Any) -> dict[str, Any]:
        raise ironic_scale.harness.IronicError(f"no Ironic for {driver}")

    monkeypatch.setattr(ironic_scale, "_trial", failing_trial)
    monkeypatch.setattr(report, "cpu_busy", lambda interval=1.0: 0.0)  # no 1 s sample
    result = CliRunner().invoke(
        hwlab_cli,
        ["bench", "ironic-scale", "--size", "2", "--type", "ipmi", "--type", "bmaas-ipmi"],
        catch_exceptions=False,
    )
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [
        "error: ironic-scale: not measured: ipmi x 2: no Ironic for ipmi",
        "error: ironic-scale: not measured: bmaas-ipmi x 2: no Ironic for bmaas-ipmi",
    ]


# -- incident rules for the other protocol ----------------------------------------------

LAB_FILES: list[tuple[str, str, list[str]]] = [
    (
        "ipmi-incident-on-redfish-node",
        "nodes:\n  - name: a\n    protocols: [redfish]\n"
        "    faults: [{effect: incident, incident: ipmi-node-busy}]\n",
        [":4: nodes[0].faults[0]: incident 'ipmi-node-busy' answers over ipmi only"],
    ),
    (
        "redfish-incident-on-ipmi-node",
        "nodes:\n  - name: a\n    protocols: [ipmi]\n    faults:\n"
        "      - {effect: incident, incident: idrac10-power-on-conflict}\n"
        "      - {effect: incident, incident: ipmi-node-busy}\n",
        [":5: nodes[0].faults[0]: incident 'idrac10-power-on-conflict' answers over redfish only"],
    ),
    (
        "incident-given-the-other-protocol",
        "nodes:\n  - name: a\n"
        "    faults: [{effect: incident, incident: ipmi-node-busy, protocol: redfish}]\n",
        [":3: nodes[0].faults[0].protocol: incident 'ipmi-node-busy' answers over ipmi only"],
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in LAB_FILES], ids=[c[0] for c in LAB_FILES]
)
def test_an_incident_no_client_could_see_is_refused(
    text: str, expected: list[str], tmp_path: Path
) -> None:
    path = tmp_path / "lab.yaml"
    path.write_text(text)
    args = ["up", "--lab-file", str(path), "--state-dir", str(tmp_path / "state")]
    result = CliRunner().invoke(hwlab_cli, args, catch_exceptions=False)
    refused(result, expected)


def test_a_profile_or_defaults_rule_for_the_other_protocol_is_still_accepted(
    tmp_path: Path,
) -> None:
    """Defaults and profiles put both protocols' rules on every node of a
    mixed lab: only a node's own rules are held to its protocols."""
    from bmaas.hwlab.labspec import load_labfile

    path = tmp_path / "lab.yaml"
    path.write_text(
        "defaults:\n  faults: [{effect: incident, incident: ipmi-node-busy}]\n"
        "nodes:\n  - {name: a, protocols: [redfish]}\n  - {name: b, protocols: [ipmi]}\n"
    )
    spec = load_labfile(str(path))
    assert [len(n.rules) for n in spec.nodes] == [1, 1]
