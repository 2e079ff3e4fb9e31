"""hwlab's ``session_limit`` effect: a BMC that holds at most N sessions
refuses the next login as the field does -- Redfish 503 with
``@Message.ExtendedInfo`` naming SessionLimitExceeded (or iDRAC's RAC0218),
IPMI Open Session with RMCP+ status 0x01 -- which bmaas's drivers classify as
``BMCBusy``; each refusal is one firing in the event log, a login let in is
none. Issue 24."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from bmaas.fakes.faults import FaultRule, Firing
from bmaas.fakes.machine import FakeMachine
from bmaas.faults import BMCBusy
from bmaas.hwlab.redfish import RedfishServer
from tests.budgets import ask
from tests.lab.conftest import PASSWORD, USER
from tests.lab.conftest import Lab as IpmiLab
from tests.lab.redfish_support import HARDWARE, driver_for
from tests.lab.redfish_support import PASSWORD as RF_PASSWORD
from tests.lab.redfish_support import USERNAME as RF_USERNAME

pytestmark = pytest.mark.lab


def limit(machine: FakeMachine, sessions: int, **params: Any) -> list[Firing]:
    machine.plan.add(
        FaultRule.from_dict(
            {"effect": "session_limit", "operation": "login", "sessions": sessions, **params}
        )
    )
    fired: list[Firing] = []
    machine.plan.listeners.append(fired.append)
    return fired


@pytest.fixture
def redfish() -> Iterator[tuple[RedfishServer, FakeMachine, int]]:
    with RedfishServer() as server:
        machine = FakeMachine("rf-limit", HARDWARE)
        port = server.add(machine, username=RF_USERNAME, password=RF_PASSWORD)
        yield server, machine, port


def test_redfish_login_beyond_the_limit_is_a_503_naming_rac0218(
    redfish: tuple[RedfishServer, FakeMachine, int],
) -> None:
    server, machine, port = redfish
    fired = limit(machine, 1, message_id="IDRAC.2.8.RAC0218")
    login = f"{server.url(port)}/redfish/v1/SessionService/Sessions"
    body = {"UserName": RF_USERNAME, "Password": RF_PASSWORD}
    first = requests.post(login, json=body, timeout=5)  # another client holds the one slot
    assert first.status_code == 201
    assert fired == []  # let in: no firing
    driver = driver_for(server, port, redfish_auth_type="session")
    try:
        with pytest.raises(BMCBusy, match="503"):
            ask(driver.get_power_state)
        refused = requests.post(login, json=body, timeout=5)
        assert refused.status_code == 503
        info = refused.json()["error"]["@Message.ExtendedInfo"]
        assert info[0]["MessageId"] == "IDRAC.2.8.RAC0218"
        assert [f.effect for f in fired] == ["session_limit", "session_limit"]
        # the other client logs out: the slot is free again
        gone = requests.delete(
            f"{server.url(port)}{first.headers['Location']}",
            headers={"X-Auth-Token": first.headers["X-Auth-Token"]},
            timeout=5,
        )
        assert gone.status_code in (200, 204)
        assert ask(driver.get_power_state) is not None
        assert len(fired) == 2
    finally:
        driver.close()


def _ipmitool(lab: IpmiLab, *args: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("ipmitool") or pytest.fail("ipmitool is not installed")
    command = [tool, "-I", "lanplus", "-H", "127.0.0.1", "-p", str(lab.server.endpoints["n1"])]
    command += ["-U", USER, "-P", PASSWORD, "-C", "17", "-N", "1", "-R", "1", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=15, check=False)


def test_ipmi_login_beyond_the_limit_is_rmcp_status_1(lab: IpmiLab) -> None:
    machine = lab.machine()
    fired = limit(machine, 1)
    driver = lab.driver()
    ask(driver.get_power_state)  # bmaas holds the one session (kept: a pooled session)
    assert fired == []
    refused = _ipmitool(lab, "power", "status")  # another client: no slot
    assert refused.returncode != 0
    assert "insufficient resources" in (refused.stderr + refused.stdout).lower()
    assert [f.effect for f in fired] == ["session_limit"]
    ask(driver.get_power_state)  # the session bmaas holds is never refused
    driver.close()
    strict = lab.driver()
    limit(machine, 0)
    with pytest.raises(BMCBusy):
        ask(strict.get_power_state)
    assert json.dumps(fired[0].to_dict())  # the event log records each refusal
