"""Reading a file a person named, without trusting what it turns out to be.

A path in an inventory (``ipmi_password: file:...``) or on the command line
(``--inventory``, ``--lab-file``) may name something that never ends or never
answers: ``/dev/zero`` (``enroll --dry-run`` grew to 17 GB reading one as a
password), a FIFO nobody writes to (``open`` blocks forever), a directory, a
terminal. :func:`read_limited` opens without blocking (``O_NONBLOCK``), looks
at what it opened (``fstat``) before reading a byte, accepts only a regular
file, refuses one larger than the caller's limit from its size, and even then
reads at most ``limit + 1`` bytes (a file that grows while it is read).

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

__all__ = ["MAX_INPUT_BYTES", "MAX_SECRET_BYTES", "FileRefused", "read_limited"]

#: the largest ``file:`` secret bmaas reads
MAX_SECRET_BYTES = 64 * 1024
#: the largest inventory (YAML or JSON) or rule file bmaas reads
MAX_INPUT_BYTES = 64 * 1024 * 1024


class FileRefused(OSError):
    """The path is not a regular file, or it is larger than allowed.
    ``strerror`` says which, in words that follow the path."""


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

    Raises ``OSError`` (``FileRefused`` for a non-regular or too large file)
    with a ``strerror`` fit to follow the path in one error line; never
    blocks on a FIFO or a device and never reads more than ``limit + 1``
    bytes."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise FileRefused(errno.EISDIR, "is a directory, not a file") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(errno.EINVAL, f"is {_kind(info.st_mode)}, not a regular file")
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
        return b"".join(chunks)
    finally:
        os.close(fd)
