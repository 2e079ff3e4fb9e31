"""A corpus of bad input: malformed inventories, lab files, database URLs
and paths. Each must be refused with exit 2, exactly one ``error:`` line per
problem (all of them in one pass), no traceback, and no database created."""

from __future__ import annotations

import dataclasses
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy.dialects import postgresql

from bmaas.cli import App, cli
from bmaas.hwlab.cli import cli as hwlab_cli

DEEP = 20_000

IPMI = "  - name: n1\n    driver: ipmi\n    driver_info: {ipmi_address: 10.0.0.1, %s}\n"
REDFISH = (
    "  - name: n1\n    driver: redfish\n    driver_info: {redfish_address: '%s', "
    "redfish_username: a, redfish_password: b}\n"
)


def ipmi(extra: str) -> str:
    return "nodes:\n" + IPMI % extra


def redfish(address: str) -> str:
    return "nodes:\n" + REDFISH % address


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    text: str | bytes | None  # None: the path is made by the test (directory, missing)
    problems: int = 1


INVENTORIES = [
    Case("port-out-of-range", ipmi("ipmi_port: 70000")),
    Case("port-not-a-number", ipmi("ipmi_port: abc")),
    Case("cipher-suite", ipmi("ipmi_cipher_suite: 5")),
    Case("priv-level", ipmi("ipmi_priv_level: root")),
    Case("unknown-driver-info-key", ipmi("ipmi_adress: 10.0.0.2")),
    Case("password-not-a-string", ipmi("ipmi_password: [1, 2]")),
    Case("password-env-unset", ipmi("ipmi_password: '${BMAAS_CORPUS_UNSET}'")),
    Case("password-file-missing", ipmi("ipmi_password: 'file:/nonexistent/pw'")),
    Case(
        "every-problem-in-one-pass",
        "nodes:\n  - name: n1\n    driver: ipmi\n    driver_info:\n"
        "      ipmi_adress: 10.0.0.1\n      ipmi_port: 70000\n"
        "    resource_clas: x\n    network_segment: nowhere\n",
        problems=4,
    ),
    Case(
        "problems-across-nodes",
        "nodes:\n"
        + IPMI % "ipmi_port: 0"
        + IPMI.replace("n1", "n2") % "ipmi_cipher_suite: 9"
        + "  - {name: n3, driver: nosuch}\n",
        problems=3,
    ),
    Case(
        "ipmi-address-url-fragment",
        "nodes:\n  - {name: n1, driver: ipmi, driver_info: {ipmi_address: 'http://[::1'}}\n",
    ),
    Case(
        "ipmi-address-space",
        "nodes:\n  - {name: n1, driver: ipmi, driver_info: {ipmi_address: 'bmc one'}}\n",
    ),
    Case(
        "ipmi-address-bad-label",
        "nodes:\n  - {name: n1, driver: ipmi, driver_info: {ipmi_address: '-bmc.example'}}\n",
    ),
    Case("redfish-unclosed-ipv6", redfish("http://[::1")),
    Case("redfish-scheme", redfish("ftp://bmc")),
    Case("redfish-bad-port", redfish("https://bmc:99999")),
    Case("redfish-host-with-space", redfish("https://bmc one")),
    Case("redfish-credentials-in-url", redfish("https://u:p@bmc")),
    Case("unknown-driver", "nodes:\n  - {name: n1, driver: nosuch}\n"),
    Case("missing-driver", "nodes:\n  - {name: n1}\n"),
    Case("bad-node-name", "nodes:\n  - {name: 'n 1', driver: fake}\n"),
    Case("duplicate-node", "nodes:\n  - {name: n1, driver: fake}\n  - {name: n1, driver: fake}\n"),
    Case("node-not-a-mapping", "nodes:\n  - just-a-string\n"),
    Case("nodes-not-a-list", "nodes: {a: 1}\n"),
    Case("no-nodes", "networks: []\n"),
    Case("empty-file", ""),
    Case("top-level-list", "- a\n- b\n"),
    Case("unknown-top-key", "nodez: []\nnodes: []\n"),
    Case("cpus-negative", "nodes:\n  - {name: n1, driver: fake, properties: {cpus: -1}}\n"),
    Case("properties-not-mapping", "nodes:\n  - {name: n1, driver: fake, properties: 3}\n"),
    Case("extra-not-mapping", "nodes:\n  - {name: n1, driver: fake, extra: [1]}\n"),
    Case("unknown-segment", "nodes:\n  - {name: n1, driver: fake, network_segment: r9}\n"),
    Case(
        "bad-cidr",
        "networks:\n  - name: p\n    segments: [{name: s, cidr: 10.0.0.0/33}]\nnodes: []\n",
    ),
    Case("yaml-syntax", "nodes: [\n"),
    Case("duplicate-key", "nodes: []\nnodes: []\n"),
    Case("deep-list", "nodes: " + "[" * DEEP + "]" * DEEP + "\n"),
    Case("deep-mapping", "nodes: " + "{a: " * DEEP + "1" + "}" * DEEP + "\n"),
    Case("deep-block-list", "nodes:\n  - " + "- " * DEEP + "1\n"),
    Case(
        "deep-node",
        "nodes:\n  - {name: n1, driver: fake, extra: " + "[" * 150 + "]" * 150 + "}\n"
        "  - " + "- " * DEEP + "1\n",
        problems=2,
    ),
    Case(
        "invalid-segment-reported-once",
        "networks:\n  - name: p\n    segments: [{name: s, cidr: 10.0.0.0/33}]\n"
        "nodes:\n  - {name: n1, driver: fake, network_segment: s}\n"
        "  - {name: n2, driver: fake, network_segment: s}\n",
    ),
    Case("deep-json", '{"nodes": ' + "[" * DEEP + "]" * DEEP + "}\n"),
    Case("not-utf8", b"nodes: [\xff\xfe]\n"),
    Case("directory", None),
    Case("missing-file", None),
    Case("fifo", None),
    Case("dev-zero", None),
    # issue 23: tracebacks where one error line was promised
    Case("nul-byte", "nodes:\n  - {name: n1, driver: fake}\n  - {name: n\x002, driver: fake}\n"),
    Case("binary-garbage", b"nodes:\n\x01\x02\x03\x7f\x00\x1b[0m\n"),
    Case(
        "json-5000-digit-integer",
        '{"nodes": [{"name": "n1", "driver": "fake", "properties": {"cpus": '
        + "9" * 5000
        + "}}]}\n",
    ),
    # issue 23: values that were accepted
    Case("port-fraction", ipmi("ipmi_port: 623.5")),
    Case("port-nan", ipmi("ipmi_port: .nan")),
    Case("port-infinity", ipmi("ipmi_port: .inf")),
    Case("port-boolean", ipmi("ipmi_port: true")),
    Case("port-unicode-digit", ipmi("ipmi_port: '\u00b2'")),
    Case("cipher-suite-infinity", ipmi("ipmi_cipher_suite: .inf")),
    Case("cipher-suite-fraction", ipmi("ipmi_cipher_suite: 3.5")),
    Case(
        "redfish-body-cap-too-small",
        "nodes:\n  - {name: n1, driver: redfish, driver_info: {redfish_address: 'https://bmc',"
        " redfish_username: a, redfish_password: b, redfish_max_body_bytes: 100}}\n",
    ),
    Case("property-nan", "nodes:\n  - {name: n1, driver: fake, properties: {weight: .nan}}\n"),
    Case("property-infinity", "nodes:\n  - {name: n1, driver: fake, properties: {w: -.inf}}\n"),
    Case("cpus-fraction", "nodes:\n  - {name: n1, driver: fake, properties: {cpus: 4.5}}\n"),
    Case("extra-nan", "nodes:\n  - {name: n1, driver: fake, extra: {a: [1, {b: .nan}]}}\n"),
    Case("name-path", "nodes:\n  - {name: '../../bad', driver: fake}\n"),
    Case("name-trailing-newline", 'nodes:\n  - {name: "n1\\n", driver: fake}\n'),
    Case("name-too-long", "nodes:\n  - {name: " + "n" * 256 + ", driver: fake}\n"),
    Case(
        "network-name-space",
        "networks:\n  - {name: 'prov net', segments: []}\nnodes: []\n",
    ),
    Case("password-file-dev-zero", ipmi("ipmi_password: 'file:/dev/zero'")),
    Case("password-file-directory", ipmi("ipmi_password: 'file:/'")),
    Case(
        "every-number-problem-in-one-pass",
        "nodes:\n  - name: n1\n    driver: ipmi\n    driver_info:\n"
        "      ipmi_address: 10.0.0.1\n      ipmi_port: 623.5\n"
        "      ipmi_cipher_suite: .nan\n"
        "    properties: {cpus: .inf, weight: .nan}\n",
        problems=4,
    ),
]

#: --db values that cannot be used; the psycopg case hides the package
#: the DBAPI module a bare postgresql:// loads: psycopg (3) from SQLAlchemy 2.1,
#: psycopg2 before (pyproject.toml allows 2.0.30; scripts/test-floor.sh runs it)
PG_DEFAULT_DBAPI = postgresql.dialect.driver
#: the package bmaas names for each
DBAPI_PACKAGES = {"psycopg": "psycopg[binary]", "psycopg2": "psycopg2-binary"}
DB_URLS = [
    ("psycopg-not-installed", "postgresql+psycopg://bmaas@127.0.0.1:1/bmaas", "psycopg"),
    ("postgresql-default-driver", "postgresql://bmaas@127.0.0.1:1/bmaas", PG_DEFAULT_DBAPI),
    ("mysql", "mysql://bmaas@127.0.0.1:1/bmaas", None),
    ("unknown-dialect", "foo://x/y", None),
    ("bad-port", "postgresql://bmaas@127.0.0.1:abc/bmaas", None),
    ("not-a-url", "sqlite://::://", None),
]


def _stderr_lines(result: object) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]  # type: ignore[attr-defined]


def assert_refused(result: object, problems: int) -> None:
    lines = _stderr_lines(result)
    assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
    assert "Traceback" not in result.output  # type: ignore[attr-defined]
    assert len(lines) == problems, lines
    assert all(line.startswith("error: ") for line in lines), lines
    assert result.stdout == ""  # type: ignore[attr-defined]


def _path(tmp_path: Path, case: Case, suffix: str = ".yaml") -> Path:
    path = tmp_path / f"input{suffix}"
    if case.id.startswith("json-"):
        path = tmp_path / "input.json"
    if case.id == "directory":
        path.mkdir()
    elif case.id == "missing-file":
        pass
    elif case.id == "fifo":
        os.mkfifo(path)  # nobody writes: opening it for reading would block forever
    elif case.id == "dev-zero":
        return Path("/dev/zero")  # endless: reading it whole would never finish
    elif isinstance(case.text, bytes):
        path.write_bytes(case.text)
    else:
        path.write_text(case.text or "")
    return path


def _no_database_left(tmp_path: Path) -> None:
    left = [p.name for p in tmp_path.rglob("*.db*")]
    assert left == [], f"a database was created: {left}"


@pytest.mark.parametrize("dry_run", [False, True], ids=["enroll", "dry-run"])
@pytest.mark.parametrize("case", INVENTORIES, ids=[c.id for c in INVENTORIES])
def test_a_bad_inventory_is_refused_in_one_pass(
    case: Case, dry_run: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BMAAS_CORPUS_UNSET", raising=False)
    path = _path(tmp_path, case)
    args = ["enroll", str(path), *(["--dry-run"] if dry_run else [])]
    result = CliRunner().invoke(
        cli, args, obj=App(db=str(tmp_path / "bmaas.db")), catch_exceptions=False
    )
    assert_refused(result, case.problems)
    _no_database_left(tmp_path)


LAB_FILES = [
    Case("deep-list", "nodes: " + "[" * DEEP + "]" * DEEP + "\n"),
    Case("deep-block-list", "nodes:\n  - " + "- " * DEEP + "1\n"),
    Case("deep-mapping", "defaults: " + "{a: " * DEEP + "1" + "}" * DEEP + "\n"),
    Case("yaml-syntax", "nodes: [\n"),
    Case("directory", None),
    Case("missing-file", None),
]


@pytest.mark.parametrize("case", LAB_FILES, ids=[c.id for c in LAB_FILES])
def test_a_bad_lab_file_is_one_line(case: Case, tmp_path: Path) -> None:
    path = _path(tmp_path, case)
    state = tmp_path / "state"
    args = ["up", "--lab-file", str(path), "--state-dir", str(state)]
    result = CliRunner().invoke(hwlab_cli, args, catch_exceptions=False)
    assert_refused(result, case.problems)


@pytest.mark.parametrize(
    "command",
    [["node", "list"], ["node", "show", "n1"], ["power", "status", "--all"], ["db", "current"]],
    ids=lambda c: "-".join(c),
)
@pytest.mark.parametrize(("name", "url", "hide"), DB_URLS, ids=[u[0] for u in DB_URLS])
def test_a_bad_database_url_is_one_line_naming_the_fix(
    name: str,
    url: str,
    hide: str | None,
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if hide is not None:
        monkeypatch.setitem(sys.modules, hide, None)  # as if not installed
    result = CliRunner().invoke(cli, ["--db", url, *command], obj=App(), catch_exceptions=False)
    assert_refused(result, 1)
    if hide is not None:
        assert f"pip install '{DBAPI_PACKAGES[hide]}'" in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["node", "list"],
        ["node", "show", "n1"],
        ["power", "status", "--all"],
        ["instance", "list"],
        ["sync"],
        ["maintenance", "status", "n1"],
        ["undeploy", "--all"],
    ],
    ids=lambda c: "-".join(c),
)
def test_commands_never_create_a_database(command: list[str], tmp_path: Path) -> None:
    db = tmp_path / "sub" / "bmaas.db"
    result = CliRunner().invoke(cli, ["--db", str(db), *command], obj=App(), catch_exceptions=False)
    assert_refused(result, 1)
    assert f"no database at {db}; run `bmaas enroll" in result.stderr
    assert not db.parent.exists()


def test_a_directory_as_the_database_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["--db", str(tmp_path), "node", "list"], obj=App(), catch_exceptions=False
    )
    assert_refused(result, 1)
    assert "is a directory" in result.stderr


def test_status_check_with_a_directory_as_inventory_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["--db", str(tmp_path / "b.db"), "status", "check", "--inventory", str(tmp_path)],
        obj=App(),
        catch_exceptions=False,
    )
    assert_refused(result, 1)
    _no_database_left(tmp_path)


def test_debug_changes_the_output_never_the_exit_code(tmp_path: Path) -> None:
    db = str(tmp_path / "bmaas.db")
    plain = CliRunner().invoke(cli, ["--db", db, "node", "show", "x"], obj=App())
    debug = CliRunner().invoke(cli, ["--db", db, "--debug", "node", "show", "x"], obj=App())
    assert plain.exit_code == debug.exit_code == 2
    assert "Traceback" in debug.stderr
    assert "Traceback" not in plain.stderr


# -- issue 23: numbers and names on the command line ------------------------------------

#: every command here must stop at its options: no database is created, no
#: backend contacted (``--backend ironic`` with nothing configured)
BAD_OPTIONS = [
    ("power-status-deadline-nan", ["power", "status", "--all", "--deadline", "nan"]),
    ("power-status-deadline-inf", ["power", "status", "--all", "--deadline", "inf"]),
    ("power-status-bmc-timeout-nan", ["power", "status", "--all", "--bmc-timeout", "nan"]),
    ("deploy-deadline-nan", ["deploy", "--deadline", "nan"]),
    ("deploy-deadline-too-long", ["deploy", "--deadline", "1e300"]),
    ("deploy-bmc-timeout-nan", ["deploy", "--bmc-timeout", "nan"]),
    ("deploy-power-timeout-nan", ["deploy", "--power-timeout", "NaN"]),
    ("deploy-settle-infinity", ["deploy", "--settle", "Infinity"]),
    ("deploy-name-prefix-path", ["deploy", "--name-prefix", "../../bad name"]),
    ("deploy-name-prefix-slash", ["deploy", "--name-prefix", "a/b"]),
    ("deploy-property-nan", ["deploy", "--property", "weight=.nan"]),
    ("deploy-property-cpus-fraction", ["deploy", "--property", "cpus=4.5"]),
    ("deploy-property-list", ["deploy", "--property", "cpus=[1,2]"]),
    ("deploy-property-no-equals", ["deploy", "--property", "cpus"]),
    ("deploy-property-ironic", ["deploy", "--backend", "ironic", "--property", "cpus=4"]),
    ("sync-interval-nan", ["sync", "--interval", "nan"]),
    ("sync-interval-inf", ["sync", "--interval", "inf"]),
    ("sync-interval-zero", ["sync", "--interval", "0"]),
    ("sync-lease-ttl-nan", ["sync", "--lease-ttl", "nan"]),
    ("status-check-deadline-nan", ["status", "check", "--deadline", "nan"]),
    ("status-check-inventory-dev-zero", ["status", "check", "--inventory", "/dev/zero"]),
    ("undeploy-deadline-nan", ["undeploy", "x", "--deadline", "nan"]),
    ("power-on-timeout-nan", ["power", "on", "--all", "--wait", "--timeout", "nan"]),
]


@pytest.mark.parametrize(("name", "args"), BAD_OPTIONS, ids=[c[0] for c in BAD_OPTIONS])
def test_a_bad_option_is_one_line(name: str, args: list[str], tmp_path: Path) -> None:
    db = tmp_path / "bmaas.db"
    result = CliRunner().invoke(cli, ["--db", str(db), *args], obj=App(), catch_exceptions=False)
    assert_refused(result, 1)
    _no_database_left(tmp_path)


def test_every_bad_property_is_its_own_line(tmp_path: Path) -> None:
    args = ["deploy", "--property", "cpus=0", "--property", "w=.inf", "--property", "x"]
    result = CliRunner().invoke(
        cli, ["--db", str(tmp_path / "b.db"), *args], obj=App(), catch_exceptions=False
    )
    assert_refused(result, 3)
    assert all("--property" in line for line in _stderr_lines(result))


@pytest.fixture
def enrolled(tmp_path: Path) -> App:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("nodes:\n  - {name: n1, driver: fake}\n")
    app = App(db=str(tmp_path / "bmaas.db"))
    assert CliRunner().invoke(cli, ["enroll", str(inventory)], obj=app).exit_code == 0
    return app


@pytest.mark.parametrize(
    ("args", "problems"),
    [
        (["undeploy", "nosuch"], 1),
        (["undeploy", "nosuch", "other"], 2),
        (["move", "nosuch"], 1),
    ],
    ids=["undeploy", "undeploy-two", "move"],
)
def test_an_unknown_instance_exits_2_on_every_command(
    enrolled: App, args: list[str], problems: int
) -> None:
    result = CliRunner().invoke(cli, args, obj=enrolled, catch_exceptions=False)
    assert_refused(result, problems)
    assert "no instance 'nosuch'" in result.stderr


def test_instance_info_in_clouds_yaml_must_be_a_mapping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openstack")
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(
        "clouds:\n  lab:\n    auth_type: none\n"
        "    baremetal_endpoint_override: http://127.0.0.1:9\n"
        "    bmaas_instance_info: [1, 2, 3]\n"
    )
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(clouds))
    args = ["--db", str(tmp_path / "b.db"), "deploy", "--cloud", "lab", "-n", "1"]
    result = CliRunner().invoke(cli, args, obj=App(), catch_exceptions=False)
    assert_refused(result, 1)
    assert "bmaas_instance_info: must be a mapping" in result.stderr


# -- issue 23: endless input, in a process whose memory is capped -------------------

#: address space for the child: bmaas and its imports fit in well under this;
#: reading /dev/zero whole (17 GB seen) does not
MEMORY_CAP = 1536 * 1024 * 1024


def _run_capped(module: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    code = f"import sys; from {module} import main; sys.argv[0] = 'x'; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=cap,
        check=False,
    )


def _endless(tmp_path: Path, kind: str) -> str:
    if kind == "fifo":
        path = tmp_path / "pipe"
        os.mkfifo(path)
        return str(path)
    return "/dev/zero"


@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
@pytest.mark.parametrize("where", ["inventory", "password-file", "status-inventory", "lab-file"])
def test_endless_input_is_refused_with_bounded_memory(
    where: str, kind: str, tmp_path: Path
) -> None:
    path = _endless(tmp_path, kind)
    module, args = "bmaas.cli", ["--db", str(tmp_path / "b.db")]
    if where == "inventory":
        args += ["enroll", path, "--dry-run"]
    elif where == "password-file":
        inventory = tmp_path / "inv.yaml"
        inventory.write_text(IPMI_FILE_PASSWORD % path)
        args += ["enroll", str(inventory), "--dry-run"]
    elif where == "status-inventory":
        args += ["status", "check", "--inventory", path]
    else:
        module, args = (
            "bmaas.hwlab.cli",
            ["up", "--lab-file", path, "--state-dir", str(tmp_path / "s")],
        )
    done = _run_capped(module, args, tmp_path)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    assert "regular file" in lines[0]
    _no_database_left(tmp_path)


IPMI_FILE_PASSWORD = (
    "nodes:\n  - {name: n1, driver: ipmi, driver_info: "
    "{ipmi_address: 10.0.0.1, ipmi_username: a, ipmi_password: 'file:%s'}}\n"
)


def test_a_password_file_over_64_kib_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("x" * (64 * 1024 + 1))
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(IPMI_FILE_PASSWORD % secret)
    result = CliRunner().invoke(
        cli,
        ["--db", str(tmp_path / "b.db"), "enroll", str(inventory), "--dry-run"],
        obj=App(),
        catch_exceptions=False,
    )
    assert_refused(result, 1)
    assert "65537 bytes; at most 65536" in result.stderr


# -- issue 23: lab files and the lab's control API --------------------------------------

LAB_NUMBERS = [
    Case("probability-nan", "nodes:\n  - {name: a, faults: [{effect: busy, probability: .nan}]}\n"),
    Case("seconds-infinity", "nodes:\n  - {name: a, faults: [{effect: delay, seconds: .inf}]}\n"),
    Case("after-1e300", "nodes:\n  - {name: a, faults: [{effect: hang, after: 1e300}]}\n"),
    Case("power-on-time-nan", "nodes:\n  - {name: a, hardware: {power_on_time: .nan}}\n"),
    Case("power-on-time-two-days", "nodes:\n  - {name: a, hardware: {power_on_time: 172800}}\n"),
    Case("cpus-fraction", "nodes:\n  - {name: a, hardware: {cpus: 2.5}}\n"),
    Case("name-width-bomb", "nodes:\n  - {name: 'a{n:999999999d}', count: 2}\n"),
    Case("nul-byte", "nodes:\n  - {name: a\x00}\n"),
    Case("binary", b"\x01\x02\x03"),
    Case("fifo", None),
    Case(
        "proxy-port-unicode-digit",
        "nodes:\n  - name: a\n    proxy: {protocol: ipmi, upstream: 'h:\u00b2'}\n",
    ),
]


@pytest.mark.parametrize("case", LAB_NUMBERS, ids=[c.id for c in LAB_NUMBERS])
def test_a_bad_number_in_a_lab_file_is_one_line(case: Case, tmp_path: Path) -> None:
    path = _path(tmp_path, case)
    state = tmp_path / "state"
    args = ["up", "--lab-file", str(path), "--state-dir", str(state)]
    result = CliRunner().invoke(hwlab_cli, args, catch_exceptions=False)
    assert_refused(result, case.problems)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"rules": [{"effect": "busy", "probability": NaN}]}', "NaN"),
        (b'{"rules": [{"effect": "delay", "seconds": Infinity}]}', "Infinity"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"a": ' * 100_000 + b"1" + b"}" * 100_000, "nested too deeply"),
    ],
    ids=["nan", "infinity", "deep-list", "deep-object"],
)
def test_the_control_api_refuses_non_finite_numbers_and_deep_bodies(body: bytes, says: str) -> None:
    from bmaas.hwlab.control import ApiError, _body

    with pytest.raises(ApiError) as info:
        _body(body)
    assert info.value.status == 400
    assert says in str(info.value)


@pytest.mark.parametrize(
    "rule",
    [
        {"effect": "busy", "probability": float("nan")},
        {"effect": "delay", "seconds": float("inf")},
        {"effect": "hang", "after": 1e300},
        {"effect": "hang", "until": float("nan")},
        {"effect": "boot_crash", "operation": "power.set", "up_for": -1},
    ],
    ids=["probability-nan", "seconds-inf", "after-1e300", "until-nan", "up-for-negative"],
)
def test_fault_rules_refuse_non_finite_and_out_of_range_numbers(rule: dict[str, object]) -> None:
    from bmaas.fakes.faults import FaultRule
    from bmaas.faults import InputError

    with pytest.raises(InputError):
        FaultRule.from_dict(rule)


@pytest.mark.parametrize(
    "rule",
    [
        ["busy", "probability=.nan"],
        ["delay", "seconds=.inf"],
        ["hang", "after=1e300"],
        ["delay", "seconds=" + "9" * 5000],
        ["{effect: hang, x: \x01}"],
        ["{effect: hang, times: " + "[" * DEEP + "]" * DEEP + "}"],
    ],
    ids=["nan", "infinity", "after-1e300", "5000-digits", "binary", "deep"],
)
def test_a_bad_rule_on_the_command_line_is_one_line(rule: list[str], tmp_path: Path) -> None:
    args = ["fault", "add", "n1", *rule, "--state-dir", str(tmp_path / "state")]
    result = CliRunner().invoke(hwlab_cli, args, catch_exceptions=False)
    assert_refused(result, 1)
    assert "RULE" in result.stderr
