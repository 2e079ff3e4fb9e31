"""One set of rules for every number and name bmaas or hwlab reads.

Inventories, lab files, fault rules, proxy specs, ``driver_info``, the lab's
control API and the CLI's options all read numbers and names from people.
Each of those readers keeps its own walk over its own document (so every
problem is reported at once, with its file, line and field), but the rules
themselves live here, once:

* **numbers are finite**: NaN and ±Infinity are refused everywhere, as are
  booleans standing in for numbers (YAML reads a bare ``on`` as ``True``);
* **whole numbers are whole**: ``623.5`` is not a port, and neither is ``"623"``
  where the file can say ``623``;
* **ports** are whole numbers from 1 to 65535 (:func:`port`);
* **times** are seconds from 0 to :data:`MAX_SECONDS` (one day) unless a
  field documents a narrower range (:func:`seconds`);
* **names** (nodes, instance name prefixes) use :data:`NAME_ALPHABET`:
  letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit,
  at most 255 characters (:func:`is_name`).

Every checker raises ``ValueError`` with a message that reads after a field
name (``must be a port from 1 to 65535, not 623.5``); the caller adds the
file, line and field. :mod:`bmaas.cliutil` wraps the same rules as click
parameter types, so ``--deadline nan`` is refused like ``ipmi_port: .nan``.

Why not a schema library (measured with ``python -X importtime`` and
``bmaas --help`` wall time, on a shared machine): pydantic v2 reports every
problem but its import alone takes about 0.2 s, more than all of ``bmaas
--help`` (0.11 s); msgspec imports in about 30 ms but stops at the first
problem, where bmaas promises every problem of a file in one pass. This
module imports in about 1 ms.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = [
    "MAX_SECONDS",
    "NAME_ALPHABET",
    "digits",
    "is_name",
    "name",
    "number",
    "port",
    "seconds",
    "whole",
]

#: the longest time any bmaas or hwlab setting may name: one day
MAX_SECONDS = 86_400.0
#: what a node name or an instance name prefix may be made of
NAME_ALPHABET = "letters, digits, '.', '_' or '-' (starting with a letter or digit, at most 255)"
_DIGITS = re.compile(r"[0-9]{1,18}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int of more than 4300 digits has no repr
        return "a number too long to show"
    return text if len(text) <= 40 else text[:37] + "..."


def _range_text(low: float | None, high: float | None, *, low_open: bool = False) -> str:
    if low is not None and high is not None and not low_open:
        return f" from {low:g} to {high:g}"
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"<= {high:g}")
    return (" " + " and ".join(parts)) if parts else ""


def number(
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    what: str = "a number",
) -> float:
    """``value`` as a finite float within ``[low, high]`` (``(low, high]`` with
    ``low_open``). Whole numbers are accepted; text, booleans, NaN and ±Inf
    are not."""
    wanted = f"must be {what}{_range_text(low, high, low_open=low_open)}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{wanted}, not {_shown(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must be a finite number, not {value!r}")
    try:
        result = float(value)
    except OverflowError:  # only an int too large for a float gets here
        raise ValueError(f"{wanted}, not a {int(value).bit_length()}-bit number") from None
    below = low is not None and (result <= low if low_open else result < low)
    if below or (high is not None and result > high):
        raise ValueError(f"{wanted}, not {_shown(value)}")
    return result


def whole(
    value: Any, *, low: float | None = None, high: float | None = None, what: str = "a whole number"
) -> int:
    """``value`` as an int within ``[low, high]``; ``3.0``, ``3.5``, ``"3"`` and
    ``True`` are refused (a file that means 3 can say 3)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"must be {what}{_range_text(low, high)}, not {_shown(value)}")
    if (low is not None and value < low) or (high is not None and value > high):
        shown = _shown(value) if value.bit_length() < 64 else f"a {value.bit_length()}-bit number"
        raise ValueError(f"must be {what}{_range_text(low, high)}, not {shown}")
    return value


def port(value: Any) -> int:
    """A TCP/UDP port: a whole number from 1 to 65535. Text of digits is
    accepted too (Ironic's driver_info often holds ``"623"``); ``623.5`` is not."""
    return whole(digits(value), low=1, high=65535, what="a port")


def digits(value: Any) -> Any:
    """``value`` as an int when it is text of (ASCII) digits, else as given:
    for fields Ironic's driver_info often holds as strings (``"623"``)."""
    if isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
        return int(value)
    return value


def seconds(
    value: Any, *, low: float = 0.0, high: float = MAX_SECONDS, low_open: bool = False
) -> float:
    """A time in seconds: finite, within ``[low, high]`` (one day at most unless
    the field says less)."""
    return number(value, low=low, high=high, low_open=low_open, what="a number of seconds")


def is_name(text: Any) -> bool:
    """Whether ``text`` is a name from :data:`NAME_ALPHABET`."""
    return isinstance(text, str) and _NAME.fullmatch(text) is not None


def name(value: Any) -> str:
    """``value`` if it is a name from :data:`NAME_ALPHABET`."""
    if not is_name(value):
        raise ValueError(f"must be {NAME_ALPHABET}, not {_shown(value)}")
    return str(value)
