"""hwlab's files on disk (bmaas.hwlab.statefiles): a 0700 state directory,
0600 files, nothing opened through a symbolic link -- the helpers, the files
the lab writes with them, and ``hwlab up`` refusing a planted link (issue 36)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas.hwlab import statefiles, statelock
from bmaas.hwlab.cli import cli as hwlab_cli
from bmaas.hwlab.events import EventLog
from bmaas.hwlab.lab import write_json
from bmaas.hwlab.statefiles import StateFileRefused
from bmaas.hwlab.tls import make_certificate

NOBODY = 65534


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file of the owner's that a planted link points at: must stay untouched."""
    path = tmp_path / "victim"
    path.write_text("precious\n")
    return path


def test_a_new_state_dir_is_0700_with_its_parents(tmp_path: Path) -> None:
    state = statefiles.prepare_dir(tmp_path / "a" / "b" / "state")
    assert mode(state) == 0o700


def test_an_existing_state_dir_of_ours_is_tightened(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o755)
    statefiles.prepare_dir(state)
    assert mode(state) == 0o700


def test_a_state_dir_that_is_a_link_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o755)
    (tmp_path / "state").symlink_to(real)
    with pytest.raises(StateFileRefused, match="state is a symbolic link"):
        statefiles.prepare_dir(tmp_path / "state")
    assert mode(real) == 0o755  # not tightened through the link either


def test_a_shared_directory_is_refused_not_tightened(tmp_path: Path) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    with pytest.raises(StateFileRefused, match=r"shared directory \(mode 1777\)"):
        statefiles.prepare_dir(shared)
    assert mode(shared) == 0o1777


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root (CI runs as root)")
def test_a_state_dir_of_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(StateFileRefused, match=f"belongs to uid {NOBODY}"):
        statefiles.prepare_dir(theirs)


def test_open_private_creates_0600_and_tightens_an_existing_file(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    os.close(statefiles.open_private(fresh, os.O_WRONLY | os.O_CREAT))
    assert mode(fresh) == 0o600
    loose = tmp_path / "loose"
    loose.write_text("")
    loose.chmod(0o644)
    os.close(statefiles.open_private(loose, os.O_WRONLY | os.O_APPEND | os.O_CREAT))
    assert mode(loose) == 0o600


def test_open_private_refuses_a_link_naming_it(tmp_path: Path, victim: Path) -> None:
    link = tmp_path / "hwlab.log"
    link.symlink_to(victim)
    with pytest.raises(StateFileRefused) as info:
        statefiles.open_private(link, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    assert str(info.value).startswith(f"{link} is a symbolic link")
    assert "\n" not in str(info.value)
    assert victim.read_text() == "precious\n"


def test_open_private_refuses_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(StateFileRefused, match="not a regular file"):
        statefiles.open_private(fifo, os.O_RDONLY | os.O_NONBLOCK)


def test_write_private_is_0600_and_refuses_a_link(tmp_path: Path, victim: Path) -> None:
    target = tmp_path / "lab.json"
    write_json(target, {"state": "ready"})
    assert mode(target) == 0o600
    pid = tmp_path / "hwlab.pid"
    pid.symlink_to(victim)
    with pytest.raises(StateFileRefused, match=r"hwlab\.pid is a symbolic link"):
        statefiles.write_private(pid, "123\n")
    assert victim.read_text() == "precious\n"
    assert pid.is_symlink()


def test_write_private_never_writes_through_a_link_at_its_temporary(
    tmp_path: Path, victim: Path
) -> None:
    target = tmp_path / "inventory.yaml"
    (tmp_path / "inventory.yaml.tmp").symlink_to(victim)
    statefiles.write_private(target, "nodes: []\n")
    assert target.read_text() == "nodes: []\n"
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "inventory.yaml.tmp").exists()


def test_read_private_refuses_a_link(tmp_path: Path, victim: Path) -> None:
    (tmp_path / "lab.json").symlink_to(victim)
    with pytest.raises(StateFileRefused, match=r"lab\.json is a symbolic link"):
        statefiles.read_private(tmp_path / "lab.json")


def test_a_token_is_fresh_0600_and_read_back(tmp_path: Path) -> None:
    first = statefiles.create_token(tmp_path)
    assert mode(tmp_path / "token") == 0o600
    assert len(first) >= 40
    assert statefiles.read_token(tmp_path) == first
    second = statefiles.create_token(tmp_path)  # a second `hwlab up`
    assert second != first
    assert statefiles.read_token(tmp_path) == second


def test_a_token_link_is_refused(tmp_path: Path, victim: Path) -> None:
    (tmp_path / "token").symlink_to(victim)
    with pytest.raises(StateFileRefused, match="token is a symbolic link"):
        statefiles.create_token(tmp_path)
    with pytest.raises(StateFileRefused, match="token is a symbolic link"):
        statefiles.read_token(tmp_path)
    assert victim.read_text() == "precious\n"


def test_a_missing_token_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(StateFileRefused, match=r"token is missing.*hwlab up"):
        statefiles.read_token(tmp_path)


@pytest.mark.parametrize("loose", [0o644, 0o640, 0o604, 0o660])
def test_a_token_others_may_read_is_refused(tmp_path: Path, loose: int) -> None:
    """Issue 44: `hwlab status` used a token file made 0644 without a word
    (the store's key file is refused in that case). Refused, nothing read."""
    statefiles.create_token(tmp_path)
    (tmp_path / "token").chmod(loose)
    with pytest.raises(StateFileRefused) as info:
        statefiles.read_token(tmp_path)
    assert str(info.value) == (
        f"{tmp_path / 'token'} can be read by others (mode {loose:04o}): "
        f"chmod 600 {tmp_path / 'token'} (the lab's control token: whoever reads it "
        "gives the lab orders)"
    )


def test_a_token_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "token", 0o600)
    with pytest.raises(StateFileRefused, match="token is a FIFO"):
        statefiles.read_token(tmp_path)


def test_hwlab_status_refuses_a_token_others_may_read(tmp_path: Path) -> None:
    """CLI level: one line, exit 2, before any request is sent."""
    state = statefiles.prepare_dir(tmp_path / "state")
    write_json(state / "lab.json", {"state": "ready", "control_url": "http://127.0.0.1:9"})
    statefiles.create_token(state)
    (state / "token").chmod(0o644)
    result = CliRunner().invoke(hwlab_cli, ["status", "--state-dir", str(state)])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {state / 'token'} can be read by others (mode 0644)")


def test_the_event_log_is_0600_and_refuses_a_link(tmp_path: Path, victim: Path) -> None:
    log = EventLog(str(tmp_path / "events.jsonl"))
    log.close()
    assert mode(tmp_path / "events.jsonl") == 0o600
    (tmp_path / "other.jsonl").symlink_to(victim)
    with pytest.raises(StateFileRefused, match=r"other\.jsonl is a symbolic link"):
        EventLog(str(tmp_path / "other.jsonl"))
    assert victim.read_text() == "precious\n"


def test_the_lock_file_refuses_a_link(tmp_path: Path, victim: Path) -> None:
    (tmp_path / statelock.LOCK_FILE).symlink_to(victim)
    with pytest.raises(StateFileRefused, match=r"hwlab\.lock is a symbolic link"):
        statelock.acquire(tmp_path)


def test_a_certificate_is_written_0600(tmp_path: Path) -> None:
    cert = make_certificate(tmp_path / "tls", ["127.0.0.1"])
    assert mode(tmp_path / "tls") == 0o700
    for path in (cert.ca_path, cert.cert_path, cert.key_path):
        assert mode(path) == 0o600, path


@pytest.mark.parametrize("planted", ["hwlab.pid", "hwlab.log"])
def test_hwlab_up_refuses_a_planted_link_with_one_line(
    planted: str, tmp_path: Path, victim: Path
) -> None:
    """Issue 36: `hwlab up` wrote through a planted hwlab.pid or hwlab.log
    link. Now: exit 2, one line naming the path, the target untouched, no
    lab started."""
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    (state / planted).symlink_to(victim)
    args = ["up", "--nodes", "1", "--protocols", "ipmi", "--state-dir", str(state)]
    result = CliRunner().invoke(hwlab_cli, args, catch_exceptions=False)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert lines == [
        f"error: {state / planted} is a symbolic link; hwlab opens nothing in its state "
        "directory through a link (remove it)"
    ]
    assert victim.read_text() == "precious\n"
    assert mode(state) == 0o700  # tightened before anything was written
    assert not (state / "lab.json").exists()
