"""BMC passwords: inline, from an environment variable, or from a file.

An inventory may give a password three ways::

    ipmi_password: s3cret                  # inline
    ipmi_password: ${BMC_PASSWORD}         # an environment variable
    ipmi_password: file:secrets/r1.pass    # a file (relative to the inventory)

**How it is stored.** The store keeps a reference *as given* (a file path is
made absolute); an inline password is stored sealed, encrypted with a key
kept outside the store (:mod:`bmaas.sealed`: ``sealed:v1:KEYID:TOKEN``). It
is resolved (a sealed one opened) each time a driver is built.
Why: the database is not a secret store. It gets copied into bug reports and
backups, read by ``bmaas status check`` and by people, so it should hold a
credential only when the operator chose to write one inline; rotating a
password in a file or a secret manager's environment then needs no
re-enrollment. The cost is that every process that talks to BMCs needs the
variable or the file (or, for an inline password, the store's key file);
enrollment resolves every reference once so a missing one fails there, with
file, line and field, rather than at 3 a.m. The SQLite file is created
``0600`` and a store others can read is refused.

A file is read through :mod:`bmaas.files` (a regular file of at most
:data:`bmaas.files.MAX_SECRET_BYTES`, trailing newlines dropped; what is
refused: docs/operator.md). A literal password that itself looks like
``${...}`` or starts with ``file:`` or ``sealed:v1:`` must be given through
a variable or a file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from bmaas import sealed
from bmaas.faults import InputError
from bmaas.files import MAX_SECRET_BYTES, read_limited
from bmaas.secrets import Secret, is_secret_key

__all__ = ["Source", "normalize", "resolve", "resolve_driver_info", "source_of", "sources"]

_ENV = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_FILE = "file:"


class Source(StrEnum):
    INLINE = "inline"
    ENV = "env"
    FILE = "file"
    #: an inline password as the store keeps it: encrypted (:mod:`bmaas.sealed`)
    SEALED = "sealed"


def source_of(value: str) -> tuple[Source, str]:
    """Which kind of password ``value`` is, and the variable name or path."""
    match = _ENV.match(value)
    if match:
        return Source.ENV, match.group(1)
    if value.startswith(_FILE):
        return Source.FILE, value[len(_FILE) :]
    if value.startswith(sealed.PREFIX):
        return Source.SEALED, value
    return Source.INLINE, value


def normalize(value: str, *, base_dir: str | os.PathLike[str] | None = None) -> str:
    """The form to store: a relative file path is made absolute against
    ``base_dir`` (the inventory's folder); everything else is kept as given."""
    kind, ref = source_of(value)
    if kind is Source.FILE and not os.path.isabs(os.path.expanduser(ref)):
        ref = os.path.join(os.fspath(base_dir or os.getcwd()), ref)
        return _FILE + os.path.normpath(ref)
    if kind is Source.FILE:
        return _FILE + os.path.expanduser(ref)
    return value


def resolve(
    value: str,
    *,
    field: str,
    node: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Secret:
    """The password ``value`` stands for. Errors name the variable or file,
    never the password."""
    kind, ref = source_of(value)
    if kind is Source.INLINE:
        return Secret(value)
    if kind is Source.SEALED:
        return sealed.keyring(environ).unseal(value, field=field, node=node)
    if kind is Source.ENV:
        env = os.environ if environ is None else environ
        if ref not in env:
            raise InputError(f"environment variable {ref} is not set", field=field, node=node)
        if not env[ref]:
            raise InputError(f"environment variable {ref} is empty", field=field, node=node)
        return Secret(env[ref])
    try:
        # a regular file of at most MAX_SECRET_BYTES: /dev/zero or a FIFO
        # named by mistake is refused without reading (or waiting on) it
        text = read_limited(ref, limit=MAX_SECRET_BYTES).decode("utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot read password file {ref}: {exc.strerror}", field=field, node=node
        ) from None
    except UnicodeDecodeError:
        raise InputError(f"password file {ref} is not UTF-8", field=field, node=node) from None
    password = text.rstrip("\r\n")
    if not password:
        raise InputError(f"password file {ref} is empty", field=field, node=node)
    return Secret(password)


def resolve_driver_info(
    raw: Mapping[str, Any],
    *,
    node: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A copy of stored ``driver_info`` with every password resolved to a
    :class:`~bmaas.secrets.Secret`, ready for ``DriverInfo.parse``."""
    out = dict(raw)
    for key, value in raw.items():
        if is_secret_key(key) and isinstance(value, str):
            out[key] = resolve(value, field=f"driver_info.{key}", node=node, environ=environ)
    return out


def sources(raw: Mapping[str, Any]) -> dict[str, str]:
    """Where each password comes from, safe to print: ``{"ipmi": "env BMC_PW"}``.

    Keyed by the protocol prefix (``ipmi``, ``redfish``) rather than the
    ``*_password`` key, so output masking (which hides every value of a key
    that looks like a credential) leaves this readable.
    """
    out: dict[str, str] = {}
    for key, value in raw.items():
        if is_secret_key(key) and isinstance(value, str):
            kind, ref = source_of(value)
            if kind is Source.SEALED:
                kid = ref[len(sealed.PREFIX) :].partition(":")[0]
                out[key.split("_", 1)[0]] = f"inline, sealed with key {kid}"
            else:
                out[key.split("_", 1)[0]] = "inline" if kind is Source.INLINE else f"{kind} {ref}"
    return out
