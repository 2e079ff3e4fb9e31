"""The ``[bmaas CODE retry=SCOPE]`` prefix: written by the Ironic driver, read
back by whoever sees Ironic's ``last_error``."""

from __future__ import annotations

import pytest

from bmaas import faulttext
from bmaas.faults import (
    FAULT_CLASSES,
    BMCAuthError,
    BMCBusy,
    InputError,
    PowerFailure,
    RetryScope,
    UnclassifiedFault,
)


def test_format_puts_code_and_scope_first_then_node_operation_address_elapsed() -> None:
    fault = BMCBusy(
        "completion code 0xC0",
        node="n1",
        driver="ipmi",
        operation="power.set",
        address="127.0.0.1:6230",
        elapsed=8.514,
    )
    text = faulttext.format_fault(fault)
    assert text.startswith("[bmaas bmc_busy retry=same_node] n1: power.set via ipmi 127.0.0.1:6230")
    assert "after 8.51s" in text


def test_format_is_one_line() -> None:
    text = faulttext.format_fault(InputError("two\nlines", field="driver_info.x"))
    assert "\n" not in text
    assert text.startswith("[bmaas input_error retry=never] ")


def test_format_never_carries_a_password_given_in_an_address() -> None:
    fault = BMCAuthError("rejected", node="n", address="https://admin:hunter2@10.0.0.1")
    text = faulttext.format_fault(fault)
    assert "hunter2" not in text
    assert "admin" not in text


@pytest.mark.parametrize("cls", sorted(FAULT_CLASSES.values(), key=lambda c: c.code))
def test_every_fault_class_round_trips(cls: type) -> None:
    parsed = faulttext.parse(faulttext.format_fault(cls("detail")))
    assert parsed is not None
    assert (parsed.code, parsed.cls, parsed.retry) == (cls.code, cls, cls.retry)
    assert isinstance(parsed.to_fault(), cls)


def test_parse_finds_the_prefix_inside_ironics_own_sentence() -> None:
    last_error = (
        "Failed to change power state to 'power on' by 'power on'. Error: "
        "[bmaas power_failure retry=other_node] n2: power.set via redfish after 3.10s: "
        "power state not reached"
    )
    parsed = faulttext.parse(last_error)
    assert parsed is not None
    assert parsed.cls is PowerFailure
    assert parsed.retry is RetryScope.OTHER_NODE
    assert parsed.detail.startswith("n2: power.set via redfish")


@pytest.mark.parametrize(
    "text", [None, "", "Failed to change power state: IPMI call failed: power status."]
)
def test_parse_returns_none_without_a_prefix(text: str | None) -> None:
    assert faulttext.parse(text) is None


def test_an_unknown_code_parses_as_unclassified_keeping_the_code() -> None:
    parsed = faulttext.parse("[bmaas bmc_on_fire retry=bogus] smoke")
    assert parsed is not None
    assert parsed.code == "bmc_on_fire"
    assert parsed.cls is UnclassifiedFault
    assert parsed.retry is UnclassifiedFault.retry
    assert parsed.detail == "smoke"
