"""Key rotations raced and killed (issue 44), for the SQLite and the
PostgreSQL tests alike: two ``KeysRepo.rotate`` in two processes at once, and
a process rotating in a loop killed (SIGKILL) at a random instant; after each
round every stored password still opens with the key file as it is, and the
key file's directory holds the key file alone.

Processes, not threads: the locks under test are the kernel's (``flock``)
and PostgreSQL's sessions, and a kill must be a real one. ``fork``: a child
starts in milliseconds with everything imported, so hundreds of rounds fit
in a test (``BMAAS_ROTATION_ROUNDS`` raises it: the issue's 1,000).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

from bmaas import credentials, sealed
from bmaas.deadline import Deadline
from bmaas.inventory import NodeSpec
from bmaas.store import Store

PASSWORDS = {f"n{i}": f"pw-{i}-Secret" for i in range(4)}
#: seconds each round's processes may take before the test calls it hung
ROUND_BOUND = 60.0


def rounds(default: int) -> int:
    return int(os.environ.get("BMAAS_ROTATION_ROUNDS", default))


def enroll(db: str, key_file: Path) -> None:
    with Store.open(db, create=True, key_file=key_file) as store:
        store.nodes.enroll(
            [
                NodeSpec(n, "fake", {"fake_machine": n, "ipmi_password": pw})
                for n, pw in PASSWORDS.items()
            ]
        )


def _rotate(db: str, key_file: str, times: int) -> None:
    with Store.open(db, key_file=Path(key_file)) as store:
        for _ in range(times):
            store.keys.rotate(Deadline.after(ROUND_BOUND))


def _process(db: str, key_file: Path, times: int = 1) -> multiprocessing.Process:
    ctx = multiprocessing.get_context("fork")
    return ctx.Process(target=_rotate, args=(db, str(key_file), times), daemon=True)


def check(db: str, key_file: Path) -> None:
    """Every password opens with the key file as it is now, and nothing but
    the key file is in its directory."""
    with Store.open(db, key_file=key_file) as store:
        store.keys.check()
        ring = sealed.read_keyring(key_file)
        for name, password in PASSWORDS.items():
            info = store.nodes.get(name).driver_info
            assert sealed.is_sealed(info["ipmi_password"])
            assert ring.unseal(info["ipmi_password"]).reveal() == password, name
            assert (
                credentials.resolve_driver_info(info, environ={sealed.KEY_FILE_ENV: str(key_file)})[
                    "ipmi_password"
                ].reveal()
                == password
            )
    assert sorted(p.name for p in key_file.parent.iterdir()) == [key_file.name]


def race(db: str, key_file: Path, count: int) -> int:
    """``count`` rounds of two rotations at once; both must succeed."""
    for _ in range(count):
        pair = [_process(db, key_file), _process(db, key_file)]
        for p in pair:
            p.start()
        for p in pair:
            p.join(ROUND_BOUND)
            assert p.exitcode == 0, f"a racing rotation ended {p.exitcode}"
        check(db, key_file)
    return count


def kill(db: str, key_file: Path, count: int, *, seed: int, within: float) -> int:
    """``count`` rounds: a process rotating in a loop, SIGKILLed after a
    random delay within ``within`` seconds; the store checked at once, then
    after a rotation that finishes (what an operator runs next)."""
    rng = random.Random(seed)
    for _ in range(count):
        victim = _process(db, key_file, times=1000)
        victim.start()
        time.sleep(rng.uniform(0.0, within))
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(ROUND_BOUND)
        assert victim.exitcode == -signal.SIGKILL
        with Store.open(db, key_file=key_file) as store:
            store.keys.check()  # every password opens right after the kill
        finisher = _process(db, key_file)
        finisher.start()
        finisher.join(ROUND_BOUND)
        assert finisher.exitcode == 0
        check(db, key_file)
    return count


def _enroll_changed(db: str, key_file: str, round_no: int) -> None:
    PASSWORDS["n0"] = f"pw-0-round-{round_no}"
    enroll(db, Path(key_file))


def race_enroll(db: str, key_file: Path, count: int) -> int:
    """``count`` rounds of a rotation beside an enrollment that seals a
    changed password: the new password is sealed with a key the file keeps."""
    ctx = multiprocessing.get_context("fork")
    for n in range(count):
        pair = [
            _process(db, key_file),
            ctx.Process(target=_enroll_changed, args=(db, str(key_file), n), daemon=True),
        ]
        for p in pair:
            p.start()
        for p in pair:
            p.join(ROUND_BOUND)
            assert p.exitcode == 0, f"{p.name} ended {p.exitcode}"
        PASSWORDS["n0"] = f"pw-0-round-{n}"
        check(db, key_file)
    return count
