"""Secrets that cannot leak by accident.

A :class:`Secret` prints as ``***`` everywhere (``str``, ``repr``, f-strings,
logging, ``json.dumps`` through :func:`mask`); the value comes out only through
:meth:`Secret.reveal`, so every place that needs the real password is one grep
away.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MASK", "SECRET_KEY_PATTERN", "Secret", "is_secret_key", "mask"]

MASK = "***"

#: driver_info / config keys whose values are credentials (Ironic's convention)
SECRET_KEY_PATTERN = re.compile(r"(password|passwd|secret|token|_key$|^key$|kg$)", re.IGNORECASE)


class Secret:
    """A credential. Compare it, test it for truth, hand it to the library
    that needs it with :meth:`reveal`; never print it."""

    __slots__ = ("_value",)

    def __init__(self, value: str | bytes | Secret = "") -> None:
        if isinstance(value, Secret):
            value = value.reveal()
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        self._value = value

    def reveal(self) -> str:
        return self._value

    def reveal_bytes(self) -> bytes:
        return self._value.encode("utf-8")

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Secret):
            return self._value == other._value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return f"Secret({MASK!r})" if self._value else "Secret('')"

    def __str__(self) -> str:
        return MASK if self._value else ""

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __reduce__(self) -> tuple[Any, ...]:
        # Lab workers receive credentials through pickling; keep that working.
        return (Secret, (self._value,))


def is_secret_key(key: str) -> bool:
    """True when a config key names a credential (``ipmi_password``, ``auth_token``)."""
    return bool(SECRET_KEY_PATTERN.search(key))


def mask(data: Any) -> Any:
    """A copy of ``data`` with every credential replaced by ``***``: values of
    secret-looking keys, and every :class:`Secret`. For output and logs."""
    if isinstance(data, Secret):
        return str(data)
    if isinstance(data, Mapping):
        return {
            k: (MASK if v not in (None, "") else v)
            if isinstance(k, str) and is_secret_key(k)
            else mask(v)
            for k, v in data.items()
        }
    if isinstance(data, list | tuple):
        return type(data)(mask(v) for v in data)
    return data
