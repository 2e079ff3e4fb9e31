"""A BIOS change checked against the attribute registry: every problem at
once, one line each, in the order given (bmaas.hardware, issue 51)."""

from __future__ import annotations

import pytest

from bmaas.faults import InputError
from bmaas.hardware import AttributeInfo, BiosProblems, check_bios_changes, coerce_value

REGISTRY = {
    "Mode": AttributeInfo("Enumeration", ("Uefi", "LegacyBios")),
    "Cores": AttributeInfo("Integer", lower=0, upper=7),
    "Sriov": AttributeInfo("Boolean"),
    "Phone": AttributeInfo("String", max_length=5),
    "Model": AttributeInfo("String", read_only=True),
}


def test_every_problem_at_once_in_the_order_given() -> None:
    changes = {
        "Nope": 1,
        "Model": "x",
        "Cores": 8,
        "Mode": "Bios",
        "Sriov": "yes",
        "Phone": "123456",
        "Cores2": -1,
    }
    with pytest.raises(BiosProblems) as info:
        check_bios_changes(changes, REGISTRY, node="n1")
    assert [str(p) for p in info.value.problems] == [
        "node 'n1': bios.Nope: no such attribute in the BMC's registry",
        "node 'n1': bios.Model: is read-only",
        "node 'n1': bios.Cores: 8 is above 7 (allowed 0..7)",
        "node 'n1': bios.Mode: 'Bios' is not one of Uefi, LegacyBios",
        "node 'n1': bios.Sriov: 'yes' is not true or false",
        "node 'n1': bios.Phone: is longer than 5 characters",
        "node 'n1': bios.Cores2: no such attribute in the BMC's registry",
    ]
    assert isinstance(info.value, InputError)  # exit 2 / fleet CONFIG, never retried
    assert str(info.value).count(";") == 6  # one line for the node's result line


def test_a_wrong_type_and_below_the_range() -> None:
    with pytest.raises(BiosProblems) as info:
        check_bios_changes({"Cores": "two", "Mode": 1}, REGISTRY)
    assert [p.message for p in info.value.problems] == [
        "'two' is not an integer",
        "1 is not a string",
    ]
    with pytest.raises(BiosProblems, match="-1 is below 0"):
        check_bios_changes({"Cores": -1}, REGISTRY)


def test_good_changes_pass_and_without_a_registry_nothing_is_checked() -> None:
    check_bios_changes({"Cores": 3, "Mode": "Uefi", "Sriov": True, "Phone": "12"}, REGISTRY)
    check_bios_changes({"Anything": object()}, None)


def test_an_empty_change_is_a_problem() -> None:
    with pytest.raises(BiosProblems, match="no attribute to set"):
        check_bios_changes({}, REGISTRY)


@pytest.mark.parametrize(
    ("text", "info", "current", "value"),
    [
        ("3", REGISTRY["Cores"], None, 3),
        ("three", REGISTRY["Cores"], None, "three"),  # left as text: the check names it
        ("true", REGISTRY["Sriov"], None, True),
        ("False", REGISTRY["Sriov"], None, False),
        ("007", REGISTRY["Phone"], None, "007"),  # a string stays a string
        ("4", None, 0, 4),  # no registry: the current value's type
        ("true", None, False, True),
        ("4", None, "x", "4"),
        ("\u0665", REGISTRY["Cores"], None, "\u0665"),  # not ASCII digits
    ],
)
def test_a_command_lines_value_takes_the_attributes_type(text, info, current, value) -> None:
    assert coerce_value(text, info, current) == value
