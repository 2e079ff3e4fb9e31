"""Passwords sealed at rest: the store keeps an inline BMC password encrypted
with a key it does not hold.

Scheme (docs/operator.md, "Passwords at rest")::

    inventory            store (driver_info)                 key file (0600, outside the store)
    ipmi_password: pw -> sealed:v1:3f2a9c1e:gAAAAAB...   <-  ~/.config/bmaas/store.key
    ${ENV} / file:... -> kept as the reference (no secret in the store)

The key file, its rotation and the why of each choice (Fernet, a key
outside the store, a file of several keys so that a rotation is safe to
interrupt, each value naming its key by a fingerprint so a wrong key is one
clear line) are docs/operator.md's.

A missing, unreadable or wrong key raises :class:`KeyProblem` (an
:class:`~bmaas.faults.InputError`: one ``error:`` line, exit 2). A key is
created only where no sealed value exists yet: a store whose key went missing
is never given a new one silently (its passwords would be lost).

Only inline passwords are sealed: a ``${ENV}`` or ``file:`` reference is not a
secret and stays readable (:mod:`bmaas.credentials`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from bmaas.faults import InputError
from bmaas.files import MAX_SECRET_BYTES, SecretExposed, read_secret
from bmaas.home import user_dir
from bmaas.secrets import Secret, is_secret_key

__all__ = [
    "KEY_FILE_ENV",
    "PREFIX",
    "KeyProblem",
    "Keyring",
    "default_key_path",
    "is_sealed",
    "key_id_of",
    "key_path",
    "keyring",
    "seal_driver_info",
    "sealed_key_ids",
]

#: the environment variable that names the key file
KEY_FILE_ENV = "BMAAS_KEY_FILE"
#: how a sealed value starts: ``sealed:v1:KEYID:TOKEN``
PREFIX = "sealed:v1:"


class KeyProblem(InputError):
    """The store's key is missing, unreadable, not private, or not the one the
    store's passwords were sealed with. One line; never the key or a password."""


def default_key_path() -> Path:
    """``~/.config/bmaas/store.key`` on Linux (per platformdirs), or
    ``$BMAAS_HOME/store.key`` (:mod:`bmaas.home`)."""
    return user_dir("config") / "store.key"


def key_path(environ: Mapping[str, str] | None = None) -> Path:
    """``BMAAS_KEY_FILE``, else :func:`default_key_path`."""
    env = os.environ if environ is None else environ
    raw = env.get(KEY_FILE_ENV) or ""
    return Path(os.path.expanduser(raw)).absolute() if raw else default_key_path()


def key_id_of(key: bytes) -> str:
    """A key's fingerprint: 8 hex digits of its SHA-256, safe to print."""
    return hashlib.sha256(key).hexdigest()[:8]


def is_sealed(value: object) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def _split(value: str) -> tuple[str, bytes]:
    """``(key id, token)`` of a sealed value."""
    kid, sep, token = value[len(PREFIX) :].partition(":")
    if not sep or not kid or not token:
        raise ValueError("not a sealed value")
    return kid, token.encode("ascii")


class Keyring:
    """The keys of one key file: the first seals, each one unseals."""

    def __init__(self, keys: Iterable[bytes], *, path: Path | None = None) -> None:
        from cryptography.fernet import Fernet

        self.path = path
        self._keys = list(keys)
        if not self._keys:
            raise KeyProblem(f"key file {path} holds no key", field=KEY_FILE_ENV)
        self._fernets = {key_id_of(k): Fernet(k) for k in self._keys}

    def __repr__(self) -> str:
        return f"Keyring({self.path}, keys={self.ids})"

    @property
    def ids(self) -> list[str]:
        return [key_id_of(k) for k in self._keys]

    @property
    def primary(self) -> str:
        return key_id_of(self._keys[0])

    def seal(self, password: str | Secret) -> str:
        """``password`` sealed with the first key."""
        text = password.reveal() if isinstance(password, Secret) else password
        token = self._fernets[self.primary].encrypt(text.encode("utf-8"))
        return f"{PREFIX}{self.primary}:{token.decode('ascii')}"

    def unseal(self, value: str, *, field: str | None = None, node: str | None = None) -> Secret:
        """The password a sealed value holds. A key this file does not have,
        or a value that does not open, is a :class:`KeyProblem`."""
        from cryptography.fernet import InvalidToken

        try:
            kid, token = _split(value)
        except (ValueError, UnicodeEncodeError):
            raise KeyProblem("a sealed password is damaged", field=field, node=node) from None
        fernet = self._fernets.get(kid)
        if fernet is None:
            raise KeyProblem(
                f"the password was sealed with key {kid}, and key file {self.path} holds "
                f"{', '.join(self.ids)}: set {KEY_FILE_ENV} to the store's key file",
                field=field,
                node=node,
            )
        try:
            return Secret(fernet.decrypt(token))
        except (InvalidToken, UnicodeDecodeError):
            raise KeyProblem(
                f"a password sealed with key {kid} does not open with it (changed in the store?)",
                field=field,
                node=node,
            ) from None

    def reseal(self, value: str, *, field: str | None = None, node: str | None = None) -> str:
        """``value`` sealed again with the first key (unchanged if it already
        is); a damaged value is :meth:`unseal`'s :class:`KeyProblem`."""
        with contextlib.suppress(ValueError, UnicodeEncodeError):
            if _split(value)[0] == self.primary:
                return value
        return self.seal(self.unseal(value, field=field, node=node))

    def with_keys(self, keys: Iterable[bytes]) -> Keyring:
        return Keyring(keys, path=self.path)

    @property
    def keys(self) -> list[bytes]:
        return list(self._keys)


# -- the key file ---------------------------------------------------------------------


def _parse(data: bytes, path: Path) -> list[bytes]:
    keys = []
    for number, raw in enumerate(data.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(b"#"):
            continue
        try:
            from cryptography.fernet import Fernet

            Fernet(line)
        except ValueError:
            raise KeyProblem(
                f"line {number} is not a key (32 url-safe base64 bytes, as "
                "`bmaas db rotate-key` writes)",
                source=str(path),
            ) from None
        keys.append(line)
    return keys


def read_keyring(path: Path) -> Keyring:
    """The keys in ``path``: a regular file that only its owner may read
    (:func:`bmaas.files.read_secret`: checked on the open file, not on a
    name that could change between a look and the read)."""
    try:
        data = read_secret(path, limit=MAX_SECRET_BYTES)
    except FileNotFoundError:
        raise KeyProblem(
            f"no key file at {path}: the store's sealed passwords need it "
            f"(set {KEY_FILE_ENV} to where it is)",
            field=KEY_FILE_ENV,
        ) from None
    except SecretExposed as exc:
        if exc.mode & 0o077:
            raise KeyProblem(
                f"key file {path} can be read by others (mode {exc.mode:04o}): chmod 600 {path}",
                field=KEY_FILE_ENV,
            ) from None
        raise KeyProblem(f"key file {path} belongs to another user", field=KEY_FILE_ENV) from None
    except OSError as exc:
        raise KeyProblem(f"cannot read key file {path}: {exc.strerror}") from None
    return Keyring(_parse(data, path), path=path)


def write_keyfile(path: Path, keys: Iterable[bytes]) -> None:
    """Replace ``path`` with ``keys``, one per line, atomically: a new
    ``0600`` file written beside it, flushed, then renamed over it (never
    written through a link, never seen half-written). Call it under the key
    directory's lock (:meth:`bmaas.store.keys.KeysRepo.rotate` does).

    No temporary file outlives it, even killed: the file is written
    unnamed (``O_TMPFILE``) and given its temporary name only for the
    instant between ``linkat`` and ``rename``; a name left from that instant
    (or by a system without ``O_TMPFILE``) is removed by the next write."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = _HEADER + b"".join(k + b"\n" for k in keys)
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        stale.unlink(missing_ok=True)  # a write killed between link and rename
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    _create_whole(temp, data)
    try:
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _sync_dir(path.parent)


#: the key file's first line
_HEADER = b"# bmaas store key: the first line seals, every line unseals\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)


def _sync_dir(directory: Path) -> None:
    """The rename made durable (a crash after it never brings back the old file)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def new_key() -> bytes:
    from cryptography.fernet import Fernet

    return Fernet.generate_key()


_CACHE: dict[Path, tuple[tuple[int, ...], Keyring]] = {}
_CACHE_LOCK = threading.Lock()


def keyring(
    environ: Mapping[str, str] | None = None, *, path: Path | None = None, create: bool = False
) -> Keyring:
    """The key file's keyring (``path``, else ``BMAAS_KEY_FILE``, else the
    default), read once per change of the file (a long ``bmaas sync`` follows
    a rotation). ``create``: make a new key file when there is none."""
    where = path or key_path(environ)
    try:
        info = os.stat(where)
    except FileNotFoundError:
        if not create:
            return read_keyring(where)  # says there is no key file
        with contextlib.suppress(FileExistsError):  # another process made it first
            write_keyfile_new(where)
        info = os.stat(where)
    except OSError:
        return read_keyring(where)  # says why
    signature = (info.st_ino, info.st_mtime_ns, info.st_ctime_ns, info.st_size)  # ctime: chmod
    with _CACHE_LOCK:
        cached = _CACHE.get(where)
        if cached is not None and cached[0] == signature:
            return cached[1]
    ring = read_keyring(where)
    with _CACHE_LOCK:
        _CACHE[where] = (signature, ring)
    return ring


def write_keyfile_new(path: Path) -> None:
    """A new key file with one new key; ``FileExistsError`` if one appeared."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _create_whole(path, _HEADER + new_key() + b"\n")


def _create_whole(path: Path, data: bytes) -> None:
    """Create ``path`` (``0600``; ``FileExistsError`` if it exists) holding
    ``data``, never seen half-written where the system allows: written
    unnamed (``O_TMPFILE``) and linked into place whole, so a process killed
    meanwhile leaves nothing; else created by name and written."""
    try:
        fd = os.open(path.parent, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    except (AttributeError, OSError):  # no O_TMPFILE here, or not on this file system
        fd = -1
    if fd >= 0:
        try:
            _write_all(fd, data)
            os.link(f"/proc/self/fd/{fd}", path)
            return
        except FileExistsError:
            raise
        except OSError:  # no /proc: the named way below
            pass
        finally:
            os.close(fd)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    named = os.open(path, flags, 0o600)
    try:
        _write_all(named, data)
    finally:
        os.close(named)


# -- driver_info ------------------------------------------------------------------------


def seal_driver_info(
    info: Mapping[str, Any],
    ring: Keyring,
    *,
    before: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``info`` with every inline password sealed. A password equal to what
    ``before`` (the stored driver_info) holds keeps its stored value, so an
    unchanged re-enrollment changes nothing."""
    out = dict(info)
    for key, value in info.items():
        if not _inline_password(key, value):
            continue
        old = (before or {}).get(key)
        if isinstance(old, str) and is_sealed(old) and ring.unseal(old).reveal() == value:
            out[key] = old
        else:
            out[key] = ring.seal(value)
    return out


def sealed_key_ids(infos: Iterable[Mapping[str, Any]]) -> set[str]:
    """The keys the sealed values in ``infos`` need."""
    found: set[str] = set()
    for info in infos:
        for value in info.values():
            if is_sealed(value):
                try:
                    found.add(_split(value)[0])
                except ValueError:
                    continue
    return found


def needs_sealing(info: Mapping[str, Any]) -> bool:
    """Whether ``info`` holds an inline password not sealed yet."""
    return any(_inline_password(k, v) for k, v in info.items())


#: a reference, not a password (:func:`bmaas.credentials.source_of`)
_REFERENCE = re.compile(r"^(\$\{[A-Za-z_][A-Za-z0-9_]*\}$|file:)")


def _inline_password(key: object, value: object) -> bool:
    """A credential given inline and not sealed yet (not a ``${ENV}`` or
    ``file:`` reference, which are no secret)."""
    return (
        isinstance(key, str)
        and is_secret_key(key)
        and isinstance(value, str)
        and bool(value)
        and not is_sealed(value)
        and not _REFERENCE.match(value)
    )
