"""hwlab's files on disk: a state directory only its owner enters, files only
its owner reads, nothing opened through a symbolic link.

A lab's state directory holds the BMCs' credentials (``inventory.yaml``), the
control API's token, the lab's log and its event log. Issue 36 found the
directory 0755, ``events.jsonl`` 0644, and ``hwlab up`` writing through a
``hwlab.pid`` or ``hwlab.log`` symlink planted there (into any file its owner
may write). Every file hwlab keeps there goes through this module:

* :func:`prepare_dir` creates the directory 0700; one that exists must be a
  directory (not a link) owned by this user and not shared (sticky or
  world-writable, like ``/tmp``), and is tightened to 0700;
* :func:`open_private` opens with ``O_NOFOLLOW``, creating 0600; a file
  that exists must be a regular file of ours, and is tightened to 0600;
* :func:`write_private` replaces a file atomically through a fresh
  temporary (``O_EXCL|O_NOFOLLOW``), refusing a link at either name;
* :func:`read_private` reads a small file without following a link;
* :func:`create_token` writes the control API's token, fresh (``O_EXCL``),
  0600; :func:`read_token` refuses one that others may read.

Each refusal is a :class:`StateFileRefused` (an ``InputError``): one line
naming the path, exit 2 on the command line.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

from bmaas.faults import InputError
from bmaas.files import SecretExposed, read_secret

__all__ = [
    "TOKEN_FILE",
    "StateFileRefused",
    "create_token",
    "open_private",
    "prepare_dir",
    "read_private",
    "read_token",
    "remove",
    "write_private",
]

#: the control API's token, in the state directory (see bmaas.hwlab.controlauth)
TOKEN_FILE = "token"  # noqa: S105 - a file name, not a secret
#: bytes of randomness in a token (43 URL-safe characters)
TOKEN_BYTES = 32
#: the largest file :func:`read_private` reads (lab.json of a 10,000-node lab is ~1.5 MB)
MAX_STATE_FILE = 64 * 1024 * 1024

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


class StateFileRefused(InputError):
    """A path in the state directory hwlab will not use as it is."""

    code = "state_file_refused"


def _link(path: Path) -> StateFileRefused:
    return StateFileRefused(
        f"{path} is a symbolic link; hwlab opens nothing in its state directory "
        "through a link (remove it)"
    )


def _not_ours(path: Path, uid: int) -> StateFileRefused:
    return StateFileRefused(
        f"{path} belongs to uid {uid}, not to this user (uid {os.geteuid()}); "
        "pick a state directory of your own"
    )


def prepare_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as a directory only its owner enters: created 0700 (its
    missing parents too), or, when it exists, checked (a directory, not a
    link, ours) and tightened to 0700."""
    path = Path(path)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700, parents=True)
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise _link(path)
    if not stat.S_ISDIR(info.st_mode):
        raise StateFileRefused(f"{path} is not a directory")
    if info.st_uid != os.geteuid():
        raise _not_ours(path, info.st_uid)
    mode = stat.S_IMODE(info.st_mode)
    if mode & (stat.S_ISVTX | stat.S_IWOTH):
        # /tmp itself, say: tightening it would break every other user
        raise StateFileRefused(
            f"{path} is a shared directory (mode {mode:04o}); give hwlab a directory of its own"
        )
    if mode & 0o077:
        os.chmod(path, 0o700, follow_symlinks=False)
    return path


def open_private(path: str | os.PathLike[str], flags: int) -> int:
    """``os.open(path, flags)`` for a file of the state directory: never
    through a link, created 0600; a file that exists must be a regular file
    of ours and is tightened to 0600. Returns the descriptor."""
    path = Path(path)
    try:
        fd = os.open(path, flags | _NOFOLLOW, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _link(path) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StateFileRefused(f"{path} is not a regular file")
        if info.st_uid != os.geteuid():
            raise _not_ours(path, info.st_uid)
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refuse_link(path: Path) -> None:
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            raise _link(path)
    except FileNotFoundError:
        pass


def write_private(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` with ``text`` atomically, readable by its owner only.

    The temporary is made afresh (``O_EXCL``: a stale one, or a link planted
    at its name, is removed first; ``unlink`` never follows a link); a link
    at ``path`` itself is refused rather than replaced, so a planted one is
    seen."""
    path = Path(path)
    _refuse_link(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_private(path: str | os.PathLike[str], *, limit: int = MAX_STATE_FILE) -> str:
    """The text of a state file, read without following a link (a link is
    refused) and at most ``limit`` bytes. ``FileNotFoundError`` as usual."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _link(path) from None
        raise
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StateFileRefused(f"{path} is not a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise StateFileRefused(f"{path} is larger than {limit} bytes")
    return data.decode("utf-8", errors="replace")


def remove(path: str | os.PathLike[str]) -> None:
    """Remove a state file if it is there (a link is removed, never followed)."""
    Path(path).unlink(missing_ok=True)


def create_token(state_dir: str | os.PathLike[str]) -> str:
    """A fresh control API token, written to ``STATE_DIR/token`` (0600,
    ``O_CREAT|O_EXCL|O_NOFOLLOW``: the one made here, nothing that was
    there). A stale token (a lab that crashed) is replaced; a link refused."""
    path = Path(state_dir) / TOKEN_FILE
    _refuse_link(path)
    remove(path)
    token = secrets.token_urlsafe(TOKEN_BYTES)
    try:
        fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        raise StateFileRefused(
            f"{path} appeared while hwlab was creating it; another process is writing "
            "in this state directory"
        ) from None
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(token + "\n")
    return token


def read_token(state_dir: str | os.PathLike[str]) -> str:
    """The running lab's control token, for its owner; one line saying why
    not otherwise (another user cannot read it: that is the point).

    Read as every secret's file is (:func:`bmaas.files.read_secret`): a
    token file that others may read (``chmod 644`` after the lab wrote it
    0600), that another user owns, or that is a link is refused, not used:
    whoever could read it could give the lab orders."""
    path = Path(state_dir) / TOKEN_FILE
    try:
        data = read_secret(path, limit=1024, follow=False)
    except FileNotFoundError:
        raise StateFileRefused(
            f"{path} is missing: the lab's control API takes orders only with its token "
            "(restart the lab with 'hwlab up')"
        ) from None
    except PermissionError:
        raise StateFileRefused(
            f"cannot read {path}: permission denied (only the lab's owner may control it)"
        ) from None
    except SecretExposed as exc:
        why = (exc.strerror or "").replace("chmod 600 it", f"chmod 600 {path}")
        raise StateFileRefused(
            f"{path} {why} (the lab's control token: whoever reads it gives the lab orders)"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _link(path) from None
        raise StateFileRefused(f"{path} {exc.strerror}") from None
    token = data.decode("utf-8", errors="replace").strip()
    if not token:
        raise StateFileRefused(f"{path} is empty (restart the lab with 'hwlab up')")
    return token
