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
        (b'{"Context": "abc', "(?i)unterminated"),
        (b'{"a": "x\\"}', "(?i)unterminated"),
        # more brackets than the depth bound: the scan runs and refuses itself
        (b"[]" * (MAX_DEPTH + 1) + b'{"Context": "abc', "JSON with an unterminated string"),
        (b"{not json", "Expecting"),
        (b"x" * 101, "over the 100-byte cap"),
    ],
)
def test_what_is_refused_is_a_value_error(data: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        loads_bounded(data, limit=100 if "cap" in why else len(data))


def test_a_document_with_few_brackets_is_parsed_without_the_scan() -> None:
    """No document with at most ``max_depth`` brackets can nest deeper: the
    scan in Python is skipped (an event's scan cost more than its parse),
    and what json.loads refuses is still a ValueError."""
    event = json.dumps({"Context": "c", "Events": [{"MessageId": "x", "Message": "[" * 3}]})
    assert loads_bounded(event.encode(), limit=1 << 20)["Context"] == "c"
    with pytest.raises(ValueError, match="deeper than"):
        loads_bounded(b"[" * 5 + b"]" * 5, limit=100, max_depth=4)
    assert loads_bounded(b"[" * 4 + b"]" * 4, limit=100, max_depth=4) == [[[[]]]]


def test_exactly_the_limit_deep_is_taken() -> None:
    data = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert isinstance(loads_bounded(data, limit=1 << 20), list)


def test_a_string_never_closed_is_refused_in_linear_time() -> None:
    """Each quote of an unclosed run would rescan to the end with a naive
    pattern (quadratic); the scan stops at the first lone quote."""
    with pytest.raises(ValueError, match=r"(?i)unterminated"):
        loads_bounded(b'"' + b"\\\\x" * 300_000, limit=1 << 21)  # json.loads alone
    with pytest.raises(ValueError, match="JSON with an unterminated string"):  # the scan
        loads_bounded(b"[]" * (MAX_DEPTH + 1) + b'"' + b"\\\\x" * 300_000, limit=1 << 21)
