"""Every ``--json`` output keeps one shape per concept (docs/operator.md, "JSON
output"): a boot setting is always ``{"device", "persistent"}``, a power state
always one of PowerState's values, a fault always ``{"class", "code", ...}``;
and after deploy/undeploy the recorded power state is the one left behind."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from click.testing import Result

from bmaas.cli.app import progress_lines
from bmaas.driver import BootDevice, PowerState
from tests.core.backends import CoreFleet

Bmaas = Callable[..., Result]
QUICK = ("--settle", "0.3", "--power-timeout", "5", "--bmc-timeout", "1")
POWER = {s.value for s in PowerState}
DEVICES = {d.value for d in BootDevice}


def walk(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    yield key, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from walk(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from walk(v, key)


def check_shapes(doc: Any) -> None:
    for key, value in walk(doc):
        if isinstance(value, str):
            # the old stringified boot setting ("disk (persistent)") never again
            assert not any(value.startswith(f"{d} (") for d in DEVICES), (key, value)
        if key in ("power_state", "power") and value is not None:
            assert value in POWER, (key, value)
        if key == "fault" and isinstance(value, dict):
            assert {"class", "code"} <= set(value), value
        if isinstance(value, dict) and "attempt_details" in value:
            # ``attempts`` means one thing: every node tried (the one that worked
            # included), i.e. the library's history minus refusals
            details = value["attempt_details"]
            assert value["attempts"] == sum(d["outcome"] != "refused" for d in details), value
            assert value["refused"] == sum(d["outcome"] == "refused" for d in details), value
            assert [d["outcome"] == "succeeded" for d in details][-1:] == [value["ok"]], value
        if isinstance(value, dict) and "device" in value:
            assert set(value) == {"device", "persistent"}, value
            assert value["device"] in DEVICES
            assert isinstance(value["persistent"], bool)


def test_every_json_output_keeps_one_shape(bmaas: Bmaas, fleet: CoreFleet) -> None:
    node = fleet.names[0]
    outputs = [
        bmaas("enroll", str(fleet.inventory), "--json"),
        bmaas("enroll", str(fleet.inventory), "--dry-run", "--json"),
        bmaas("drivers", "--json"),
        bmaas("node", "list", "--json"),
        bmaas("node", "show", node, "--json"),
        bmaas("power", "status", "--all", "--json"),
        bmaas("power", "on", node, "--json", "--timeout", "5"),
        bmaas("boot-device", "set", node, "--device", "disk", "--persistent", "--json"),
        bmaas("boot-device", "get", node, "--json"),
        bmaas("db", "current", "--json"),
        bmaas("deploy", "-n", "1", "--name-prefix", "j", *QUICK, "--json"),
        bmaas("instance", "list", "--json"),
        bmaas("status", "check", "--json", "--only", "database,power", expect=None),
        bmaas("undeploy", "j-001", *QUICK, "--json"),
    ]
    docs = [json.loads(out.stdout) for out in outputs]
    for doc in docs:
        check_shapes(doc)
    boot_set, boot_get = docs[7]["results"][0]["result"], docs[8]["results"][0]["result"]
    assert boot_set == boot_get == {"device": "disk", "persistent": True}
    (row,) = docs[10]["requests"]  # a first-try success is one attempt, as in the library
    assert row["attempts"] == 1
    assert [(d["node"], d["outcome"]) for d in row["attempt_details"]] == [
        (row["node"], "succeeded")
    ]
    undeployed = docs[13]
    assert undeployed["instances"] == [
        {
            "instance": "j-001",
            "ok": True,
            "status": "released",
            "nodes": [row["node"]],
            "fenced": [],
        }
    ]
    assert (undeployed["ok"], undeployed["failed"]) == (1, 0)


def test_deploy_and_undeploy_record_the_power_state_they_leave(
    bmaas: Bmaas, fleet: CoreFleet
) -> None:
    bmaas("enroll", str(fleet.inventory))
    report = json.loads(bmaas("deploy", "-n", "1", "--name-prefix", "p", *QUICK, "--json").stdout)
    node = report["requests"][0]["node"]
    assert json.loads(bmaas("node", "show", node, "--json").stdout)["power_state"] == "on"
    bmaas("undeploy", "p-001", *QUICK)
    assert json.loads(bmaas("node", "show", node, "--json").stdout)["power_state"] == "off"


def test_undeploy_json_names_the_node_it_fenced(bmaas: Bmaas, fleet: CoreFleet) -> None:
    bmaas("enroll", str(fleet.inventory))
    report = json.loads(bmaas("deploy", "-n", "1", "--name-prefix", "u", *QUICK, "--json").stdout)
    node = report["requests"][0]["node"]
    fleet.add_rule(node, {"effect": "malformed_reply", "operation": "power.set"})
    # exit 1: a node was fenced, the command did not do all it was asked (issue 36)
    out = json.loads(bmaas("undeploy", "u-001", *QUICK, "--json", expect=1).stdout)
    check_shapes(out)
    (row,) = out["instances"]
    assert row["instance"] == "u-001"
    # released, but the node would not power off: fenced, the step's fault recorded
    assert (row["ok"], row["status"], row["nodes"]) == (True, "released", [node])
    (fenced,) = row["fenced"]
    assert (fenced["node"], fenced["reason"]) == (node, "undeploy failure")
    assert "power.set" in fenced["last_error"]
    assert "malformed" in fenced["last_error"]
    assert (out["ok"], out["failed"], out["fenced"]) == (1, 0, 1)


def test_undeploy_keeps_the_instance_when_the_fault_is_not_the_nodes(
    bmaas: Bmaas, fleet: CoreFleet
) -> None:
    """Rejected credentials say nothing about the node (the policy row does
    not fence): the node is not fenced, the instance keeps it (it may still
    run), the row is ``failed`` and the command exits 1; once the password
    works, undeploying again releases it."""
    bmaas("enroll", str(fleet.inventory))
    report = json.loads(bmaas("deploy", "-n", "1", "--name-prefix", "k", *QUICK, "--json").stdout)
    node = report["requests"][0]["node"]
    fleet.add_rule(node, {"effect": "auth_fail"})
    out = json.loads(bmaas("undeploy", "k-001", *QUICK, "--json", expect=1).stdout)
    check_shapes(out)
    (row,) = out["instances"]
    assert (row["ok"], row["status"], row["fenced"]) == (False, "failed", [])
    assert row["fault"]["class"] == "BMCAuthError"
    assert (out["failed"], out["fenced"]) == (1, 0)
    shown = json.loads(bmaas("node", "show", node, "--json").stdout)
    assert shown["maintenance"] is False
    assert "k-001" in bmaas("instance", "list", "--json").stdout  # kept, with its node
    fleet.clear_rules(node)
    again = json.loads(bmaas("undeploy", "k-001", *QUICK, "--json").stdout)
    assert (again["ok"], again["failed"], again["fenced"]) == (1, 0, 0)


@pytest.mark.parametrize("tty", [True, False])
def test_progress_lines_only_on_a_terminal(
    tty: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stderr.isatty", lambda: tty)
    with progress_lines(2, quiet=False, line=str) as tick:
        tick("a: active on n1")
        tick("b: FAILED")
    with progress_lines(2, quiet=True, line=str) as tick:  # --json
        tick("never")
    err = capsys.readouterr().err.splitlines()
    assert err == (["[1/2] a: active on n1", "[2/2] b: FAILED"] if tty else [])
