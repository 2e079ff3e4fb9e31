"""Ironic's shared driver_info through bmaas's parse (bmaas.drivers.ironic.info).

No Ironic needed: the stock key list Ironic defines is replaced by a copy of
its shape; tests/ironic/ checks the same against a real Ironic."""

from __future__ import annotations

import pytest

from bmaas.drivers.ironic import info
from bmaas.faults import InputError

STOCK_IPMI = frozenset(
    {"ipmi_address", "ipmi_port", "ipmi_terminal_port", "ipmi_bridging", "ipmi_protocol_version"}
)


@pytest.fixture(autouse=True)
def stock_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(info, "ironic_keys", lambda protocol: STOCK_IPMI)


def test_keys_of_other_interfaces_and_stock_only_keys_are_ignored() -> None:
    parsed = info.parse_driver_info(
        {
            "ipmi_address": "10.0.0.5",
            "ipmi_port": "6230",
            "ipmi_password": "pw",
            "deploy_kernel": "file:///k",
            "ipmi_terminal_port": 9000,
            "redfish_address": "https://x",
        },
        "ipmi",
        node="n1",
    )
    assert (parsed.ipmi_address, parsed.ipmi_port) == ("10.0.0.5", 6230)
    assert parsed.redfish_address is None  # another protocol's key: not this type's business
    assert "pw" not in repr(parsed)


def test_a_misspelled_key_of_its_own_fails_with_did_you_mean() -> None:
    with pytest.raises(InputError) as caught:
        info.parse_driver_info({"ipmi_address": "h", "ipmi_pasword": "pw"}, "ipmi", node="n1")
    assert caught.value.field == "driver_info.ipmi_pasword"
    assert "did you mean 'ipmi_password'" in str(caught.value)


def test_a_missing_required_key_is_named() -> None:
    with pytest.raises(InputError) as caught:
        info.parse_driver_info({"deploy_kernel": "x"}, "ipmi", node="n1")
    assert caught.value.field == "driver_info.ipmi_address"


def test_a_bad_value_is_named_without_the_password() -> None:
    with pytest.raises(InputError) as caught:
        info.parse_driver_info(
            {"ipmi_address": "h", "ipmi_port": "nope", "ipmi_password": "hunter2"},
            "ipmi",
            node="n1",
        )
    assert caught.value.field == "driver_info.ipmi_port"
    assert "hunter2" not in str(caught.value)
