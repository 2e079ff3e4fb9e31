"""``store.keys``: the store's sealed passwords and the key that opens them.

The scheme is :mod:`bmaas.sealed`'s; this repository is what the store does
with it: seal the inline passwords an enrollment writes, tell which keys the
store's values need, check a key file against them (up front, before a
command asks any BMC), and rotate the key (``bmaas db rotate-key``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bmaas import sealed
from bmaas.deadline import Deadline
from bmaas.sealed import KeyProblem, Keyring
from bmaas.store import locks
from bmaas.store import schema as t
from bmaas.store.base import Database, Tx

__all__ = ["KeysRepo", "Rotation"]

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Rotation:
    """What :meth:`KeysRepo.rotate` did."""

    path: Path
    old: list[str]
    new: str
    #: passwords sealed again with the new key
    resealed: int
    #: nodes whose passwords were sealed again
    nodes: int


class KeysRepo:
    """``store.keys``. ``key_file``: the key file (``None``: ``BMAAS_KEY_FILE``,
    else ``~/.config/bmaas/store.key``)."""

    def __init__(self, db: Database, *, key_file: Path | None = None) -> None:
        self._db = db
        self.key_file = key_file

    @property
    def path(self) -> Path:
        return self.key_file or sealed.key_path()

    def keyring(self, *, create: bool = False) -> Keyring:
        return sealed.keyring(path=self.path, create=create)

    def needed(self) -> set[str]:
        """The key ids the store's sealed passwords need."""
        with self._db.read() as tx:
            return sealed.sealed_key_ids(tx.scalars(sa.select(t.nodes.c.driver_info)))

    def check(self) -> Keyring | None:
        """The key file, when the store holds sealed passwords (``None``
        when it holds none), checked to open them all: a missing, public or
        wrong key file is a :class:`~bmaas.sealed.KeyProblem` now, before
        any BMC is asked, not one error line per node later."""
        with self._db.read() as tx:
            infos = list(tx.scalars(sa.select(t.nodes.c.driver_info)))
        needed = sealed.sealed_key_ids(infos)
        if not needed:
            return None
        ring = self.keyring()
        missing = sorted(needed - set(ring.ids))
        if missing:
            raise KeyProblem(
                f"the store's passwords are sealed with key {', '.join(missing)}, and key file "
                f"{ring.path} holds {', '.join(ring.ids)}: set {sealed.KEY_FILE_ENV} to the "
                "store's key file",
                field=sealed.KEY_FILE_ENV,
            )
        # one value per key: a key file whose key has the right id opens them all
        for kid in sorted(needed):
            value = next(v for i in infos for v in i.values() if _sealed_with(v, kid))
            ring.unseal(value, field="driver_info")
        return ring

    def ring_for_enroll(self, tx: Tx, infos: list[Mapping[str, Any]]) -> Keyring:
        """The keyring an enrollment seals with, inside its write transaction
        and read only once no rotation is under way (:func:`~bmaas.store.locks.hold_shared`):
        a value sealed with a key the rotation is about to drop would be lost.
        A new key file is made only if the store holds no sealed value yet (a
        store whose key went missing is never given a new one silently)."""
        locks.hold_shared(tx)
        return self.keyring(create=not sealed.sealed_key_ids(infos))

    def rotate(self, deadline: Deadline, *, keep_old: bool = False) -> Rotation:
        """Seal every password with a new key. Safe to interrupt at any
        instant, to run again after an interruption, and to race: a second
        rotation (another operator, a cron job, another host on the same
        PostgreSQL store) waits for this one (:func:`~bmaas.store.locks.store_wide`:
        the store's own lock and the key file's directory), at most until
        ``deadline``.

        1. the new key is written first in the key file, the old ones kept
           after it (every value still opens);
        2. every sealed value (and any inline one left in the clear) is
           sealed again with THIS rotation's key, in ONE transaction;
        3. the keys no stored value needs any more are dropped from the file
           (``keep_old``: kept after the new one, so a backup taken before
           the rotation still opens).

        The key file is replaced atomically each time and no temporary file
        outlives a write (:func:`bmaas.sealed.write_keyfile`). A store
        holding values sealed with a key the file does not have is refused
        before anything changes."""
        path = self.path
        with locks.store_wide(self._db, deadline, what="the store's key", also=[path.parent]):
            ring = self.keyring(create=not self.needed())
            old = ring.ids
            self.check()  # everything opens with what the file holds now
            key = sealed.new_key()
            ring = ring.with_keys([key, *ring.keys])
            sealed.write_keyfile(path, ring.keys)
            resealed, nodes = self._reseal_all(ring)
            if not keep_old:
                # drop what nothing needs; under the lock that is every old key
                needed = self.needed()
                sealed.write_keyfile(
                    path, [key, *(k for k in ring.keys[1:] if sealed.key_id_of(k) in needed)]
                )
        LOG.info("store key rotated: %s -> %s (%d passwords)", old, ring.primary, resealed)
        return Rotation(path, old, ring.primary, resealed, nodes)

    def _reseal_all(self, ring: Keyring) -> tuple[int, int]:
        """Every value sealed with ``ring``'s first key, in one transaction;
        ``(passwords, nodes)`` changed."""
        resealed = nodes = 0
        with self._db.write() as tx:
            for row in list(tx.execute(sa.select(t.nodes.c.id, t.nodes.c.driver_info))):
                info = dict(row.driver_info or {})
                changed = 0
                for name, value in info.items():
                    if sealed.is_sealed(value):
                        info[name] = ring.reseal(value, field=f"driver_info.{name}")
                        changed += info[name] != value
                if sealed.needs_sealing(info):
                    before = info
                    info = sealed.seal_driver_info(info, ring)
                    changed += sum(1 for k in info if info[k] != before[k])
                if changed:
                    resealed += changed
                    nodes += 1
                    tx.execute(
                        t.nodes.update().where(t.nodes.c.id == row.id).values(driver_info=info)
                    )
        return resealed, nodes


def _sealed_with(value: object, kid: str) -> bool:
    return sealed.is_sealed(value) and str(value)[len(sealed.PREFIX) :].startswith(kid + ":")
