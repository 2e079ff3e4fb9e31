"""Reading a file a person named, without trusting what it turns out to be.

A path in an inventory (``ipmi_password: file:...``) or on the command line
(``--inventory``, ``--lab-file``) may name something that never ends or never
answers: ``/dev/zero`` (``enroll --dry-run`` grew to 17 GB reading one as a
password), a FIFO nobody writes to (``open`` blocks forever), a directory, a
terminal. :func:`read_limited` opens without blocking (``O_NONBLOCK``), looks
at what it opened (``fstat``) before reading a byte, accepts only a regular
file, refuses one larger than the caller's limit from its size, and even then
reads at most ``limit + 1`` bytes (a file that grows while it is read).
A kernel pseudo-file (``/proc/self/environ``, a ``/sys`` attribute) passes
for a regular file in ``fstat`` but its size is a lie (0, or 4096): one that
yields a different number of bytes than its size is refused too, so a
``file:/proc/self/environ`` password reads nothing of the environment.

:func:`read_secret` is the one reader of a file that holds a secret bmaas
or hwlab did not take from the command line (the store's key file, the lab
control API's token): the same, and also owned by this user and readable
by nobody else (no group or other bits), else refused without being read.

The limits, documented in the operator guide (docs/operator.md, Inventory):

* :data:`MAX_SECRET_BYTES` (64 KiB) for a ``file:`` password;
* :data:`MAX_INPUT_BYTES` (64 MiB) for an inventory, fault-rule or profile
  file (50,000 nodes in the operator guide's example shape are 14 MB);
* lab files keep their own, smaller limit (``bmaas.hwlab.labspec.MAX_LABFILE_BYTES``).
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = [
    "MAX_INPUT_BYTES",
    "MAX_SECRET_BYTES",
    "FileRefused",
    "SecretExposed",
    "read_limited",
    "read_secret",
]

#: the largest ``file:`` secret bmaas reads
MAX_SECRET_BYTES = 64 * 1024
#: the largest inventory (YAML or JSON) or rule file bmaas reads
MAX_INPUT_BYTES = 64 * 1024 * 1024


class FileRefused(OSError):
    """The path is not a regular file, or it is larger than allowed.
    ``strerror`` says which, in words that follow the path."""


class SecretExposed(FileRefused):
    """A secret's file that another user owns or may read (:attr:`mode`,
    :attr:`uid`): refused before a byte of it is read."""

    def __init__(self, errno_: int, strerror: str, *, mode: int, uid: int) -> None:
        super().__init__(errno_, strerror)
        self.mode = mode
        self.uid = uid


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_limited(path: str | os.PathLike[str], *, limit: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    Raises ``OSError`` (``FileRefused`` for a non-regular, pseudo or too
    large file) with a ``strerror`` fit to follow the path in one error
    line; never blocks on a FIFO or a device and never reads more than
    ``limit + 1`` bytes."""
    return _read(path, limit=limit, private=False, follow=True)


def read_secret(
    path: str | os.PathLike[str], *, limit: int = MAX_SECRET_BYTES, follow: bool = True
) -> bytes:
    """The bytes of a file that holds a secret: as :func:`read_limited`, and
    the file must belong to this user and have no group or other permission
    bits (else :class:`SecretExposed`, nothing read). ``follow=False``
    refuses a symbolic link (``ELOOP``) rather than reading through it."""
    return _read(path, limit=limit, private=True, follow=follow)


def _read(path: str | os.PathLike[str], *, limit: int, private: bool, follow: bool) -> bytes:
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise FileRefused(errno.EISDIR, "is a directory, not a file") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(errno.EINVAL, f"is {_kind(info.st_mode)}, not a regular file")
        if private:
            _private(info)
        if info.st_size > limit:
            raise FileRefused(errno.EFBIG, f"is {info.st_size} bytes; at most {limit} are read")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, 1024 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise FileRefused(errno.EFBIG, f"grew past {limit} bytes while it was read")
        if size != info.st_size:
            # /proc and /sys files say 0 or 4096 and give something else; a
            # file on a disk gives what its size says (or was being rewritten)
            raise FileRefused(
                errno.EINVAL,
                f"is not a regular file on a disk (its size says {info.st_size} bytes, "
                f"it gave {size}: a kernel pseudo-file, or one rewritten while read)",
            )
        return b"".join(chunks)
    finally:
        os.close(fd)


def _private(info: os.stat_result) -> None:
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid != os.geteuid():
        raise SecretExposed(
            errno.EPERM,
            f"belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()})",
            mode=mode,
            uid=info.st_uid,
        )
    if mode & 0o077:
        raise SecretExposed(
            errno.EPERM,
            f"can be read by others (mode {mode:04o}): chmod 600 it",
            mode=mode,
            uid=info.st_uid,
        )
