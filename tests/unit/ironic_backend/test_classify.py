"""The classification table: stock Ironic messages and bmaas's prefix -> typed faults."""

from __future__ import annotations

import pytest

from bmaas.drivers.ironic_backend.classify import Evidence, classify, classify_text, recent_errors
from bmaas.faults import (
    BMCAuthError,
    BMCBusy,
    BMCInternalError,
    BMCTimeout,
    BMCUnreachable,
    BootFailure,
    InputError,
    PowerFailure,
    UnclassifiedFault,
)

# What Ironic 39.0.0 wrote on this machine (issue 15's measurements), verbatim where known.
STOCK = [
    (
        "Failed to change power state to 'power on' by 'power on'. Error: IPMI call failed: "
        "power status.",
        BMCUnreachable,
    ),
    (
        "Failed to change power state to 'power on'. Error: HTTP POST "
        "https://127.0.0.1:8000/redfish/v1/Systems/x/Actions/ComputerSystem.Reset returned "
        "code 503. Base.1.0.GeneralError: ServiceTemporarilyUnavailable",
        BMCBusy,
    ),
    (
        "Redfish exception occurred. Error: HTTP GET https://127.0.0.1:8000/redfish/v1/Systems "
        "returned code 401. Base.1.0.GeneralError: Unauthorized",
        BMCAuthError,
    ),
    (
        "Failed to change power state. Error: HTTP POST https://h/x returned code 500. "
        "Base.1.0.GeneralError: InternalError",
        BMCInternalError,
    ),
    ("Failed to set node power state to power on.", PowerFailure),
    (
        "Deploy step deploy.deploy failed: Validation of image href file:///tmp/k failed, "
        "reason: Security: Path /tmp/k is not allowed for image source file URLs.",
        InputError,
    ),
    ("Timeout reached while waiting for callback for node 1be2", BootFailure),
    ("Read timed out. (read timeout=60)", BMCTimeout),
    ("Failed to set boot device to PXE: some reason", BootFailure),
    (
        "Unable to connect to https://127.0.0.1:1: HTTPSConnectionPool: Max retries exceeded "
        "(Caused by NewConnectionError: Failed to establish a new connection: Connection refused)",
        BMCUnreachable,
    ),
]


@pytest.mark.parametrize(("text", "expected"), STOCK)
def test_stock_messages_map_by_table(text: str, expected: type) -> None:
    fault = classify_text(text, node="n1")
    assert type(fault) is expected
    assert fault is not None
    assert getattr(fault, "node", None) == "n1"


def test_bmaas_prefix_is_exact_wherever_ironic_wraps_it() -> None:
    text = (
        "Failed to change power state to 'power on' by 'power on'. Error: "
        "[bmaas bmc_busy retry=same_node] node-3: power.set via ipmi 127.0.0.1:623 after 8.51s: "
        "BMC busy"
    )
    fault = classify_text(text, node="node-3")
    assert type(fault) is BMCBusy
    assert fault.node == "node-3"
    # the prefix wins over the stock table, whose "power state" rows would also match
    assert classify_text("Failed to set node power state: [bmaas bmc_timeout retry=same_node] x")
    assert type(classify_text("[bmaas bmc_timeout retry=same_node] x")) is BMCTimeout


def test_unknown_bmaas_code_is_unclassified_not_dropped() -> None:
    assert type(classify_text("[bmaas brand_new_fault retry=other_node] x")) is UnclassifiedFault


def test_nothing_matches_is_unclassified_and_keeps_the_text() -> None:
    fault = classify(Evidence("n1", driver="ipmi", last_error="the flux capacitor is cold"))
    assert type(fault) is UnclassifiedFault
    assert "flux capacitor" in str(fault)


def test_history_speaks_before_last_error_and_newest_first() -> None:
    # the power sync cleared last_error; history still has the fault
    history = [
        {"created_at": "2026-01-01T00:00:00", "severity": "ERROR", "event": "IPMI call failed"},
        {"created_at": "2026-01-02T00:00:01", "severity": "INFO", "event": "Deploy started"},
        {"created_at": "2026-01-02T00:00:05", "severity": "ERROR", "event": "code 503"},
        {
            "created_at": "2026-01-02T00:00:09",
            "severity": "ERROR",
            "event": "[bmaas power_failure retry=other_node] n1: power.set",
        },
    ]
    since = "2026-01-02T00:00:00"
    events = recent_errors(history, since)
    assert events[0].startswith("[bmaas power_failure")
    assert not any("IPMI" in e for e in events)  # an old failure never speaks for this attempt
    fault = classify(Evidence("n1", last_error=None, history=events))
    assert type(fault) is PowerFailure


def test_fallback_when_ironic_says_nothing() -> None:
    mine = BMCTimeout("still deploying at the deadline", node="n1")
    assert classify(Evidence("n1", provision_state="deploying"), fallback=mine) is mine
