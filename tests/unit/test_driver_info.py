"""DriverInfo parsing and secret masking."""

from __future__ import annotations

import logging
import pickle

import pytest

from bmaas.driver_info import DriverInfo
from bmaas.faults import InputError
from bmaas.registry import available_drivers, build_driver, load_driver
from bmaas.secrets import Secret, mask

PASSWORD = "s3cr3t-Pa55w0rd!"


def test_parse_ipmi_keys_with_defaults() -> None:
    info = DriverInfo.parse(
        {"ipmi_address": "10.1.2.3", "ipmi_username": "admin", "ipmi_password": PASSWORD},
        required=["ipmi_address"],
    )
    assert info.ipmi_address == "10.1.2.3"
    assert info.ipmi_port == 623
    assert info.ipmi_password.reveal() == PASSWORD
    assert info.ipmi_priv_level == "administrator"


def test_password_never_in_repr_str_format_log_or_dict(caplog: pytest.LogCaptureFixture) -> None:
    info = DriverInfo.parse({"redfish_address": "https://bmc", "redfish_password": PASSWORD})
    logger = logging.getLogger("test.secrets")
    with caplog.at_level(logging.DEBUG):
        logger.info("info=%s repr=%r", info, info)
        logger.info("pw=%s", info.redfish_password)
        logger.info(f"f-string {info.redfish_password}")  # noqa: G004 - testing f-strings too
    rendered = [repr(info), str(info), f"{info}", caplog.text, repr(info.to_dict())]
    for text in rendered:
        assert PASSWORD not in text
    assert "***" in repr(info)
    assert info.to_dict(reveal=True)["redfish_password"] == PASSWORD


def test_secret_round_trips_through_pickle_but_not_print() -> None:
    s = Secret(PASSWORD)
    assert pickle.loads(pickle.dumps(s)) == s
    assert str(s) == "***"
    assert PASSWORD not in repr(s)
    assert Secret(b"abc").reveal_bytes() == b"abc"
    assert not Secret("")


def test_mask_nested_data() -> None:
    data = {"n": [{"driver_info": {"ipmi_password": PASSWORD, "x_auth_token": "tkn-value-9"}}]}
    masked = mask(data)
    assert PASSWORD not in repr(masked)
    assert "tkn-value-9" not in repr(masked)
    assert masked["n"][0]["driver_info"]["ipmi_password"] == "***"


@pytest.mark.parametrize(
    ("raw", "field", "needle"),
    [
        ({"ipmi_address": "h", "ipmi_port": 70000}, "driver_info.ipmi_port", "from 1 to 65535"),
        ({"ipmi_address": "h", "ipmi_port": "abc"}, "driver_info.ipmi_port", "must be a port"),
        ({"ipmi_address": "h", "ipmi_adress": "x"}, "driver_info.ipmi_adress", "did you mean"),
        ({"ipmi_port": 623}, "driver_info.ipmi_address", "is required"),
        (
            {"ipmi_address": "h", "ipmi_cipher_suite": 1},
            "driver_info.ipmi_cipher_suite",
            "17, 3 or auto",
        ),
        ({"redfish_address": "ftp://x"}, "driver_info.redfish_address", "http or https"),
        ({"redfish_address": "https://u:p@x"}, "driver_info.redfish_address", "credentials"),
        ({"redfish_verify_ca": 3}, "driver_info.redfish_verify_ca", "CA bundle"),
        ({"redfish_auth_type": "oauth"}, "driver_info.redfish_auth_type", "basic, session"),
    ],
)
def test_bad_driver_info_names_the_field(raw: dict, field: str, needle: str) -> None:
    with pytest.raises(InputError) as info:
        DriverInfo.parse(raw, required=["ipmi_address"] if "ipmi_port" in raw else (), node="n9")
    assert info.value.field == field
    assert needle in str(info.value)
    assert "node 'n9'" in str(info.value)


def test_redfish_address_gets_https_and_verify_ca_strings() -> None:
    info = DriverInfo.parse({"redfish_address": "bmc.example:8443/", "redfish_verify_ca": "no"})
    assert info.redfish_address == "https://bmc.example:8443"
    assert info.redfish_verify_ca is False
    path = DriverInfo.parse({"redfish_verify_ca": "/etc/ca.pem"})
    assert path.redfish_verify_ca == "/etc/ca.pem"


def test_registry_finds_the_fake_driver_and_names_unknown_ones() -> None:
    assert "fake" in available_drivers()
    assert load_driver("fake").name == "fake"
    with pytest.raises(InputError, match=r"unknown driver 'ilo9' \(installed: .*fake"):
        load_driver("ilo9")


def test_build_driver_accepts_other_drivers_keys_but_not_typos() -> None:
    # A BMC that speaks both protocols carries ipmi_* and redfish_* keys.
    driver = build_driver("n1", "fake", {"fake_machine": "m1", "ipmi_address": "10.0.0.1"})
    assert driver.machine.name == "m1"
    with pytest.raises(InputError) as info:
        build_driver("n1", "fake", {"ipmi_adress": "10.0.0.1"})
    assert info.value.field == "driver_info.ipmi_adress"
    assert "did you mean 'ipmi_address'" in str(info.value)
