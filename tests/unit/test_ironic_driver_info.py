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


# -- every problem at once (issue 36) ----------------------------------------------


def test_every_problem_is_named_at_once_one_line_each_in_the_node_s_key_order() -> None:
    raw = {
        "ipmi_port": "nope",
        "deploy_kernel": "file:///k",  # another interface's: ignored
        "ipmi_pasword": "hunter2",  # a typo of a key it knows
        "ipmi_cipher_suite": 0,
        "ipmi_priv_level": "root",
        "ipmi_username": "",
        "ipmi_password": ["hunter2"],
    }
    with pytest.raises(info.DriverInfoProblems) as caught:
        info.parse_driver_info(raw, "ipmi", node="n1")
    fault = caught.value
    assert not isinstance(fault, info.MissingDriverInfo)  # bad values: InvalidParameterValue
    assert [p.field for p in fault.problems] == [
        "driver_info.ipmi_port",
        "driver_info.ipmi_pasword",
        "driver_info.ipmi_cipher_suite",
        "driver_info.ipmi_priv_level",
        "driver_info.ipmi_username",
        "driver_info.ipmi_password",
        "driver_info.ipmi_address",  # missing: last
    ]
    assert len(fault.lines) == 7
    for line, problem in zip(fault.lines, fault.problems, strict=True):
        assert "\n" not in line
        assert line.startswith(f"node 'n1': {problem.field}: ")
    assert "did you mean 'ipmi_password'" in fault.lines[1]
    assert "must be a non-empty string" in fault.lines[4]
    assert str(fault).startswith("node 'n1': driver_info: 7 problems (ipmi_port, ipmi_pasword,")
    everything = "\n".join([str(fault), *fault.lines, repr(fault)])
    assert "hunter2" not in everything


def test_only_missing_keys_is_missing_driver_info() -> None:
    with pytest.raises(info.MissingDriverInfo) as caught:
        info.parse_driver_info({"ipmi_address": None, "deploy_kernel": "x"}, "ipmi", node="n1")
    assert [p.field for p in caught.value.problems] == ["driver_info.ipmi_address"]
    assert caught.value.lines == ["node 'n1': driver_info.ipmi_address: is required, not null"]


def test_a_misspelled_required_key_is_named_once_not_also_as_missing() -> None:
    with pytest.raises(info.DriverInfoProblems) as caught:
        info.parse_driver_info({"ipmi_adress": "h", "ipmi_port": 0}, "ipmi", node="n1")
    assert [p.field for p in caught.value.problems] == [
        "driver_info.ipmi_adress",
        "driver_info.ipmi_port",
    ]


def test_redfish_problems_all_at_once_never_showing_the_password() -> None:
    raw = {
        "redfish_address": "https://admin:s3cret@bmc",  # credentials in the URL
        "redfish_username": None,
        "redfish_password": 5,
        "redfish_verify_ca": "",
        "redfish_max_body_bytes": ".inf",
        "redfish_auth_typ": "basic",
    }
    with pytest.raises(info.DriverInfoProblems) as caught:
        info.parse_driver_info(raw, "redfish", node="r1")
    assert [p.field for p in caught.value.problems] == [
        "driver_info.redfish_address",
        "driver_info.redfish_username",
        "driver_info.redfish_password",
        "driver_info.redfish_verify_ca",
        "driver_info.redfish_max_body_bytes",
        "driver_info.redfish_auth_typ",
    ]
    assert "s3cret" not in "\n".join([str(caught.value), *caught.value.lines])


def test_not_a_mapping_is_one_problem() -> None:
    with pytest.raises(info.DriverInfoProblems) as caught:
        info.parse_driver_info(["ipmi_address"], "ipmi", node="n1")  # type: ignore[arg-type]
    assert caught.value.lines == ["node 'n1': driver_info: must be a mapping, not a list"]
