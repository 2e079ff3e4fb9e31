"""Power state and health as the system records them.

Commands note what they saw (``store.health.note_power``); the sync and
the retry layer *count* (``record_power_reads``,
``record_fault``), applying :func:`bmaas.health.step` inside
one transaction per node, so two counters never race on one streak.

A steady read costs no write. ``record_power_reads`` looks at a pass's
nodes first (one SELECT per :data:`BATCH`, no lock); a read that would
leave the node's record as it is -- the same power state, the streaks
already at rest -- is not written. Its "seen" time (``power_state_at``) is
refreshed only once it is :data:`SEEN_EVERY` seconds old, for every such
node of the batch in one UPDATE; only reads that change something take
the row lock and write it (:func:`apply_health`). The profile of a
200-node sync put a quarter of its client CPU in a write per node per
pass, changed or not (issue 37).

News (reads with ``notes``: an event's state and its ``power_event``
line) is written whatever the rows say, so it skips the look: one write
transaction reads its nodes' rows under the lock and writes from them --
one SELECT, an UPDATE per change, every history line in one INSERT, one
commit per batch (news that arrived together). The statements are built
once: building and hashing one per row and line was most of the 3.9 ms
of CPU an event cost the sync (issue 46; now about 0.35 ms).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from bmaas.driver import PowerState
from bmaas.faults import BmaasError
from bmaas.health import Change, Health, HealthRule, Outcome, step
from bmaas.secrets import mask_urls
from bmaas.store import schema as t
from bmaas.store.base import Database, Tx
from bmaas.store.nodes import node_in
from bmaas.store.records import RECLAIMED as _RECLAIMED
from bmaas.store.records import SYSTEM, NodeRecord, Owner, leftover_text

__all__ = [
    "BATCH",
    "RECLAIMED",
    "SEEN_EVERY",
    "HealthChange",
    "HealthRepo",
    "apply_health",
    "mark_reclaimed",
]

#: results written per transaction when recording a sweep (keeps each write short)
BATCH = 100

#: seconds after which a steady node's "seen" time (``power_state_at``) is
#: written again: a read that changes nothing is not written before then
SEEN_EVERY = 300.0

#: the fault that holds a reclaimed node out of service until it is cleaned
RECLAIMED = _RECLAIMED

_HEALTH_FIELDS = [f.name for f in dataclasses.fields(Health)]


@dataclasses.dataclass(frozen=True)
class HealthChange:
    """What one recorded read (or fault) did to a node."""

    node: str
    change: Change
    power_state: PowerState | None
    fault_count: int
    good_count: int


class HealthRepo:
    """``store.health``: power state as seen, fault counting, reclaim marks."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def set_fault(self, name: str, fault: str, *, reason: str) -> NodeRecord:
        """The system marks a node faulted at once (and in maintenance, unless a
        person already put it there). For callers that decide without counting."""
        with self._db.write() as tx:
            node_id = tx.node_id(name)
            row = tx.execute(sa.select(t.nodes).where(t.nodes.c.id == node_id)).one()
            values: dict[str, Any] = {"fault": fault, "fault_at": self._db.now()}
            if not row.maintenance:
                values |= {
                    "maintenance": True,
                    "maintenance_by": SYSTEM,
                    "maintenance_reason": mask_urls(f"{fault}: {reason}"),
                    "maintenance_at": self._db.now(),
                }
            tx.execute(
                t.nodes.update()
                .where(t.nodes.c.id == node_id)
                .values(last_error=mask_urls(reason), updated_at=self._db.now(), **values)
            )
            tx.event(node_id, "fault_set", f"{fault}: {reason}", actor=SYSTEM)
        with self._db.read() as tx:
            return node_in(tx, name)

    # -- power state and health --------------------------------------------------------

    def note_power(
        self,
        states: Mapping[str, PowerState] | None = None,
        errors: Mapping[str, str] | None = None,
    ) -> None:
        """Record what a command saw, without hysteresis (only the sync counts):
        power states read, and the last error of nodes that failed."""
        now = self._db.now()
        items: list[tuple[str, PowerState | None, str | None]]
        items = [(k, v, None) for k, v in (states or {}).items()]
        items += [(k, None, e) for k, e in (errors or {}).items()]
        for start in range(0, len(items), BATCH):
            chunk = items[start : start + BATCH]
            with self._db.write() as tx:
                ids = tx.node_ids([name for name, _, _ in chunk])
                for name, state, error in chunk:
                    values: dict[str, Any] = {}
                    if error is not None:
                        values["last_error"] = mask_urls(error)
                    if state is not None:
                        values |= {"power_state": str(state), "power_state_at": now}
                    tx.execute(t.nodes.update().where(t.nodes.c.id == ids[name]).values(**values))

    def record_power_reads(
        self,
        results: Sequence[tuple[str, PowerState | BmaasError]],
        *,
        health_rule: HealthRule = HealthRule(),  # noqa: B008 - frozen dataclass
        seen_every: float = SEEN_EVERY,
        notes: Sequence[tuple[str, str, str]] = (),
    ) -> list[HealthChange]:
        """Apply one sync pass's reads: last-seen power state plus hysteresis.

        A faulted read records power as UNKNOWN (we no longer know, and unknown
        is never off) and its message as ``last_error``. A read that would
        leave the record as it is writes nothing, unless its "seen" time is
        ``seen_every`` seconds old (0: every read refreshes it); those are
        refreshed in one UPDATE per batch. Only changes take the row lock.
        ``notes``: ``(node, kind, message)`` lines for the nodes' history,
        each written in the transaction of its node's batch (where a read
        came from: an event), so a change and its line are one write.
        """
        changes: list[HealthChange] = []
        unwritten = list(notes)
        for start in range(0, len(results), BATCH):
            chunk = results[start : start + BATCH]
            here = {name for name, _ in chunk}
            noted = [line for line in unwritten if line[0] in here]
            unwritten = [line for line in unwritten if line[0] not in here]
            names = [name for name, _ in chunk]
            if noted:  # news: written whatever the rows say, so no look first
                with self._db.write() as tx:
                    rows = _health_rows(tx, names, lock=True)
                    batch = _Batch(chunk, rows, tx.now(), health_rule, seen_every, locked=True)
                    changes += batch.write(tx, noted)
                continue
            with self._db.read() as tx:
                batch = _Batch(chunk, _health_rows(tx, names), tx.now(), health_rule, seen_every)
            if batch.touch or None in batch.done:  # else a steady batch: nothing written
                with self._db.write() as tx:
                    changes += batch.write(tx, noted)
            else:
                changes += batch.steady
        return changes

    def record_fault(
        self,
        name: str,
        fault: BmaasError,
        *,
        health_rule: HealthRule = HealthRule(),  # noqa: B008 - frozen dataclass
        context: str | None = None,
    ) -> HealthChange:
        """Count one fault against a node (a failed deploy step, say): after
        ``policy.fault_after`` in a row it goes into maintenance with
        ``policy.fault``, exactly as the sync does. Power state is left alone:
        this was not a power read. ``context`` (``"request web-1"``) prefixes
        the recorded error, so a maintenance reason names who hit the fault."""
        with self._db.write() as tx:
            node_id = tx.node_id(name)
            return apply_health(tx, node_id, name, fault, health_rule, context=context)

    def clear_reclaimed(self, name: str) -> bool:
        """The node was cleaned: drop the :data:`RECLAIMED` mark (only that
        fault; anything set meanwhile stays). Returns whether it was marked."""
        n = t.nodes
        with self._db.write() as tx:
            node_id = tx.node_id(name)
            result = tx.execute(
                n.update()
                .where(n.c.id == node_id, n.c.fault == RECLAIMED)
                .values(fault=None, fault_at=None, updated_at=tx.now())
            )
            if result.rowcount == 1:
                tx.event(node_id, "cleaned", "powered off after reclaim", actor=SYSTEM)
            return bool(result.rowcount)

    # -- what a failed attempt left on a node --------------------------------------

    def set_leftovers(self, name: str, leftovers: Mapping[str, Any], *, reason: str) -> None:
        """Record what a failed attempt left on ``name`` and could not undo
        (``{"media": url, "boot override": "cdrom", "power": "on"}``): the node
        is not claimed until :meth:`clear_leftovers`. Merged with what an
        earlier attempt left, so nothing recorded is forgotten."""
        n = t.nodes
        with self._db.write() as tx:
            node_id = tx.node_id(name)
            before = tx.scalar(sa.select(n.c.leftovers).where(n.c.id == node_id)) or {}
            merged = {**before, **{k: v for k, v in leftovers.items() if v}}
            tx.execute(
                n.update()
                .where(n.c.id == node_id)
                .values(leftovers=merged, last_error=mask_urls(reason), updated_at=tx.now())
            )
            left = leftover_text(merged)
            tx.event(node_id, "needs_cleaning", f"left on the node: {left}: {reason}", actor=SYSTEM)

    def clear_leftovers(self, name: str, *, done: str) -> bool:
        """The node was cleaned (``done`` says how): it may be claimed again.
        Returns whether it had leftovers."""
        n = t.nodes
        with self._db.write() as tx:
            node_id = tx.node_id(name)
            result = tx.execute(
                n.update()
                .where(n.c.id == node_id, n.c.leftovers.is_not(None))
                .values(leftovers=None, updated_at=tx.now())
            )
            if result.rowcount == 1:
                tx.event(node_id, "cleaned", done, actor=SYSTEM)
            return bool(result.rowcount)


#: the columns a read's outcome depends on
_COLUMNS = [t.nodes.c[k] for k in ["id", "name", "power_state", "power_state_at", *_HEALTH_FIELDS]]
#: statements built once (SQLAlchemy keeps a statement's cache key: running
#: one again costs its parameters, where building and hashing one per row was
#: most of an event's write, issue 46)
_ROWS = sa.select(*_COLUMNS).where(t.nodes.c.name.in_(sa.bindparam("names", expanding=True)))
#: FOR UPDATE on PostgreSQL (two syncs must not both count one streak), in
#: one order (no deadlock between two batches); SQLite's write lock is the
#: transaction's (BEGIN IMMEDIATE)
_LOCKED_ROWS = _ROWS.order_by(t.nodes.c.id).with_for_update()
_LOCKED_ROW = sa.select(*_COLUMNS).where(t.nodes.c.id == sa.bindparam("row_id")).with_for_update()
#: one node's row; its SET is the parameters' other keys
_UPDATE_ROW = t.nodes.update().where(t.nodes.c.id == sa.bindparam("row_id"))
_TOUCH = t.nodes.update().where(t.nodes.c.id.in_(sa.bindparam("ids", expanding=True)))


def _health_rows(tx: Tx, names: Sequence[str], *, lock: bool = False) -> dict[str, Any]:
    """The rows a read's outcome depends on, by node name (``lock``: FOR UPDATE)."""
    rows = tx.execute(_LOCKED_ROWS if lock else _ROWS, {"names": list(names)})
    return {r.name: r for r in rows}


class _Batch:
    """One batch of reads judged against its rows: what is steady (nothing
    to write, or only the "seen" time), what changes a row (:meth:`write`).
    ``locked``: the rows were read in the write transaction that writes
    them, so a change is applied to its row as read."""

    def __init__(
        self,
        chunk: Sequence[tuple[str, PowerState | BmaasError]],
        rows: dict[str, Any],
        now: float,
        health_rule: HealthRule,
        seen_every: float,
        *,
        locked: bool = False,
    ) -> None:
        self.chunk, self.rows, self.rule = chunk, rows, health_rule
        self.done: list[HealthChange | None] = []
        self.touch: list[int] = []
        #: per read, its row as read when it may be written from it
        self.fresh: list[Any] = []
        met: set[str] = set()
        for name, result in chunk:
            # a node's second read in one batch (two events: off, then
            # on) is judged against the first's outcome, not the row read
            # before either: always applied, in order, under the lock
            row = rows.get(name) if name not in met else None
            met.add(name)
            self.fresh.append(row if locked else None)
            steady = None if row is None else _steady(row, result, health_rule)
            self.done.append(steady)
            if steady is not None and row is not None:
                seen = row.power_state_at
                if seen is None or now - seen >= seen_every:
                    self.touch.append(row.id)

    @property
    def steady(self) -> list[HealthChange]:
        return [c for c in self.done if c is not None]

    def write(self, tx: Tx, noted: Sequence[tuple[str, str, str]]) -> list[HealthChange]:
        """Write the changes, the "seen" times and the history (``noted``
        lines, then each change's: one INSERT) in ``tx``; what every read did."""
        if self.touch:
            tx.execute(_TOUCH, {"ids": self.touch, "power_state_at": tx.now()})
        ids = {name: row.id for name, row in self.rows.items()}
        missing = [name for name, _ in self.chunk if name not in ids]
        missing += [line[0] for line in noted if line[0] not in ids]
        ids |= tx.node_ids(missing) if missing else {}  # raises: no such node
        history: list[tuple[int, str, str]] = []
        for i, (name, result) in enumerate(self.chunk):
            if self.done[i] is None:
                row, rule = self.fresh[i], self.rule
                self.done[i] = apply_health(
                    tx, ids[name], name, result, rule, power_read=True, row=row, history=history
                )
        history += [(ids[name], kind, message) for name, kind, message in noted]
        tx.events(history, actor=SYSTEM)
        return self.steady


def _steady(
    row: Any, result: PowerState | BmaasError, health_rule: HealthRule
) -> HealthChange | None:
    """What a read does to a node whose record it leaves as it is (the same
    power state, the streaks unchanged by :func:`bmaas.health.step`); None
    when it changes something (a fault always does: it sets last_error)."""
    if isinstance(result, BaseException) or row.power_state != result.value:
        return None
    if row.fault_count == 0 and row.good_count == 0 and row.fault != health_rule.fault:
        # the common case, without building Health: step() leaves such a
        # node as it is on a good or an unknown read
        return HealthChange(row.name, Change.NONE, result, 0, 0)
    before = Health(**{k: row._mapping[k] for k in _HEALTH_FIELDS})
    outcome = Outcome.UNKNOWN if result is PowerState.UNKNOWN else Outcome.GOOD
    after, change = step(before, outcome, health_rule)
    if change is not Change.NONE or after != before:
        return None
    return HealthChange(row.name, Change.NONE, result, before.fault_count, before.good_count)


def apply_health(
    tx: Tx,
    node_id: int,
    name: str,
    result: PowerState | BmaasError,
    health_rule: HealthRule,
    *,
    power_read: bool = False,
    context: str | None = None,
    row: Any = None,
    history: list[tuple[int, str, str]] | None = None,
) -> HealthChange:
    """Count one read or fault against a node and write its row. ``row``:
    the node's health columns as this transaction read them under its lock
    (else read here, FOR UPDATE); ``history``: where its lines go, for the
    caller to write in one INSERT (else written here)."""
    if row is None:
        # FOR UPDATE: on PostgreSQL two syncs must not both count the same streak.
        row = tx.execute(_LOCKED_ROW, {"row_id": node_id}).first()
        if row is None:
            raise tx.unknown_node(name)
    lines: list[tuple[int, str, str]] = [] if history is None else history
    before = Health(**{k: row._mapping[k] for k in _HEALTH_FIELDS})
    now = tx.now()
    values: dict[str, Any] = {}
    state: PowerState | None = None
    if isinstance(result, BaseException):
        outcome, detail = Outcome.FAULT, str(result)
        if context:
            detail = f"{context}: {detail}"
        values["last_error"] = mask_urls(detail)
        if power_read:
            state = PowerState.UNKNOWN  # we no longer know; never "off"
    else:
        state, detail = result, ""
        outcome = Outcome.UNKNOWN if state is PowerState.UNKNOWN else Outcome.GOOD
    after, change = step(before, outcome, health_rule, detail=detail)
    values |= {k: getattr(after, k) for k in _HEALTH_FIELDS}
    if state is not None:
        values |= {"power_state": state.value, "power_state_at": now}
        if row.power_state != state.value:
            lines.append((node_id, "power", f"power {row.power_state} -> {state.value}"))
    if change is Change.FAULTED:
        values |= {"fault_at": now, "updated_at": now}
        if not before.maintenance:
            values["maintenance_at"] = now
        message = f"{health_rule.fault}: {after.fault_count} faults in a row; last: {detail}"
        lines.append((node_id, "fault_set", message))
    elif change is Change.RECOVERED:
        values |= {"fault_at": None, "updated_at": now}
        if not after.maintenance:
            values["maintenance_at"] = None
        message = (
            f"{health_rule.fault} cleared after {health_rule.recover_after} good reads in a row"
        )
        lines.append((node_id, "fault_cleared", message))
    tx.execute(_UPDATE_ROW, {"row_id": node_id, **values})
    if history is None:
        tx.events(lines, actor=SYSTEM)
    return HealthChange(name, change, state, after.fault_count, after.good_count)


def mark_reclaimed(tx: Tx, nodes: list[str], owner: Owner) -> None:
    n = t.nodes
    ids = tx.node_ids(nodes)
    for name in nodes:
        tx.execute(
            n.update()
            .where(n.c.id == ids[name], n.c.fault.is_(None))
            .values(fault=RECLAIMED, fault_at=tx.now(), updated_at=tx.now())
        )
        message = f"needs cleaning (power off, eject media): held by dead {owner.describe()}"
        tx.event(ids[name], "needs_cleaning", message, actor=SYSTEM)
