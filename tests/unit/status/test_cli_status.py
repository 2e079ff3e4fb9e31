"""``bmaas status check`` as an operator runs it: the table, JSON, exit codes,
``--only``, the inventory variable, and never a password in the output."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bmaas.cli import App, cli
from bmaas.status import CHECKS, Check, CheckContext, Outcome, run_checks
from bmaas.status import Result as Verdict
from tests.core.backends import CoreFleet, fake_fleet

Bmaas = Callable[..., Result]


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CoreFleet]:
    """Six stub IPMI/Redfish nodes: inline IPMI passwords, Redfish ones from
    the environment, Redfish TLS verification off (as hwlab's plain labs)."""
    with fake_fleet(tmp_path, monkeypatch) as built:
        yield built


@pytest.fixture
def bmaas(fleet: CoreFleet, tmp_path: Path) -> Bmaas:
    db = str(tmp_path / "bmaas.db")

    def invoke(*args: str, expect: int | None = None) -> Result:
        app = App(db=db, make_factory=fleet.make_factory)
        result = CliRunner().invoke(cli, list(args), obj=app, catch_exceptions=False)
        if expect is not None:
            assert result.exit_code == expect, result.stdout + result.stderr
        return result

    invoke("enroll", str(fleet.inventory), expect=0)
    return invoke


def rows(result: Result) -> dict[str, tuple[str, str]]:
    """CHECK -> (RESULT, first detail) from the table."""
    out = {}
    for line in result.stdout.splitlines()[1:]:
        if line.startswith(" "):
            continue
        name, verdict, detail = line.split(None, 2)
        out[name] = (verdict, detail)
    return out


def test_the_table_names_every_check_in_order_and_the_exit_code_is_the_worst(
    bmaas: Bmaas, fleet: CoreFleet
) -> None:
    result = bmaas("status", "check", "--only", "database,bmc,power,boot,tls")
    header = result.stdout.splitlines()[0]
    assert header.split() == ["CHECK", "RESULT", "DETAILS"]
    table = rows(result)
    assert list(table) == ["database", "bmc", "power", "boot", "tls"]
    assert {v for name, (v, _) in table.items() if name != "tls"} == {"Success"}
    # The fake fleet's Redfish nodes skip TLS verification, as a plain lab does.
    assert table["tls"][0] == "Warning"
    assert result.exit_code == 1
    assert "5 check(s): 4 success, 1 warning, 0 failure" in result.stderr


def test_all_success_exits_0(bmaas: Bmaas) -> None:
    result = bmaas("status", "check", "--only", "database", "--only", "bmc,maintenance")
    assert result.exit_code == 0
    assert list(rows(result)) == ["database", "bmc", "maintenance"]


def test_a_failure_exits_2_with_details_under_their_check(bmaas: Bmaas, fleet: CoreFleet) -> None:
    fleet.add_rule(fleet.names[0], {"effect": "hang"})
    fleet.add_rule(fleet.names[1], {"effect": "auth_fail"})
    result = bmaas("status", "check", "--only", "bmc")
    assert result.exit_code == 2
    lines = result.stdout.splitlines()
    assert lines[1].split()[:2] == ["bmc", "Failure"]
    indent = lines[1].index(lines[1].split()[2])
    assert all(line[:indent].isspace() for line in lines[2:])
    text = result.stdout
    auth = "1 node(s) rejected the credentials (rotated password? bad user or privilege?)"
    assert f"{auth}: {fleet.names[1]}" in text
    # --deadline 30: each BMC call gets a quarter of the 29 s sweep budget
    assert f"did not answer in time (7.25s per call): {fleet.names[0]}" in text


def test_json_for_machines(bmaas: Bmaas, fleet: CoreFleet) -> None:
    fleet.add_rule(fleet.names[2], {"effect": "busy", "operation": "probe"})
    result = bmaas("status", "check", "--json", "--only", "bmc,drivers")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert (report["result"], report["exit_code"], report["deadline"]) == ("Warning", 1, 30.0)
    assert [c["name"] for c in report["checks"]] == ["drivers", "bmc"]
    bmc = report["checks"][1]
    assert bmc["result"] == "Warning"
    assert bmc["nodes"] == {"busy": [fleet.names[2]]}
    assert set(bmc) == {"name", "result", "details", "nodes", "elapsed"}
    assert result.stderr == ""


def test_an_unknown_check_is_an_error_listing_the_known_ones(bmaas: Bmaas) -> None:
    result = bmaas("status", "check", "--only", "bmcs", expect=2)
    known = ", ".join(c.name for c in CHECKS)
    assert result.stderr.strip() == (
        f"error: --only: no check 'bmcs'; did you mean 'bmc'? known: {known}"
    )
    assert result.stdout == ""


def test_the_inventory_comes_from_the_environment_too(
    bmaas: Bmaas, fleet: CoreFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BMAAS_INVENTORY", str(fleet.inventory))
    result = bmaas("status", "check", "--only", "inventory", expect=0)
    assert f"the {len(fleet.names)} node(s) in {fleet.inventory} are the enrolled ones" in (
        result.stdout
    )


def test_no_password_ever_reaches_the_output(
    bmaas: Bmaas,
    fleet: CoreFleet,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in fleet.names[:3]:
        fleet.add_rule(name, {"effect": "auth_fail"})
    outputs = [bmaas("status", "check"), bmaas("status", "check", "--json")]
    monkeypatch.delenv("BMAAS_TEST_REDFISH_PW")  # the Redfish nodes cannot even be asked now
    outputs.append(bmaas("status", "check", "--json"))
    assert "environment variable BMAAS_TEST_REDFISH_PW is not set" in outputs[-1].stdout
    everything = "\n".join(r.stdout + r.stderr for r in outputs) + caplog.text
    for secret in fleet.secrets:
        assert secret not in everything
    assert all(r.exit_code == 2 for r in outputs)


def test_a_broken_check_is_a_failure_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(ctx: CheckContext) -> Outcome:
        raise KeyError("a bug")

    def fine(ctx: CheckContext) -> Outcome:
        return Outcome().note("all good")

    checks = (Check("broken", "raises", broken), Check("fine", "works", fine))
    results = run_checks(CheckContext("sqlite:///:memory:"), checks)
    assert [r.result for r in results] == [Verdict.FAILURE, Verdict.SUCCESS]
    assert "the check itself failed (KeyError: 'a bug')" in results[0].details[0]
    assert "the broken check failed" in caplog.text
    with pytest.raises(KeyError):
        run_checks(CheckContext("sqlite:///:memory:"), checks, debug=True)
