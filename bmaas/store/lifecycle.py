"""The steps of a request's life, each ONE transaction.

These are what the retry layer (``bmaas.retry``) and moves call, so that no
crash between two writes can leave a node held by two owners, held by
nobody while still "deploying", or a port bound to a node nobody holds:

* :meth:`LifecycleMixin.release_attempt` - an attempt failed: drop its node,
  unbind the request's ports from it, record the fault;
* :meth:`LifecycleMixin.promote_attempt` - an attempt succeeded: the new
  instance owns the node and the request's ports, the attempt and request end;
* :meth:`LifecycleMixin.begin_move` / ``finish_move`` / ``abort_move`` - the
  move owns the source, the instance owns the target; success drops the
  source, failure drops the target and gives the source back;
* :meth:`LifecycleMixin.delete_owner` and :meth:`LifecycleMixin.reclaim_expired`
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
from bmaas.store.health import HealthMixin
from bmaas.store.owners import DEFAULT_LEASE_TTL, OwnersMixin, Reclaimed, _owner
from bmaas.store.records import SYSTEM, Owner, OwnerKind, ProvisionState

__all__ = ["RECLAIMED", "LifecycleMixin"]

#: the fault that holds a reclaimed node out of service until it is cleaned
RECLAIMED = "reclaimed"

LOG = logging.getLogger(__name__)


class LifecycleMixin(OwnersMixin, HealthMixin):
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
        with self._write() as conn:
            attempt = self._owner_in(conn, attempt_id)
            self._expect_kind(attempt, OwnerKind.ATTEMPT)
            why = "failed" + (f": {type(fault).__name__}" if fault else "")
            released = self._delete_tree(conn, attempt, why).nodes
            if fault is not None:
                ids = self._node_ids(conn, released)
                for name in released:
                    self._event(
                        conn,
                        ids[name],
                        "attempt_failed",
                        str(fault),
                        actor=attempt.id,
                        data=fault.to_dict(),
                    )
                    if health_rule is not None:
                        self._apply_health(
                            conn, ids[name], name, fault, health_rule, context=context
                        )
                    else:
                        error = f"{context}: {fault}" if context else str(fault)
                        conn.execute(
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
        with self._write() as conn:
            attempt = _owner(self._require_alive(conn, attempt_id))
            self._expect_kind(attempt, OwnerKind.ATTEMPT)
            held = self._allocations_in(conn, t.allocations.c.owner_id == attempt.id)
            if not held:
                raise InputError("holds no node", field=f"attempt {attempt.id}")
            instance = self._insert_owner(
                conn, OwnerKind.INSTANCE, instance_name, None, None, data, None
            )
            for allocation in held:
                self._swap_one(conn, allocation.node, attempt.id, instance.id)
            ids = self._node_ids(conn, [a.node for a in held])
            self._set_state(conn, list(ids.values()), provision_state)
            if attempt.parent_id is not None:
                conn.execute(
                    t.ports.update()
                    .where(t.ports.c.owner_id == attempt.parent_id)
                    .values(owner_id=instance.id)
                )
            conn.execute(t.owners.delete().where(t.owners.c.id == attempt.id))
            parent = conn.execute(
                sa.select(t.owners).where(t.owners.c.id == attempt.parent_id)
            ).first()
            if parent is not None and parent.kind == OwnerKind.REQUEST.value:
                self._delete_tree(conn, _owner(parent), "completed")
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
        with self._write() as conn:
            instance = self._owner_in(conn, instance_id)
            self._expect_kind(instance, OwnerKind.INSTANCE)
            held = self._allocations_in(conn, t.allocations.c.owner_id == instance.id)
            if len(held) != 1:
                raise InputError(
                    f"holds {len(held)} nodes; a move needs exactly one",
                    field=f"instance {instance.id}",
                )
            source = held[0].node
            data = {"instance": instance.id, "source": source, "target": target}
            move = self._insert_owner(conn, OwnerKind.MOVE, name, instance.id, ttl, data, holder)
            self._swap_one(conn, source, instance.id, move.id)
            self._claim_in(conn, target, instance.id, ProvisionState.DEPLOYING)
            return move

    def finish_move(self, move_id: str) -> list[str]:
        """The move succeeded: drop the source (the move's allocation) and end
        the move. The instance keeps the target. Returns the nodes released."""
        with self._write() as conn:
            move = _owner(self._require_alive(conn, move_id))
            self._expect_kind(move, OwnerKind.MOVE)
            return self._delete_tree(conn, move, "finished").nodes

    def abort_move(self, move_id: str) -> Reclaimed:
        """The move failed: drop the instance's target allocation and give the
        source back to the instance, in one transaction."""
        with self._write() as conn:
            move = self._owner_in(conn, move_id)
            self._expect_kind(move, OwnerKind.MOVE)
            return self._abort_move(conn, move, "move aborted")

    def _abort_move(self, conn: sa.Connection, move: Owner, why: str) -> Reclaimed:
        a = t.allocations
        instance_id, target = move.parent_id, move.data.get("target")
        dropped: list[str] = []
        if instance_id is not None and target is not None:
            target_id = conn.scalar(sa.select(t.nodes.c.id).where(t.nodes.c.name == target))
            dropped = self._drop_allocations(
                conn, sa.and_(a.c.node_id == target_id, a.c.owner_id == instance_id), why
            )
        for allocation in self._allocations_in(conn, a.c.owner_id == move.id):
            assert instance_id is not None, "a move always has its instance as parent"
            self._swap_one(conn, allocation.node, move.id, instance_id)
        cleanup = self._cleanup_owner_ports(conn, move.id)
        conn.execute(t.owners.delete().where(t.owners.c.id == move.id))
        return Reclaimed(move, dropped, cleanup.deleted, cleanup.detached, move_rolled_back=True)

    # -- ending owners -------------------------------------------------------------

    def delete_owner(self, owner_id: str) -> Reclaimed:
        """End an owner: its children, allocations and ports go with it, in one
        transaction (bmaas-created ports deleted, users' ports handed back)."""
        with self._write() as conn:
            owner = self._owner_in(conn, owner_id)
            return self._delete_tree(conn, owner, "deleted")

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
        with self._write() as conn:
            now = self._now()
            expired = conn.execute(
                sa.select(o.c.id, o.c.kind)
                .where(o.c.lease_expires_at.is_not(None), o.c.lease_expires_at <= now)
                .order_by(o.c.created_at)
            ).all()
            # Moves first: rolling one back needs its instance's allocations intact.
            ordered = sorted(expired, key=lambda r: r.kind != OwnerKind.MOVE.value)
            for row in ordered:
                current = conn.execute(sa.select(o).where(o.c.id == row.id)).first()
                if current is None:
                    continue  # went with an expired parent
                owner = _owner(current)
                why = f"reclaimed: lease expired (holder {owner.holder})"
                if owner.kind is OwnerKind.MOVE:
                    done = self._abort_move(conn, owner, f"{owner.describe()} {why}")
                    if needs_cleaning and done.nodes:  # the target it was deploying
                        self._mark_reclaimed(conn, done.nodes, owner)
                else:
                    done = self._delete_tree(conn, owner, why)
                if needs_cleaning and done.nodes:
                    self._mark_reclaimed(conn, done.nodes, owner)
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

    def _mark_reclaimed(self, conn: sa.Connection, nodes: list[str], owner: Owner) -> None:
        n = t.nodes
        ids = self._node_ids(conn, nodes)
        for name in nodes:
            conn.execute(
                n.update()
                .where(n.c.id == ids[name], n.c.fault.is_(None))
                .values(fault=RECLAIMED, fault_at=self._now(), updated_at=self._now())
            )
            message = f"needs cleaning (power off, eject media): held by dead {owner.describe()}"
            self._event(conn, ids[name], "needs_cleaning", message, actor=SYSTEM)

    def clear_reclaimed(self, name: str) -> bool:
        """The node was cleaned: drop the :data:`RECLAIMED` mark (only that
        fault; anything set meanwhile stays). Returns whether it was marked."""
        n = t.nodes
        with self._write() as conn:
            node_id = self._node_id(conn, name)
            result = conn.execute(
                n.update()
                .where(n.c.id == node_id, n.c.fault == RECLAIMED)
                .values(fault=None, fault_at=None, updated_at=self._now())
            )
            if result.rowcount == 1:
                self._event(conn, node_id, "cleaned", "powered off after reclaim", actor=SYSTEM)
            return bool(result.rowcount)

    # -- helpers -----------------------------------------------------------------

    @staticmethod
    def _expect_kind(owner: Owner, kind: OwnerKind) -> None:
        if owner.kind is not kind:
            raise InputError(f"is a {owner.kind}, not a {kind}", field=f"owner {owner.id}")

    def _delete_tree(self, conn: sa.Connection, owner: Owner, why: str) -> Reclaimed:
        """Delete an owner and everything it holds, children first."""
        nodes: list[str] = []
        deleted: list[str] = []
        detached: list[str] = []
        children = conn.execute(sa.select(t.owners).where(t.owners.c.parent_id == owner.id)).all()
        for child in children:
            done = self._delete_tree(conn, _owner(child), why)
            nodes += done.nodes
            deleted += done.ports_deleted
            detached += done.ports_detached
        nodes += self._drop_allocations(
            conn, t.allocations.c.owner_id == owner.id, f"{owner.describe()} {why}"
        )
        cleanup = self._cleanup_owner_ports(conn, owner.id)
        conn.execute(t.owners.delete().where(t.owners.c.id == owner.id))
        return Reclaimed(
            owner, sorted(nodes), deleted + cleanup.deleted, detached + cleanup.detached
        )
