"""The validation layer's rules for values that arrive as text or from
outside (issue 36): numbers in ASCII digits only, finite, whole where whole
(2.9 is an error, not 2), required means non-null, and the readers that use
them (``BMAAS_BMC_*``, driver_info, incident rules)."""

from __future__ import annotations

import math
from typing import Any

import click
import pytest

from bmaas import validate
from bmaas.cliutil import FiniteFloat
from bmaas.driver_info import DriverInfo
from bmaas.fakes.faults import FaultRule
from bmaas.faults import InputError
from bmaas.gate import GateRegistry, environment_problems


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2", 2),
        ("-3", -3),
        ("+4", 4),
        (" 5\t", 5),
        ("2.9", 2.9),
        (".5", 0.5),
        ("5.", 5.0),
        ("1e3", 1000.0),
        ("1E-3", 0.001),
    ],
)
def test_numeric_reads_numbers_written_in_ascii(text: str, value: float) -> None:
    got = validate.numeric(text)
    assert got == value
    assert type(got) is type(value)


@pytest.mark.parametrize(
    "text",
    [
        "\u0665",  # Arabic-Indic five: int() reads it as 5
        "5\u00a0",  # a no-break space: str.strip() and int() drop it
        "\u00a05",
        "1_000",  # int() and float() read it as 1000
        "0x10",
        "nan",
        "inf",
        "-Infinity",
        "",
        " ",
        "1" * 19,  # 19 digits: a typo, not a count (int() of 4300+ raises)
        "1.2.3",
        "\uff15",  # fullwidth five
    ],
)
def test_numeric_leaves_anything_else_as_text_for_the_checker(text: str) -> None:
    assert validate.numeric(text) == text


def test_numeric_passes_non_text_through() -> None:
    for value in (3, 2.5, None, [1], True):
        assert validate.numeric(value) is value


def test_digits_no_longer_reads_a_no_break_space_or_other_digits() -> None:
    assert validate.digits("623") == 623
    assert validate.digits(" 623 ") == 623
    assert validate.digits("623\u00a0") == "623\u00a0"
    assert validate.digits("\u0666\u0662\u0663") == "\u0666\u0662\u0663"
    with pytest.raises(ValueError, match="must be a port"):
        validate.port("623\u00a0")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (2.9, "must be a whole number >= 1, not 2.9"),
        ("2.9", "not 2.9"),
        (math.inf, "not inf"),
        (float("nan"), "not nan"),
        ("\u0665", "not '\u0665'"),
        (0, "not 0"),
        (True, "not True"),
        (None, "not None"),
        ("", "not ''"),
    ],
)
def test_count_is_whole_finite_and_ascii(value: Any, says: str) -> None:
    with pytest.raises(ValueError, match="must be a whole number") as info:
        validate.count(value, low=1)
    assert says in str(info.value)


def test_count_accepts_whole_numbers_and_their_text() -> None:
    assert validate.count(3) == 3
    assert validate.count("3") == 3
    assert validate.count(" 12 ") == 12
    assert validate.count(0, low=0) == 0
    with pytest.raises(ValueError, match="from 1 to 4"):
        validate.count(5, low=1, high=4)


def test_present_refuses_null_only() -> None:
    assert validate.present(0) == 0
    assert validate.present("") == ""
    with pytest.raises(ValueError, match="is required, not null"):
        validate.present(None)


def test_setting_names_the_setting_and_refuses_empty() -> None:
    check = lambda text: validate.count(text, low=1)  # noqa: E731
    assert validate.setting("X", None, check) is None
    assert validate.setting("X", "4", check) == 4
    with pytest.raises(ValueError, match=r"^X: must not be empty"):
        validate.setting("X", " ", check)
    with pytest.raises(ValueError, match=r"^X: must be a whole number >= 1, not 2.9$"):
        validate.setting("X", "2.9", check)


def test_number_with_an_open_upper_bound() -> None:
    assert validate.number(0.5, low=0, high=1, low_open=True, high_open=True) == 0.5
    for value in (0, 1):
        with pytest.raises(ValueError, match="> 0 and < 1"):
            validate.number(value, low=0, high=1, low_open=True, high_open=True)


@pytest.mark.parametrize("text", ["\u0665", "5\u00a0", "1_000", "five"])
def test_a_float_option_reads_ascii_digits_only(text: str) -> None:
    with pytest.raises(click.BadParameter, match="is not a number"):
        FiniteFloat(0, 10).convert(text, None, None)


def test_a_float_option_still_reads_plain_numbers_and_names_non_finite_ones() -> None:
    assert FiniteFloat(0, 10).convert(" 2.5 ", None, None) == 2.5
    assert FiniteFloat(0, 1, min_open=True, max_open=True).convert("0.05", None, None) == 0.05
    with pytest.raises(click.BadParameter, match="must be a finite number"):
        FiniteFloat(0, 10).convert("nan", None, None)
    with pytest.raises(click.BadParameter, match="< 1"):
        FiniteFloat(0, 1, max_open=True).convert("1", None, None)


# -- BMAAS_BMC_* --------------------------------------------------------------------


def test_environment_problems_are_one_each_and_empty_is_unset() -> None:
    assert environment_problems({}) == []
    assert environment_problems({"BMAAS_BMC_MAX_REQUESTS": ""}) == []
    found = environment_problems(
        {"BMAAS_BMC_MAX_REQUESTS": "2.9", "BMAAS_BMC_MIN_INTERVAL": "\u0661"}
    )
    assert [str(p) for p in found] == [
        "environment: BMAAS_BMC_MAX_REQUESTS: must be a whole number >= 1, not 2.9",
        "environment: BMAAS_BMC_MIN_INTERVAL: must be a number of seconds from 0 to 3600, "
        "not '\u0661'",
    ]


def test_gates_still_apply_good_environment_values() -> None:
    gates = GateRegistry(environ={"BMAAS_BMC_MAX_REQUESTS": "2", "BMAAS_BMC_MIN_INTERVAL": "0.5"})
    gate = gates.gate("redfish:https://a", cap=4, spacing=0.05)
    assert (gate.cap, gate.spacing) == (2, 0.5)


# -- driver_info ----------------------------------------------------------------------


def _problems(raw: Any, required: tuple[str, ...] = ()) -> list[str]:
    return [str(p) for p in DriverInfo.problems(raw, required=required, node="n1")]


def test_driver_info_counts_are_whole_and_finite() -> None:
    assert DriverInfo.parse({"bmc_max_requests": 3}).bmc_max_requests == 3
    assert _problems({"bmc_max_requests": 2.9}) == [
        "node 'n1': driver_info.bmc_max_requests: must be a whole number from 1 to 1024, not 2.9"
    ]
    assert "not inf" in _problems({"bmc_max_requests": math.inf})[0]
    assert "finite" in _problems({"bmc_min_interval": math.nan})[0]
    assert DriverInfo.parse({"bmc_min_interval": 0.5}).bmc_min_interval == 0.5
    # bmaas's own keys are numbers an inventory writes as numbers (issue 44):
    # text is refused, not read ("3", " 3 "), as are booleans and 10**40
    for text in ("3", " 3 ", True, 10**40):
        assert "must be a whole number from 1 to 1024" in _problems({"bmc_max_requests": text})[0]
    for text in ("0.5", " 3 ", True):
        assert "must be a number of seconds" in _problems({"bmc_min_interval": text})[0]


def test_driver_info_required_means_non_null() -> None:
    assert _problems({"ipmi_address": None}, ("ipmi_address",)) == [
        "node 'n1': driver_info.ipmi_address: is required, not null"
    ]
    assert _problems({}, ("ipmi_address",)) == ["node 'n1': driver_info.ipmi_address: is required"]
    # optional and null: unset, as before
    assert _problems({"ipmi_address": "h", "ipmi_port": None}, ("ipmi_address",)) == []


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ([1, 2], "driver_info: must be a mapping, not a list"),
        ("abc", "driver_info: must be a mapping, not a str"),
        (None, "driver_info: must be a mapping, not null"),
        ({1: "x"}, "driver_info: unknown key 1 (keys are text)"),
        ({("a",): "x"}, "driver_info: unknown key ('a',) (keys are text)"),
    ],
)
def test_driver_info_of_any_shape_is_a_problem_not_a_crash(raw: Any, says: str) -> None:
    found = _problems(raw)
    assert len(found) == 1
    assert says in found[0]
    with pytest.raises(InputError):
        DriverInfo.parse(raw)


SECRET = "Pw-36-x"


@pytest.mark.parametrize(
    "address",
    [
        f"https://admin%3A{SECRET}%40bmc",
        f"https://admin:{SECRET}@bmc",
        f"https://bmc:{SECRET}",
        f"https://admin:{SECRET}@[::1",
        f"https://b mc/{SECRET}",
        f"ftp://admin:{SECRET}@bmc",
        f"https://{SECRET}%20bmc",
    ],
)
def test_an_address_is_never_echoed_in_its_error(address: str) -> None:
    found = _problems({"redfish_address": address})
    assert found, address
    assert all(SECRET not in p for p in found), found
    ipmi = _problems({"ipmi_address": address})
    assert ipmi, address
    assert all(SECRET not in p for p in ipmi), ipmi


def test_a_good_address_still_parses() -> None:
    info = DriverInfo.parse({"redfish_address": "https://[::1]:8443/", "ipmi_address": "bmc-1"})
    assert info.redfish_address == "https://[::1]:8443"


# -- incident rules --------------------------------------------------------------------


def test_an_incident_says_which_nodes_could_never_see_it() -> None:
    ipmi_only = FaultRule.from_dict({"effect": "incident", "incident": "ipmi-node-busy"})
    redfish_only = FaultRule.from_dict(
        {"effect": "incident", "incident": "idrac10-power-on-conflict"}
    )
    assert ipmi_only.unseen_on(["ipmi"]) is None
    assert ipmi_only.unseen_on(["ipmi", "redfish"]) is None
    assert "answers over ipmi only" in (ipmi_only.unseen_on(["redfish"]) or "")
    assert "answers over redfish only" in (redfish_only.unseen_on(["ipmi"]) or "")
    # any other rule is left alone (profiles put both protocols' rules on every node)
    busy = FaultRule.from_dict({"effect": "busy", "protocol": "ipmi"})
    assert busy.unseen_on(["redfish"]) is None


def test_an_incident_given_a_protocol_it_has_no_answer_for_is_refused() -> None:
    with pytest.raises(InputError, match="answers over ipmi only: over redfish"):
        FaultRule.from_dict(
            {"effect": "incident", "incident": "ipmi-node-busy", "protocol": "redfish"}
        )
    rule = FaultRule.from_dict(
        {"effect": "incident", "incident": "ipmi-node-busy", "protocol": "ipmi"}
    )
    assert rule.unseen_on(["ipmi"]) is None
