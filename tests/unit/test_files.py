"""bmaas.files: what a secret's file must be (issue 44), and the pseudo-file
that passed for a regular one (``file:/proc/self/environ``)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from bmaas.files import MAX_SECRET_BYTES, FileRefused, SecretExposed, read_limited, read_secret


def test_read_secret_reads_a_0600_file_of_ours(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_bytes(b"k\n")
    path.chmod(0o600)
    assert read_secret(path) == b"k\n"
    path.chmod(0o400)
    assert read_secret(path) == b"k\n"


@pytest.mark.parametrize("loose", [0o644, 0o640, 0o604, 0o620, 0o601])
def test_read_secret_refuses_group_or_other_bits(tmp_path: Path, loose: int) -> None:
    path = tmp_path / "key"
    path.write_bytes(b"k\n")
    path.chmod(loose)
    with pytest.raises(SecretExposed) as info:
        read_secret(path)
    assert info.value.mode == loose
    assert info.value.strerror == f"can be read by others (mode {loose:04o}): chmod 600 it"


def test_read_secret_refuses_a_link_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_bytes(b"k\n")
    path.chmod(0o600)
    (tmp_path / "link").symlink_to(path)
    assert read_secret(tmp_path / "link") == b"k\n"
    with pytest.raises(OSError, match="Too many levels of symbolic links") as info:
        read_secret(tmp_path / "link", follow=False)
    assert info.value.errno == errno.ELOOP


def test_read_secret_bounds_the_size_and_the_kind(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * (MAX_SECRET_BYTES + 1))
    big.chmod(0o600)
    with pytest.raises(FileRefused, match="at most"):
        read_secret(big)
    os.mkfifo(tmp_path / "fifo", 0o600)
    with pytest.raises(FileRefused, match="FIFO"):
        read_secret(tmp_path / "fifo")


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("pseudo", ["/proc/self/environ", "/proc/self/status"])
def test_a_kernel_pseudo_file_is_not_a_regular_file(pseudo: str) -> None:
    """``fstat`` calls /proc/self/environ a regular file of 0 bytes; it
    holds the whole environment. Refused: a size that lies."""
    with pytest.raises(FileRefused, match="not a regular file on a disk"):
        read_limited(pseudo, limit=MAX_SECRET_BYTES)
    # environ is 0400 and ours: only its size gives it away; status is 0444
    with pytest.raises(FileRefused, match=r"not a regular file on a disk|read by others"):
        read_secret(pseudo)


def test_an_empty_regular_file_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    path.write_bytes(b"")
    assert read_limited(path, limit=10) == b""
