"""A corpus of bad input: malformed inventories, lab files, database URLs
and paths. Each must be refused with exit 2, exactly one ``error:`` line per
problem (all of them in one pass), no traceback, and no database created."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas.cli import App, cli
from hwlab.cli import cli as hwlab_cli

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
]

#: --db values that cannot be used; the psycopg case hides the package
DB_URLS = [
    ("psycopg-not-installed", "postgresql+psycopg://bmaas@127.0.0.1:1/bmaas", "psycopg"),
    ("postgresql-default-driver", "postgresql://bmaas@127.0.0.1:1/bmaas", "psycopg"),
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
    if case.id == "directory":
        path.mkdir()
    elif case.id == "missing-file":
        pass
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
        assert f"pip install '{hide}[binary]'" in result.stderr


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
