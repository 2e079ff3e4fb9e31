"""``loads_bounded``: JSON a peer sent, its size and depth checked before
``json.loads`` (which raises ``RecursionError`` on a deep ``[[[``)."""

from __future__ import annotations

import json

import pytest

from bmaas.drivers.redfish.framing import MAX_DEPTH, loads_bounded


def test_an_event_is_parsed_and_brackets_inside_strings_do_not_count() -> None:
    document = {"Context": "c" * 64, "Events": [{"Message": "[[[{{{" * 50, "x": '\\"]}'}]}
    assert loads_bounded(json.dumps(document).encode(), limit=1 << 20) == document


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"[" * 200_000, "deeper than"),
        (b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1), "deeper than"),
        (b'{"Context": "abc', "unterminated"),
        (b'{"a": "x\\"}', "unterminated"),
        (b"{not json", "Expecting"),
        (b"x" * 101, "over the 100-byte cap"),
    ],
)
def test_what_is_refused_is_a_value_error(data: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        loads_bounded(data, limit=100 if "cap" in why else len(data))


def test_exactly_the_limit_deep_is_taken() -> None:
    data = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert isinstance(loads_bounded(data, limit=1 << 20), list)


def test_a_string_never_closed_is_refused_in_linear_time() -> None:
    """Each quote of an unclosed run would rescan to the end with a naive
    pattern (quadratic); the scan stops at the first lone quote."""
    with pytest.raises(ValueError, match="unterminated"):
        loads_bounded(b'"' + b"\\\\x" * 300_000, limit=1 << 21)
