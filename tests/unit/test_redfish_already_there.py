"""The Redfish driver's "already in the requested state" handling, on the
real answer bodies: a 400/409 to an idempotent power action re-reads the
power state once; at (or heading to) the target it is success, otherwise the
answer's own fault. A reset is never re-read into a success."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sushy
import sushy.exceptions as sushy_exc

from bmaas.driver import PowerAction
from bmaas.driver_info import DriverInfo
from bmaas.drivers.redfish import RedfishDriver
from tests.budgets import ask
from tests.unit.test_redfish_faults import http_error

FIXTURES = Path(__file__).parent.parent / "fixtures" / "incidents"


def _answer(name: str) -> sushy_exc.HTTPError:
    fixture = json.loads((FIXTURES / f"{name}.json").read_text())
    return http_error(fixture["status"], fixture["body"])


class StubSystem:
    """A ComputerSystem whose reset is refused and whose reads follow ``reads``."""

    def __init__(self, reads: list[Any], refusal: Exception) -> None:
        self.reads = reads
        self.power_state = reads.pop(0)
        self.refusal = refusal
        self.resets: list[Any] = []
        self.refreshes = 0

    path = "/redfish/v1/Systems/1"
    json: dict[str, Any] = {
        "Actions": {
            "#ComputerSystem.Reset": {
                "target": "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
                "ResetType@Redfish.AllowableValues": ["On", "ForceOff", "ForceRestart"],
            }
        }
    }

    def invalidate(self) -> None:
        pass

    def refresh(self, force: bool = False) -> None:
        self.refreshes += 1
        self.power_state = self.reads.pop(0)


class StubConnector:
    """Where the driver POSTs the reset: refuses it, as the system says."""

    def __init__(self, system: StubSystem) -> None:
        self.system = system

    def post(self, path: str, data: dict[str, Any]) -> None:
        assert path.endswith("/Actions/ComputerSystem.Reset")
        self.system.resets.append(sushy.ResetType(data["ResetType"]))
        raise self.system.refusal


def _driver(system: StubSystem) -> RedfishDriver:
    info = DriverInfo(
        redfish_address="https://10.0.0.9", redfish_username="u", redfish_password="p"
    )
    driver = RedfishDriver("r1-n09", info)
    driver._system = system  # type: ignore[assignment]
    driver._svc = SimpleNamespace(conn=StubConnector(system))  # type: ignore[assignment]
    driver._call = lambda operation, deadline, act, read: act()  # type: ignore[method-assign]
    return driver


OFF, ON, POWERING_ON = sushy.PowerState.OFF, sushy.PowerState.ON, sushy.PowerState.POWERING_ON


@pytest.mark.parametrize("name", ["idrac-already-on", "ilo-already-on"])
@pytest.mark.parametrize("now", [ON, POWERING_ON])
def test_already_on_is_success_after_one_reread(name: str, now: Any) -> None:
    system = StubSystem([OFF, OFF, now], _answer(name))
    ask(_driver(system).request_power, PowerAction.ON)
    assert system.resets == [sushy.ResetType.ON]
    assert system.refreshes == 2  # the read before acting, and the one re-read


def test_a_conflict_while_still_off_is_the_answers_fault() -> None:
    refusal = _answer("idrac10-power-on-conflict")
    system = StubSystem([OFF, OFF, OFF], refusal)
    with pytest.raises(sushy_exc.HTTPError) as info:
        ask(_driver(system).request_power, PowerAction.ON)
    assert info.value is refusal  # mapped at the edge to BMCBusy (test_incident_classes)


def test_a_reset_is_never_reread_into_success() -> None:
    system = StubSystem([ON, ON, ON], _answer("idrac-already-on"))
    with pytest.raises(sushy_exc.HTTPError):
        ask(_driver(system).request_power, PowerAction.REBOOT)
    assert system.refreshes == 1  # only the read before acting
