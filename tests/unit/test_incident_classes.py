"""Field incidents, classified by meaning: every mapping row on the real answer body.

Each fixture under ``tests/fixtures/incidents/`` is a vendor's answer as a
public report quotes it (the file names its source). The Redfish mapping
table must give each the class that says what to do; and hwlab's incident
catalogue, which replays these answers, must be classified the same way, so
the lab and the field cannot drift apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bmaas.drivers.ipmi.classify import COMPLETION_CODES, RMCP_STATUS
from bmaas.drivers.redfish.faults import MESSAGE_RULES, map_exception, may_be_already_there
from bmaas.fakes.incidents import INCIDENTS
from bmaas.faults import BMCAuthError, BMCBusy, BMCFault, UnsupportedOperation
from bmaas.policy import policy_for
from tests.unit.test_redfish_faults import SYSTEM, build, http_error

__all__ = ["build"]  # the fixture, imported for pytest

FIXTURES = Path(__file__).parent.parent / "fixtures" / "incidents"

#: fixture -> (class one call gives, whether a power action re-reads first)
EXPECTED: dict[str, tuple[type[BMCFault], bool]] = {
    "idrac10-power-on-conflict": (BMCBusy, True),
    "ilo-post-window": (BMCBusy, True),
    "ilo-settling": (BMCBusy, True),
    "ilo-already-on": (BMCBusy, True),
    "idrac-lc-busy": (BMCBusy, False),
    "idrac-already-on": (BMCBusy, True),
    "idrac-session-limit": (BMCBusy, False),
    "idrac-licence": (UnsupportedOperation, False),
    "supermicro-licence": (UnsupportedOperation, False),
}


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return data


def test_every_fixture_is_expected_and_names_its_source() -> None:
    names = {p.stem for p in FIXTURES.glob("*.json")}
    assert names == set(EXPECTED)
    assert all(load(n)["source"] for n in names)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_answer_maps_to_its_class(build, name: str) -> None:
    fixture = load(name)
    exc = http_error(fixture["status"], fixture["body"])
    fault = map_exception(exc, build, node="r1-n09", system=SYSTEM)
    cls, rereads = EXPECTED[name]
    assert type(fault) is cls, str(fault)
    assert may_be_already_there(exc) is rereads
    assert not isinstance(fault, BMCAuthError)  # a licence or a session limit is no bad password


@pytest.mark.parametrize("name", ["idrac-licence", "supermicro-licence"])
def test_licence_is_unsupported_never_retried_never_counted(build, name: str) -> None:
    fixture = load(name)
    fault = map_exception(
        http_error(fixture["status"], fixture["body"]), build, node="n", system=SYSTEM
    )
    row = policy_for(fault)
    assert not row.retried_here
    assert not row.counts_for_health
    assert "LIC501" in str(fault) or "OemLicenseNotPassed" in str(fault)


@pytest.mark.parametrize("name", ["idrac10-power-on-conflict", "ilo-post-window", "idrac-lc-busy"])
def test_transient_windows_retry_here_and_never_count(build, name: str) -> None:
    fixture = load(name)
    fault = map_exception(
        http_error(fixture["status"], fixture["body"]), build, node="n", system=SYSTEM
    )
    row = policy_for(fault)
    assert row.retried_here
    assert not row.counts_for_health


#: incidents the driver's table does not classify yet (strict: passes once it does)
UNMAPPED: dict[str, str] = {}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(reason=UNMAPPED[n], strict=True))
        if n in UNMAPPED
        else n
        for n in sorted(n for n, i in INCIDENTS.items() if i.redfish)
    ],
)
def test_the_lab_replays_what_the_table_classifies(build, name: str) -> None:
    incident = INCIDENTS[name]
    assert incident.redfish is not None
    headers = dict(incident.redfish.headers)
    exc = http_error(incident.redfish.status, dict(incident.redfish.body), headers)
    fault = map_exception(exc, build, node="n", system=SYSTEM)
    if incident.executes:
        # the node took the action: the driver re-reads and succeeds
        assert may_be_already_there(exc)
    else:
        assert type(fault) is incident.fault, str(fault)


@pytest.mark.parametrize("name", ["idrac-already-on", "idrac-session-limit", "supermicro-licence"])
def test_the_lab_sends_the_verbatim_bodies(name: str) -> None:
    reply = INCIDENTS[name].redfish
    assert reply is not None
    assert reply.status == load(name)["status"]
    assert dict(reply.body) == load(name)["body"]


@pytest.mark.parametrize("name", sorted(n for n, i in INCIDENTS.items() if i.ipmi_code))
def test_ipmi_incident_codes_are_classified_as_the_catalogue_says(name: str) -> None:
    incident = INCIDENTS[name]
    assert incident.ipmi_code is not None
    assert COMPLETION_CODES[incident.ipmi_code] is incident.fault


def test_rmcp_no_session_slot_is_busy() -> None:
    incident = INCIDENTS["ipmi-no-session-slot"]
    assert incident.rmcp_status is not None
    assert RMCP_STATUS[incident.rmcp_status] is BMCBusy is incident.fault


def test_every_message_rule_names_its_source() -> None:
    assert all(rule.source for rule in MESSAGE_RULES)


def test_every_incident_names_its_source_and_a_protocol() -> None:
    for incident in INCIDENTS.values():
        assert incident.source, incident.name
        assert incident.protocols, incident.name


def test_a_session_limit_naming_rac0218_answers_with_idracs_own_body() -> None:
    """The count is the trigger (session_limit), the vendor's documented
    answer the reply: iDRAC's whole RAC0218 body, which maps to BMCBusy."""
    from bmaas.fakes.effects import Effect
    from bmaas.fakes.faults import Firing
    from bmaas.hwlab.answers import redfish_answer

    rac = Firing(
        0.0,
        "n1",
        "redfish",
        "login",
        Effect.SESSION_LIMIT,
        "r",
        {"sessions": 2, "message_id": "IDRAC.2.1.RAC0218"},
    )
    answer = redfish_answer(rac, "POST")
    assert answer is not None
    assert answer.status == 503
    assert b"The maximum number of user sessions is reached." in answer.body
    generic = Firing(
        0.0,
        "n1",
        "redfish",
        "login",
        Effect.SESSION_LIMIT,
        "r",
        {"sessions": 2, "message_id": "Base.1.8.SessionLimitExceeded"},
    )
    plain = redfish_answer(generic, "POST")
    assert plain is not None
    assert b"Base.1.8.SessionLimitExceeded" in plain.body
