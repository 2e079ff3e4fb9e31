"""Secrets that cannot leak by accident.

A :class:`Secret` prints as ``***`` everywhere (``str``, ``repr``, f-strings,
logging, ``json.dumps`` through :func:`mask`); the value comes out only through
:meth:`Secret.reveal`, so every place that needs the real password is one grep
away.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MASK",
    "SECRET_KEY_PATTERN",
    "MaskingFormatter",
    "Secret",
    "is_secret_key",
    "mask",
    "mask_logs",
    "mask_url",
    "mask_urls",
]

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


#: query parameters that carry a credential: presigned URLs (S3's
#: X-Amz-Signature / X-Amz-Credential, Azure's sig, GCS's X-Goog-Signature),
#: tokens and API keys
_QUERY_SECRET = re.compile(
    r"(password|passwd|pass|pwd|secret|token|sig|signature|credential|key|auth|session)",
    re.IGNORECASE,
)
#: a URL inside free text (a log line, an event message)
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def _mask_query(query: str) -> str:
    parts = []
    for item in query.split("&"):
        name, sep, value = item.partition("=")
        if sep and value and _QUERY_SECRET.search(name):
            value = MASK
        parts.append(f"{name}{sep}{value}")
    return "&".join(parts)


def mask_url(url: str) -> str:
    """``url`` with its secrets replaced by ``***``: the password in the
    userinfo (``http://u:***@host/``) and the value of every query parameter
    that names a credential (``?token=***``, ``X-Amz-Signature=***``).

    The one function for a URL that is stored or printed: node history and
    events are written through it (the store never holds the password), and
    :func:`mask` (output) and bmaas's log formatter apply it to every URL
    they see. Text that is not a URL comes back unchanged."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = len(rest)
    for stop in "/?#":
        at = rest.find(stop)
        if at != -1:
            end = min(end, at)
    netloc, tail = rest[:end], rest[end:]
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        # a userinfo without ':' is often a token itself (https://TOKEN@host/)
        netloc = f"{user}:{MASK}@{host}" if colon else f"{MASK}@{host}"
    path, qmark, query = tail.partition("?")
    if qmark:
        query, hash_, fragment = query.partition("#")
        tail = f"{path}?{_mask_query(query)}{hash_}{fragment}"
    return f"{scheme}://{netloc}{tail}"


def mask_urls(text: str) -> str:
    """``text`` with :func:`mask_url` applied to every URL in it (log lines,
    event messages, error texts)."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: mask_url(m.group()), text)


def mask(data: Any) -> Any:
    """A copy of ``data`` with every credential replaced by ``***``: values of
    secret-looking keys, every :class:`Secret`, and the secrets in every URL
    (:func:`mask_urls`). For output and logs."""
    if isinstance(data, Secret):
        return str(data)
    if isinstance(data, str):
        return mask_urls(data)
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


class MaskingFormatter(logging.Formatter):
    """Masks the secrets of every URL in a log line (bmaas's own and the
    protocol libraries', which log the URLs they fetch): ``--debug`` shows
    ``http://u:***@host/``, never the password."""

    def format(self, record: logging.LogRecord) -> str:
        return mask_urls(super().format(record))


def mask_logs(logger: logging.Logger | None = None) -> None:
    """Give every handler of ``logger`` (the root) a :class:`MaskingFormatter`
    with its format kept: for processes that configure logging with
    ``basicConfig`` (hwlab's daemon and workers)."""
    for handler in (logger or logging.getLogger()).handlers:
        current = handler.formatter
        fmt = current._fmt if current is not None else None
        datefmt = current.datefmt if current is not None else None
        handler.setFormatter(MaskingFormatter(fmt, datefmt))
