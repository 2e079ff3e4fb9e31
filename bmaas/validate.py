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
  at most 255 characters (:func:`is_name`);
* **numbers written as text** (an environment variable, an ``ironic.conf``
  option, ``"623"`` in Ironic's driver_info) are ASCII digits, an optional
  sign, point and exponent, and nothing else: Python's ``int()`` and
  ``float()`` read ``"\u0665"`` (Arabic-Indic five), ``"5\xa0"``, ``"1_000"``
  and ``"nan"`` as numbers; these do not (:func:`numeric`, :func:`digits`);
* **required means present and not null**: ``ipmi_address: null`` is as
  missing as no ``ipmi_address`` at all (:func:`present`);
* **hosts** are RFC 1123 names (``_`` tolerated) or IP literals (:func:`is_host`);
* **image URLs** (what a BMC fetches as virtual media) are
  ``scheme://host[:port]/path`` of a scheme the BMC can fetch
  (:data:`IMAGE_SCHEMES`), with no white space or control character
  (:func:`image_url`): ``javascript:alert(1)`` is not one.

Every checker raises ``ValueError`` with a message that reads after a field
name (``must be a port from 1 to 65535, not 623.5``); the caller adds the
file, line and field. :mod:`bmaas.cliutil` wraps the same rules as click
parameter types, so ``--deadline nan`` is refused like ``ipmi_port: .nan``.

Why not a schema library (pydantic's import alone outweighs ``bmaas
--help``; msgspec stops at the first problem): docs/operator.md. This
module imports in about 1 ms.
"""

from __future__ import annotations

import ipaddress
import math
import re
import unicodedata
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "IMAGE_SCHEMES",
    "MAX_SECONDS",
    "NAME_ALPHABET",
    "count",
    "digits",
    "image_url",
    "is_host",
    "is_name",
    "name",
    "number",
    "numeric",
    "port",
    "present",
    "seconds",
    "setting",
    "whole",
]

T = TypeVar("T")

#: the longest time any bmaas or hwlab setting may name: one day
MAX_SECONDS = 86_400.0
#: what a node name or an instance name prefix may be made of
NAME_ALPHABET = "letters, digits, '.', '_' or '-' (starting with a letter or digit, at most 255)"
_DIGITS = re.compile(r"[0-9]{1,18}")
_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")
#: a decimal number as a person writes one: ASCII only, at most 18 digits
#: before the point (a longer one is a typo, and int() of 4300+ digits raises)
_DECIMAL = re.compile(
    r"[+-]?(?:[0-9]{1,18}(?:\.[0-9]{0,18})?|\.[0-9]{1,18})(?:[eE][+-]?[0-9]{1,3})?"
)
#: the white space trimmed around a number written as text: ASCII only
#: (str.strip() would also trim U+00A0 and the other Unicode spaces)
_SPACE = " \t\r\n"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int of more than 4300 digits has no repr
        return "a number too long to show"
    return text if len(text) <= 40 else text[:37] + "..."


def _range_text(
    low: float | None, high: float | None, *, low_open: bool = False, high_open: bool = False
) -> str:
    if low is not None and high is not None and not low_open and not high_open:
        return f" from {low:g} to {high:g}"
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {high:g}")
    return (" " + " and ".join(parts)) if parts else ""


def number(
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    what: str = "a number",
) -> float:
    """``value`` as a finite float within ``[low, high]`` (``(low, ...`` with
    ``low_open``, ``..., high)`` with ``high_open``). Whole numbers are
    accepted; text, booleans, NaN and ±Inf are not."""
    wanted = f"must be {what}{_range_text(low, high, low_open=low_open, high_open=high_open)}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{wanted}, not {_shown(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must be a finite number, not {value!r}")
    try:
        result = float(value)
    except OverflowError:  # only an int too large for a float gets here
        raise ValueError(f"{wanted}, not a {int(value).bit_length()}-bit number") from None
    below = low is not None and (result <= low if low_open else result < low)
    above = high is not None and (result >= high if high_open else result > high)
    if below or above:
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
    for fields Ironic's driver_info often holds as strings (``"623"``).
    ``"\u0665"`` and ``"5\xa0"`` stay text (and are refused by the checker)."""
    if isinstance(value, str) and _DIGITS.fullmatch(value.strip(_SPACE)):
        return int(value.strip(_SPACE))
    return value


def numeric(value: Any) -> Any:
    """``value`` as a number when it is text of one (ASCII digits, an
    optional sign, point and exponent: ``"2"`` is 2, ``"2.9"`` is 2.9), else
    as given, for the checker after it to refuse in its own words. For
    values that arrive as text: environment variables, ini options, Ironic's
    driver_info. ``"nan"``, ``"inf"``, ``"1_000"``, ``"0x10"``, ``""`` and
    non-ASCII digits stay text."""
    if not isinstance(value, str):
        return value
    text = value.strip(_SPACE)
    if _INTEGER.fullmatch(text):
        return int(text)
    if _DECIMAL.fullmatch(text):
        return float(text)
    return value


def count(
    value: Any, *, low: int = 1, high: int | None = None, what: str = "a whole number"
) -> int:
    """A whole number (of requests, of workers) from a number or its text:
    ``2.9`` is refused, not read as 2, and so are ``.inf`` and ``"\u0665"``."""
    return whole(numeric(value), low=low, high=high, what=what)


def present(value: Any) -> Any:
    """``value`` unless it is None: a required key given as ``null`` is
    missing (``ipmi_address: null`` passed enroll and failed every call)."""
    if value is None:
        raise ValueError("is required, not null")
    return value


def setting(name: str, text: str | None, check: Callable[[Any], T]) -> T | None:
    """One setting read as text (an environment variable, an ini option):
    None when unset, else ``check(text)``; a problem is a ``ValueError``
    whose message starts with the setting's ``name``. An empty value is a
    problem, not "unset": ``BMAAS_BMC_MAX_REQUESTS=`` says something."""
    if text is None:
        return None
    if text.strip(_SPACE) == "":
        raise ValueError(f"{name}: must not be empty (unset it instead)")
    try:
        return check(text)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


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


_LABEL = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)$")


def is_host(text: str) -> bool:
    """A host name (RFC 1123 labels; ``_`` tolerated, as real BMC names have
    it) or an IPv4/IPv6 literal (IPv6 optionally in brackets)."""
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        ipaddress.ip_address(bare)
        return True
    except ValueError:
        pass
    if bare is not text or len(text) > 253:
        return False
    return all(_LABEL.match(label) for label in text.removesuffix(".").split("."))


#: what a BMC fetches a virtual-media image over: Redfish's
#: ``TransferProtocolType`` values bmaas passes on from the URL's scheme
#: (iDRAC lists CIFS, HTTP, HTTPS, NFS; OpenBMC CIFS and HTTPS; a slot that
#: does not list the scheme is ``UnsupportedOperation`` at the BMC)
IMAGE_SCHEMES = ("http", "https", "nfs", "cifs")
#: the longest image URL accepted (Redfish's ``Image`` has no limit; BMCs do)
MAX_URL = 2048
#: why a URL is never shown in its own error: it may carry a share's password
_UNSHOWN = "(the value is not shown: it may hold a credential)"


def image_url(value: Any, *, schemes: tuple[str, ...] = IMAGE_SCHEMES) -> str:
    """``value`` if it is a URL a BMC can fetch an image from:
    ``scheme://host[:port][/path]``, ``scheme`` one of ``schemes``, ``host``
    a host name or IP address, no white space or control character, at
    most :data:`MAX_URL` characters."""
    if not isinstance(value, str) or not value:
        raise ValueError("must be a URL (scheme://host/path)")
    if len(value) > MAX_URL:
        raise ValueError(f"must be at most {MAX_URL} characters, not {len(value)}")
    for index, char in enumerate(value):
        if char.isspace() or unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            raise ValueError(
                f"has white space or a control character ({char!a} at character "
                f"{index}); a URL has none {_UNSHOWN}"
            )
    wanted = ", ".join(schemes)
    scheme, sep, rest = value.partition("://")
    if not sep or scheme.lower() not in schemes:
        raise ValueError(f"must be a URL of scheme {wanted} (scheme://host/path) {_UNSHOWN}")
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise ValueError(f"is not a valid URL (host or port) {_UNSHOWN}") from None
    if not parts.hostname or not is_host(parts.hostname) or rest.startswith("/"):
        raise ValueError(f"must name a host: scheme://host/path {_UNSHOWN}")
    return value
