"""Nodes: enrollment, queries, history and a person's maintenance.

Maintenance has two authors and the store keeps them apart: a person sets
``maintenance`` (with ``maintenance_by`` = their name and a reason); the
system sets ``fault`` (and maintenance with ``maintenance_by = "system"``,
see :mod:`bmaas.store.health`). The system never clears a person's
maintenance; a person's ``unset`` clears both, as Ironic's API does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from bmaas import sealed
from bmaas.driver import PowerState
from bmaas.faults import InputError
from bmaas.secrets import mask_urls
from bmaas.store import locks
from bmaas.store import schema as t
from bmaas.store.base import Database, Tx
from bmaas.store.keys import KeysRepo
from bmaas.store.records import (
    QUIRKS_KEY,
    SYSTEM,
    UPDATE_KEY,
    Event,
    NodeRecord,
    ProvisionState,
    node_record,
)

if TYPE_CHECKING:
    from bmaas.inventory.specs import NetworkSpec, NodeSpec

__all__ = ["QUIRKS_KEY", "EnrollReport", "NodesRepo", "node_in"]


@dataclasses.dataclass(frozen=True)
class EnrollReport:
    created: list[str]
    updated: list[str]
    unchanged: list[str]
    #: enrolled nodes the file did not mention (left as they are)
    not_in_file: list[str]


def _node_query() -> sa.Select[Any]:
    n, s, a, o = t.nodes, t.segments, t.allocations, t.owners
    return (
        sa.select(
            n,
            s.c.name.label("segment_name"),
            o.c.id.label("owner_id"),
            o.c.kind.label("owner_kind"),
            o.c.name.label("owner_name"),
        )
        .select_from(
            n.outerjoin(s, s.c.id == n.c.segment_id)
            .outerjoin(a, a.c.node_id == n.c.id)
            .outerjoin(o, o.c.id == a.c.owner_id)
        )
        .order_by(n.c.name)
    )


def _record(row: sa.Row[Any]) -> NodeRecord:
    return node_record(row._mapping)


def _event_row(
    node_id: int, at: float, kind: str, message: str, actor: str | None
) -> dict[str, Any]:
    """A node_events row, as :meth:`Tx.event` writes one."""
    return {
        "node_id": node_id,
        "at": at,
        "kind": kind,
        "actor": actor,
        "message": mask_urls(message),
        "data": {},
    }


class NodesRepo:
    """``store.nodes``: the fleet, its history and a person's maintenance."""

    def __init__(self, db: Database, *, keys: KeysRepo | None = None) -> None:
        self._db = db
        #: seals the inline passwords an enrollment writes (:mod:`bmaas.sealed`)
        self._keys = keys or KeysRepo(db)

    # -- enrollment --------------------------------------------------------------

    def segment_names(self) -> set[str]:
        with self._db.read() as tx:
            return set(tx.scalars(sa.select(t.segments.c.name)))

    def enroll(
        self,
        nodes: Sequence[NodeSpec],
        networks: Sequence[NetworkSpec] = (),
        *,
        actor: str | None = None,
    ) -> EnrollReport:
        """Create or update networks, segments and nodes in ONE transaction.

        Nodes are matched by name; an update changes only what the inventory
        describes and keeps state (power, maintenance, allocations, history).
        Validation belongs to :mod:`bmaas.inventory`; this only refuses what it
        cannot store (a segment that exists nowhere).
        """
        now = self._db.now()
        created: list[str] = []
        updated: list[str] = []
        unchanged: list[str] = []
        sealing = any(sealed.needs_sealing(spec.driver_info) for spec in nodes)
        with self._db.write() as tx:
            if sealing:  # before the first read: the stored values and the key agree
                locks.hold_shared(tx)
            for net in networks:
                upsert_network(tx, net, now)
            segment_ids = {
                row.name: row.id
                for row in tx.execute(sa.select(t.segments.c.name, t.segments.c.id))
            }
            existing = {row.name: row for row in tx.execute(sa.select(t.nodes))}
            ring = None
            if sealing:
                # inline passwords are stored sealed, never in the clear
                infos = [row.driver_info or {} for row in existing.values()]
                ring = self._keys.ring_for_enroll(tx, infos)
            # Bulk statements (executemany): one round of SQL per kind of
            # change, not one per node: 50,000 nodes enroll in seconds.
            new_rows: list[dict[str, Any]] = []
            changes: list[tuple[int, dict[str, Any], list[str]]] = []
            for spec in nodes:
                segment_id = None
                if spec.network_segment is not None:
                    if spec.network_segment not in segment_ids:
                        raise InputError(
                            f"unknown segment {spec.network_segment!r}",
                            field="network_segment",
                            node=spec.name,
                        )
                    segment_id = segment_ids[spec.network_segment]
                row = existing.get(spec.name)
                info = dict(spec.driver_info)
                if ring is not None:
                    before = row.driver_info if row is not None else None
                    info = sealed.seal_driver_info(info, ring, before=before)
                values = {
                    "driver": spec.driver,
                    "driver_info": info,
                    "resource_class": spec.resource_class,
                    "properties": dict(spec.properties),
                    "extra": dict(spec.extra),
                    "segment_id": segment_id,
                }
                if row is None:
                    created.append(spec.name)
                    new_rows.append({"name": spec.name, **values})
                    continue
                changed = sorted(k for k, v in values.items() if row._mapping[k] != v)
                if not changed:
                    unchanged.append(spec.name)
                    continue
                updated.append(spec.name)
                changes.append((row.id, values, changed))
            events: list[dict[str, Any]] = []
            if new_rows:
                tx.execute(
                    t.nodes.insert().values(
                        power_state=PowerState.UNKNOWN.value,
                        provision_state=ProvisionState.AVAILABLE.value,
                        maintenance=False,
                        fault_count=0,
                        good_count=0,
                        created_at=now,
                        updated_at=now,
                    ),
                    new_rows,
                )
                ids = dict(tx.conn.execute(sa.select(t.nodes.c.name, t.nodes.c.id)).all())
                events += [
                    _event_row(ids[r["name"]], now, "enrolled", f"enrolled ({r['driver']})", actor)
                    for r in new_rows
                ]
            if changes:
                tx.execute(
                    t.nodes.update()
                    .where(t.nodes.c.id == sa.bindparam("node_id"))
                    .values(updated_at=now),
                    [{"node_id": node_id, **values} for node_id, values, _ in changes],
                )
                # Field names only: driver_info may hold an inline password.
                events += [
                    _event_row(node_id, now, "updated", "re-enrolled: " + ", ".join(ch), actor)
                    for node_id, _, ch in changes
                ]
            if events:
                tx.execute(t.node_events.insert(), events)
        named = {spec.name for spec in nodes}
        not_in_file = sorted(name for name in existing if name not in named)
        return EnrollReport(created, updated, unchanged, not_in_file)

    # -- queries -------------------------------------------------------------------

    def find(
        self,
        names: Iterable[str] | None = None,
        *,
        maintenance: bool | None = None,
        faulted: bool | None = None,
        fault: str | None = None,
        provision_state: ProvisionState | str | None = None,
        power_state: PowerState | str | None = None,
        driver: str | None = None,
        resource_class: str | None = None,
        allocated: bool | None = None,
        needs_cleaning: bool | None = None,
    ) -> list[NodeRecord]:
        """Nodes by name order, filtered. Every filter left ``None`` is ignored.
        ``needs_cleaning``: a failed attempt left something on the node
        (:attr:`NodeRecord.leftovers`)."""
        n, a = t.nodes, t.allocations
        query = _node_query()
        if names is not None:
            names = list(names)
            if not names:  # an events pass with nothing to read: no query at all
                return []
            query = query.where(n.c.name.in_(names))
        if maintenance is not None:
            query = query.where(n.c.maintenance.is_(maintenance))
        if faulted is not None:
            query = query.where(n.c.fault.is_not(None) if faulted else n.c.fault.is_(None))
        if fault is not None:
            query = query.where(n.c.fault == fault)
        if provision_state is not None:
            query = query.where(n.c.provision_state == str(provision_state))
        if power_state is not None:
            query = query.where(n.c.power_state == str(power_state))
        if driver is not None:
            query = query.where(n.c.driver == driver)
        if resource_class is not None:
            query = query.where(n.c.resource_class == resource_class)
        if allocated is not None:
            query = query.where(a.c.id.is_not(None) if allocated else a.c.id.is_(None))
        if needs_cleaning is not None:
            left = n.c.leftovers
            query = query.where(left.is_not(None) if needs_cleaning else left.is_(None))
        with self._db.read() as tx:
            return [_record(row) for row in tx.execute(query)]

    def any_to_clean(self, fault: str) -> bool:
        """Whether any node carries ``fault`` (a reclaimed node's mark) or
        leftovers of a failed attempt: one light query, so that a sync pass
        with nothing to clean, nearly every pass, builds no node query for
        each kind (issue 46: most of a quiet events pass's store CPU)."""
        n = t.nodes
        query = sa.select(n.c.id).where(sa.or_(n.c.fault == fault, n.c.leftovers.is_not(None)))
        with self._db.read() as tx:
            return tx.execute(query.limit(1)).first() is not None

    def identities(self) -> list[tuple[str, str, str, str | None]]:
        """``(name, driver, driver_info as stored in text, fault)`` of every
        node, by name: what tells a sync whether the records it read a pass
        ago still serve (who to read, how, who is fenced), without building
        a record per node each pass (issue 37)."""
        n = t.nodes
        query = sa.select(n.c.name, n.c.driver, sa.cast(n.c.driver_info, sa.Text), n.c.fault)
        with self._db.read() as tx:
            rows: list[Any] = list(tx.execute(query.order_by(n.c.name)))
        return [(str(name), str(driver), str(info), fault) for name, driver, info, fault in rows]

    def get(self, name: str) -> NodeRecord:
        """One node; ``InputError`` (with a did-you-mean) when there is none."""
        with self._db.read() as tx:
            return node_in(tx, name)

    def require(self, names: Sequence[str]) -> list[NodeRecord]:
        """The named nodes in the order given; ``InputError`` naming the first
        unknown one, before anything acts on any of them."""
        found = {r.name: r for r in self.find(names)}
        missing = [name for name in names if name not in found]
        if missing:
            self.get(missing[0])  # raises with a did-you-mean
        return [found[name] for name in dict.fromkeys(names)]

    def events(self, name: str, *, limit: int = 20) -> list[Event]:
        """A node's most recent events, newest last."""
        e = t.node_events
        with self._db.read() as tx:
            node_id = tx.node_id(name)
            rows = tx.execute(
                sa.select(e).where(e.c.node_id == node_id).order_by(e.c.id.desc()).limit(limit)
            ).all()
        return [
            Event(name, row.at, row.kind, row.actor, row.message, dict(row.data))
            for row in reversed(rows)
        ]

    def add_event(
        self,
        name: str,
        kind: str,
        message: str,
        *,
        actor: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        """Append to a node's history (deploy steps, operator notes)."""
        with self._db.write() as tx:
            tx.event(tx.node_id(name), kind, message, actor=actor, data=data)

    def add_events(
        self, events: Sequence[tuple[str, str, str]], *, actor: str | None = None
    ) -> None:
        """Append ``(node, kind, message)`` events in one transaction (a command's
        actions over many nodes)."""
        if not events:
            return
        with self._db.write() as tx:
            ids = tx.node_ids([name for name, _, _ in events])
            for name, kind, message in events:
                tx.event(ids[name], kind, message, actor=actor)

    def counts(self) -> list[tuple[str, bool, str | None, int]]:
        """``(power_state, maintenance, fault, count)`` for every combination
        present: what the metrics gauge exports."""
        n = t.nodes
        query = sa.select(n.c.power_state, n.c.maintenance, n.c.fault, sa.func.count()).group_by(
            n.c.power_state, n.c.maintenance, n.c.fault
        )
        with self._db.read() as tx:
            return [(r[0], bool(r[1]), r[2], int(r[3])) for r in tx.conn.execute(query)]

    # -- maintenance -----------------------------------------------------------------

    def record_quirks(self, name: str, quirks: Collection[str]) -> list[str]:
        """Add capability facts learned from a node's BMC (``extra.bmc_quirks``,
        :class:`bmaas.driver.Quirk`); returns the ones that are new, each also
        recorded once as a ``bmc_quirk`` event. Never touches health."""
        with self._db.write() as tx:
            node_id = tx.node_id(name)
            row = tx.execute(sa.select(t.nodes.c.extra).where(t.nodes.c.id == node_id)).one()
            extra = dict(row[0] or {})
            known = set(extra.get(QUIRKS_KEY) or ())
            new = sorted(set(quirks) - known)
            if not new:
                return []
            extra[QUIRKS_KEY] = sorted(known | set(new))
            tx.execute(
                t.nodes.update()
                .where(t.nodes.c.id == node_id)
                .values(extra=extra, updated_at=self._db.now())
            )
            for quirk in new:
                tx.event(node_id, "bmc_quirk", f"the BMC shows {quirk}", actor=SYSTEM)
        return new

    def mark_update(self, name: str, *, until: float | None, by: str, what: str = "") -> None:
        """Mark a firmware update running on the node until ``until`` (store
        time) at the latest, or clear the mark (``until=None``), with a
        ``firmware_update`` event: the sync counts none of the node's faults
        while it is marked (:func:`bmaas.store.records.updating`)."""
        with self._db.write() as tx:
            node_id = tx.node_id(name)
            row = tx.execute(sa.select(t.nodes.c.extra).where(t.nodes.c.id == node_id)).one()
            extra = dict(row[0] or {})
            if until is None:
                extra.pop(UPDATE_KEY, None)
            else:
                extra[UPDATE_KEY] = {"until": until, "by": by}
            tx.execute(
                t.nodes.update()
                .where(t.nodes.c.id == node_id)
                .values(extra=extra, updated_at=self._db.now())
            )
            ended = "firmware update ended"
            said = what or ("firmware update started" if until is not None else ended)
            tx.event(node_id, "firmware_update", said, actor=by)

    def set_maintenance(self, name: str, *, reason: str, by: str) -> NodeRecord:
        """A person puts a node into maintenance. It is never claimed while
        there; what it holds now stays until its owner lets go."""
        if not reason.strip():
            raise InputError("a reason is required", field="--reason", node=name)
        if by == SYSTEM:
            raise InputError(f"{SYSTEM!r} is reserved for bmaas itself", field="--by", node=name)
        with self._db.write() as tx:
            node_id = tx.node_id(name)
            tx.execute(
                t.nodes.update()
                .where(t.nodes.c.id == node_id)
                .values(
                    maintenance=True,
                    maintenance_reason=reason,
                    maintenance_by=by,
                    maintenance_at=self._db.now(),
                    updated_at=self._db.now(),
                )
            )
            tx.event(node_id, "maintenance_set", reason, actor=by)
        return self.get(name)

    def unset_maintenance(self, name: str, *, by: str) -> NodeRecord:
        """A person takes a node out of maintenance. This also clears a fault
        the system set: the person has looked at the node and vouches for it."""
        with self._db.write() as tx:
            node_id = tx.node_id(name)
            before = tx.execute(sa.select(t.nodes.c.fault).where(t.nodes.c.id == node_id)).one()
            tx.execute(
                t.nodes.update()
                .where(t.nodes.c.id == node_id)
                .values(
                    maintenance=False,
                    maintenance_reason=None,
                    maintenance_by=None,
                    maintenance_at=None,
                    fault=None,
                    fault_at=None,
                    fault_count=0,
                    good_count=0,
                    updated_at=self._db.now(),
                )
            )
            message = "maintenance cleared"
            if before.fault:
                message += f" (and fault {before.fault!r})"
            tx.event(node_id, "maintenance_unset", message, actor=by)
        return self.get(name)


def upsert_network(tx: Tx, net: NetworkSpec, now: float) -> None:
    network_id = tx.scalar(sa.select(t.networks.c.id).where(t.networks.c.name == net.name))
    if network_id is None:
        network_id = tx.execute(
            t.networks.insert().values(name=net.name, created_at=now)
        ).inserted_primary_key[0]  # type: ignore[index]
    for seg in net.segments:
        row = tx.execute(sa.select(t.segments).where(t.segments.c.name == seg.name)).first()
        values = {
            "cidr": seg.cidr,
            "gateway_ip": seg.gateway_ip,
            "allocation_pools": [dict(p) for p in seg.allocation_pools],
        }
        if row is None:
            tx.execute(
                t.segments.insert().values(
                    name=seg.name, network_id=network_id, created_at=now, **values
                )
            )
        elif row.network_id != network_id:
            raise InputError(
                f"segment {seg.name!r} already belongs to another network",
                field=f"networks.{net.name}.segments",
            )
        else:
            tx.execute(t.segments.update().where(t.segments.c.id == row.id).values(**values))


def node_in(tx: Tx, name: str) -> NodeRecord:
    """One node, read inside ``tx``; ``InputError`` (with a did-you-mean)."""
    row = tx.execute(_node_query().where(t.nodes.c.name == name)).first()
    if row is None:
        raise tx.unknown_node(name)
    return _record(row)
