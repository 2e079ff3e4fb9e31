"""What ``redfish_verify_ca`` may name: certificates, not any path at all.

``redfish_verify_ca`` is Ironic's: ``true``, ``false`` or the path of a CA
bundle, passed to requests' ``verify`` (:func:`bmaas.tlspolicy.client_context`
loads a file as ``cafile``, a directory as ``capath``). Issue 44 found
``/etc`` and ``/dev/null`` accepted at enroll; every connection then failed
to verify, far from the line that caused it. A path that exists must be:

* a **regular file** of at most :data:`MAX_CA_BYTES` holding at least one
  PEM certificate (``-----BEGIN CERTIFICATE-----``), the first of which
  OpenSSL reads; or
* a **directory of hashed certificates**, as ``openssl rehash`` (or
  ``c_rehash``) makes them and OpenSSL's ``capath`` looks them up: at least
  one ``HHHHHHHH.N`` entry among its first :data:`MAX_DIR_ENTRIES`, which is
  itself such a file. A directory without one (``/etc``) is refused: OpenSSL
  would find no CA in it.

A path that does not exist is left to where it is used (the Redfish driver
says "does not exist"; ``bmaas status check`` lists it as ``missing_ca``):
a store can be read on a host the bundle is not copied to yet. The result
for a file is kept per (path, inode, size, mtime), so a fleet of nodes
naming one bundle reads it once.
"""

from __future__ import annotations

import functools
import os
import re
import ssl
import stat

from bmaas.files import read_limited

__all__ = ["MAX_CA_BYTES", "MAX_DIR_ENTRIES", "check"]

#: the largest CA bundle read (Mozilla's, as certifi ships it, is ~0.3 MB)
MAX_CA_BYTES = 16 * 1024 * 1024
#: entries of a CA directory looked at for a hashed certificate
MAX_DIR_ENTRIES = 100_000
_HASHED = re.compile(r"[0-9a-f]{8}\.[0-9]+")
_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+?-----END CERTIFICATE-----")


def check(path: str) -> None:
    """``ValueError`` (a message that follows the field name) unless
    ``path`` is missing or names certificates (module docstring)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ValueError(f"cannot read CA bundle {path!r}: {exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        _directory(path)
        return
    _file(path, info.st_ino, info.st_dev, info.st_size, info.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _file(path: str, *_identity: int) -> None:
    try:
        data = read_limited(path, limit=MAX_CA_BYTES)
    except OSError as exc:
        raise ValueError(f"CA bundle {path!r} {exc.strerror}") from None
    first = _PEM.search(data)
    if first is None:
        raise ValueError(
            f"CA bundle {path!r} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        )
    try:
        # the first one only: a bundle of 150 costs 0.1-0.2 s to load, which
        # the connection pays once anyway (bmaas.tlspolicy.client_context)
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(
            cadata=first.group().decode("ascii")
        )
    except ssl.SSLError as exc:
        raise ValueError(
            f"CA bundle {path!r} holds a certificate OpenSSL cannot read ({exc.reason or exc})"
        ) from None


def _directory(path: str) -> None:
    try:
        with os.scandir(path) as entries:
            for seen, entry in enumerate(entries):
                if seen >= MAX_DIR_ENTRIES:
                    break
                if _HASHED.fullmatch(entry.name):
                    candidate = os.path.join(path, entry.name)
                    try:
                        info = os.stat(candidate)
                        _file(candidate, info.st_ino, info.st_dev, info.st_size, info.st_mtime_ns)
                    except (OSError, ValueError):
                        continue  # a dangling or unreadable link: look on
                    return
    except OSError as exc:
        raise ValueError(f"cannot read CA directory {path!r}: {exc.strerror}") from None
    raise ValueError(
        f"{path!r} is a directory with no hashed CA certificate in it (HHHHHHHH.0, as "
        "'openssl rehash' makes): name a CA bundle file, or a directory OpenSSL can use"
    )
