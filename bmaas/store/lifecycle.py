"""The steps of a request's life, each ONE transaction.

These are what the retry layer (``bmaas.retry``) and moves call, so that no
crash between two writes can leave a node held by two owners, held by
nobody while still "deploying", or a port bound to a node nobody holds:

* ``store.lifecycle.release_attempt`` - an attempt failed: drop its node,
  unbind the request's ports from it, record the fault;
* ``store.lifecycle.promote_attempt`` - an attempt succeeded: the new
  instance owns the node and the request's ports, the attempt and request end;
* ``store.lifecycle.begin_move`` / ``finish_move`` / ``abort_move`` - the
  move owns the source, the instance owns the target; success drops the
  source, failure drops the target and gives the source back;
* ``store.lifecycle.delete_owner`` and ``store.lifecycle.reclaim_expired``
  - an owner ends (or its process died): everything it held goes back.
"""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa

from bmaas.faults import BmaasError, InputError, NodeUnavailable
from bmaas.health import HealthRule
from bmaas.secrets import mask_urls
from bmaas.store import schema as t
from bmaas.store.base import Database, Tx, owner_in, owner_row, require_alive
from bmaas.store.health import apply_health, mark_reclaimed
from bmaas.store.owners import (
    DEFAULT_LEASE_TTL,
    Reclaimed,
    allocations_in,
    claim_in,
    drop_allocations,
    insert_owner,
    set_state,
    swap_one,
)
from bmaas.store.ports import cleanup_owner_ports
from bmaas.store.records import Owner, OwnerKind, ProvisionState

__all__ = ["LifecycleSteps", "delete_tree", "rollback_move"]

LOG = logging.getLogger(__name__)


class LifecycleSteps:
    """``store.lifecycle``: the steps of a request's life, each one
    transaction over owners, allocations, ports and health."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # -- attempts ------------------------------------------------------------------

    def release_attempt(
        self,
        attempt_id: str,
        *,
        fault: BmaasError | None = None,
        health_rule: HealthRule | None = None,
        context: str | None = None,
    ) -> list[str]:
        """End a failed attempt in one transaction: its node goes back (and
        every port bound to it is unbound, ready for the next attempt), the
        fault is recorded in the node's history and ``last_error``, and, with
        a ``policy``, counted toward putting the node into maintenance.
        ``context`` (``"request web-1"``) prefixes the recorded error so a
        maintenance reason names the request. Returns the nodes released.
        Works on an expired attempt too."""
        with self._db.write() as tx:
            attempt = owner_in(tx, attempt_id)
            expect_kind(attempt, OwnerKind.ATTEMPT)
            why = "failed" + (f": {type(fault).__name__}" if fault else "")
            released = delete_tree(tx, attempt, why).nodes
            if fault is not None:
                ids = tx.node_ids(released)
                for name in released:
                    tx.event(
                        ids[name],
                        "attempt_failed",
                        str(fault),
                        actor=attempt.id,
                        data=fault.to_dict(),
                    )
                    if health_rule is not None:
                        apply_health(tx, ids[name], name, fault, health_rule, context=context)
                    else:
                        error = f"{context}: {fault}" if context else str(fault)
                        tx.execute(
                            t.nodes.update()
                            .where(t.nodes.c.id == ids[name])
                            .values(last_error=mask_urls(error))
                        )
            return released

    def promote_attempt(
        self,
        attempt_id: str,
        *,
        instance_name: str | None = None,
        data: dict[str, Any] | None = None,
        provision_state: ProvisionState = ProvisionState.ACTIVE,
    ) -> Owner:
        """The attempt succeeded: in ONE transaction create the instance (a
        durable owner), make it the owner of the attempt's node and of the
        request's ports, and end the attempt and its request."""
        with self._db.write() as tx:
            attempt = owner_row(require_alive(tx, attempt_id))
            expect_kind(attempt, OwnerKind.ATTEMPT)
            held = allocations_in(tx, t.allocations.c.owner_id == attempt.id)
            if not held:
                raise InputError("holds no node", field=f"attempt {attempt.id}")
            instance = insert_owner(tx, OwnerKind.INSTANCE, instance_name, None, None, data, None)
            for allocation in held:
                swap_one(tx, allocation.node, attempt.id, instance.id)
            ids = tx.node_ids([a.node for a in held])
            set_state(tx, list(ids.values()), provision_state)
            if attempt.parent_id is not None:
                tx.execute(
                    t.ports.update()
                    .where(t.ports.c.owner_id == attempt.parent_id)
                    .values(owner_id=instance.id)
                )
            tx.execute(t.owners.delete().where(t.owners.c.id == attempt.id))
            parent = tx.execute(
                sa.select(t.owners).where(t.owners.c.id == attempt.parent_id)
            ).first()
            if parent is not None and parent.kind == OwnerKind.REQUEST.value:
                delete_tree(tx, owner_row(parent), "completed")
            return instance

    # -- moves -------------------------------------------------------------------

    def begin_move(
        self,
        instance_id: str,
        target: str,
        *,
        ttl: float = DEFAULT_LEASE_TTL,
        name: str | None = None,
        holder: str | None = None,
    ) -> Owner:
        """Start moving an instance to ``target`` in ONE transaction: a new move
        owner (leased) takes the source node, the instance claims the target
        (``deploying``). If the target cannot be claimed nothing changes."""
        try:
            return self._begin_move(instance_id, target, ttl=ttl, name=name, holder=holder)
        except sa.exc.IntegrityError as exc:  # a racing claim on PostgreSQL
            raise NodeUnavailable(
                "another owner claimed it at the same moment", node=target, reason="claimed"
            ) from exc

    def _begin_move(
        self, instance_id: str, target: str, *, ttl: float, name: str | None, holder: str | None
    ) -> Owner:
        with self._db.write() as tx:
            instance = owner_in(tx, instance_id)
            expect_kind(instance, OwnerKind.INSTANCE)
            held = allocations_in(tx, t.allocations.c.owner_id == instance.id)
            if len(held) != 1:
                raise InputError(
                    f"holds {len(held)} nodes; a move needs exactly one",
                    field=f"instance {instance.id}",
                )
            source = held[0].node
            data = {"instance": instance.id, "source": source, "target": target}
            move = insert_owner(tx, OwnerKind.MOVE, name, instance.id, ttl, data, holder)
            swap_one(tx, source, instance.id, move.id)
            claim_in(tx, target, instance.id, ProvisionState.DEPLOYING)
            return move

    def finish_move(self, move_id: str) -> list[str]:
        """The move succeeded: drop the source (the move's allocation) and end
        the move. The instance keeps the target. Returns the nodes released."""
        with self._db.write() as tx:
            move = owner_row(require_alive(tx, move_id))
            expect_kind(move, OwnerKind.MOVE)
            return delete_tree(tx, move, "finished").nodes

    def abort_move(self, move_id: str) -> Reclaimed:
        """The move failed: drop the instance's target allocation and give the
        source back to the instance, in one transaction."""
        with self._db.write() as tx:
            move = owner_in(tx, move_id)
            expect_kind(move, OwnerKind.MOVE)
            return rollback_move(tx, move, "move aborted")

    # -- ending owners -------------------------------------------------------------

    def delete_owner(self, owner_id: str) -> Reclaimed:
        """End an owner: its children, allocations and ports go with it, in one
        transaction (bmaas-created ports deleted, users' ports handed back)."""
        with self._db.write() as tx:
            owner = owner_in(tx, owner_id)
            return delete_tree(tx, owner, "deleted")

    def reclaim_expired(self, *, needs_cleaning: bool = True) -> list[Reclaimed]:
        """Give back everything held by owners whose lease expired (their
        process died or stopped renewing). Any run may call this; it is one
        transaction and each step is conditional on the lease still being
        expired, so two reclaimers never both act on one owner.

        Moves are rolled back (the source returns to the instance); requests
        and attempts are deleted with their allocations and ports.

        A node given back this way may still be powered on, booting whatever
        the dead client left on it, so it is marked with the fault
        :data:`RECLAIMED` (never claimed while marked) until
        :func:`bmaas.provision.reclaim.clean_reclaimed` has powered it off
        and ejected its media. ``needs_cleaning=False`` skips the mark (for
        tests of the store alone).
        """
        o = t.owners
        out: list[Reclaimed] = []
        lapsed = sa.select(o.c.id).where(
            o.c.lease_expires_at.is_not(None), o.c.lease_expires_at <= self._db.now()
        )
        with self._db.read() as tx:  # the sync asks every pass: no write lock for nothing
            if tx.execute(lapsed.limit(1)).first() is None:
                return out
        with self._db.write() as tx:
            now = self._db.now()
            expired = tx.execute(
                sa.select(o.c.id, o.c.kind)
                .where(o.c.lease_expires_at.is_not(None), o.c.lease_expires_at <= now)
                .order_by(o.c.created_at)
            ).all()
            # Moves first: rolling one back needs its instance's allocations intact.
            ordered = sorted(expired, key=lambda r: r.kind != OwnerKind.MOVE.value)
            for row in ordered:
                current = tx.execute(sa.select(o).where(o.c.id == row.id)).first()
                if current is None:
                    continue  # went with an expired parent
                owner = owner_row(current)
                why = f"reclaimed: lease expired (holder {owner.holder})"
                if owner.kind is OwnerKind.MOVE:
                    done = rollback_move(tx, owner, f"{owner.describe()} {why}")
                    if needs_cleaning and done.nodes:  # the target it was deploying
                        mark_reclaimed(tx, done.nodes, owner)
                else:
                    done = delete_tree(tx, owner, why)
                if needs_cleaning and done.nodes:
                    mark_reclaimed(tx, done.nodes, owner)
                out.append(done)
        for done in out:
            LOG.warning(
                "reclaimed %s (holder %s): nodes %s, ports deleted %d, detached %d",
                done.owner.describe(),
                done.owner.holder,
                ", ".join(done.nodes) or "none",
                len(done.ports_deleted),
                len(done.ports_detached),
            )
        return out


def expect_kind(owner: Owner, kind: OwnerKind) -> None:
    if owner.kind is not kind:
        raise InputError(f"is a {owner.kind}, not a {kind}", field=f"owner {owner.id}")


def rollback_move(tx: Tx, move: Owner, why: str) -> Reclaimed:
    a = t.allocations
    instance_id, target = move.parent_id, move.data.get("target")
    dropped: list[str] = []
    if instance_id is not None and target is not None:
        target_id = tx.scalar(sa.select(t.nodes.c.id).where(t.nodes.c.name == target))
        dropped = drop_allocations(
            tx, sa.and_(a.c.node_id == target_id, a.c.owner_id == instance_id), why
        )
    for allocation in allocations_in(tx, a.c.owner_id == move.id):
        assert instance_id is not None, "a move always has its instance as parent"
        swap_one(tx, allocation.node, move.id, instance_id)
    cleanup = cleanup_owner_ports(tx, move.id)
    tx.execute(t.owners.delete().where(t.owners.c.id == move.id))
    return Reclaimed(move, dropped, cleanup.deleted, cleanup.detached, move_rolled_back=True)


def delete_tree(tx: Tx, owner: Owner, why: str) -> Reclaimed:
    """Delete an owner and everything it holds, children first."""
    nodes: list[str] = []
    deleted: list[str] = []
    detached: list[str] = []
    children = tx.execute(sa.select(t.owners).where(t.owners.c.parent_id == owner.id)).all()
    for child in children:
        done = delete_tree(tx, owner_row(child), why)
        nodes += done.nodes
        deleted += done.ports_deleted
        detached += done.ports_detached
    nodes += drop_allocations(tx, t.allocations.c.owner_id == owner.id, f"{owner.describe()} {why}")
    cleanup = cleanup_owner_ports(tx, owner.id)
    tx.execute(t.owners.delete().where(t.owners.c.id == owner.id))
    return Reclaimed(owner, sorted(nodes), deleted + cleanup.deleted, detached + cleanup.detached)
