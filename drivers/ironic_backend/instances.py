"""Instances on Ironic: allocations that a bmaas request completed.

An instance is an allocation whose ``extra`` carries ``bmaas_instance`` (its
name), ``bmaas_data`` (the request, for moves) and ``bmaas_ports``; its id is
the allocation's uuid, which Ironic also sets as the node's ``instance_uuid``.
An allocation without ``bmaas_instance`` belongs to an attempt in flight; one
left after every job ended is a leak (``bmaas status check --cloud`` reports
it, the ``ironic`` tests assert there are none).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from bmaas.deadline import Deadline
from bmaas.faults import InputError
from bmaas.provision.backend import Readiness
from bmaas.provision.records import Instance, Job, Request

if TYPE_CHECKING:
    from bmaas.drivers.ironic_backend.api import Api

__all__ = ["InstancesMixin", "is_instance"]


def is_instance(allocation: Any) -> bool:
    return bool((allocation.extra or {}).get("bmaas_instance"))


class InstancesMixin:
    api: Api

    if TYPE_CHECKING:  # provided by IronicBackend, which this is part of

        def _quiet(self, what: str, node: str, fn: Any, *args: Any, **kwargs: Any) -> None: ...
        def fence(self, node: str, node_id: str, reason: str, deadline: Deadline) -> None: ...
        def tear_down(self, node: str, node_id: str, deadline: Deadline) -> str | None: ...
        def _delete_allocation(self, allocation: str, node: str) -> None: ...

    def _instance(self, allocation: Any, nodes: dict[str, Any] | None = None) -> Instance:
        extra = allocation.extra or {}
        node = None
        state = None
        if allocation.node_id:
            found = (nodes or {}).get(allocation.node_id)
            if found is None:
                found = self.api.call("node.get", self.api.bm.get_node, allocation.node_id)
            node = found.name or found.id
            state = found.provision_state
        return Instance(
            allocation.id,
            str(extra["bmaas_instance"]),
            node,
            dict(extra.get("bmaas_data") or {}),
            state,
        )

    def instances(self) -> list[Instance]:
        allocations = self.api.call("allocation.list", self.api.bm.allocations)
        nodes = {n.id: n for n in self.api.call("node.list", self.api.bm.nodes, details=True)}
        ours = sorted((a for a in allocations if is_instance(a)), key=lambda a: a.created_at)
        return [self._instance(a, nodes) for a in ours]

    def instance(self, name_or_id: str) -> Instance:
        for found in self.instances():
            if name_or_id in (found.id, found.name):
                return found
        raise InputError(f"no instance {name_or_id!r} on Ironic", field="INSTANCE")

    def undeploy(self, instance: str, *, deadline: Deadline) -> list[str]:
        """Tear the instance's node down (its allocation goes with it); a
        tear-down that ends in ``error`` (a silent BMC) fences the node."""
        found = self.instance(instance)
        allocation = self.api.call("allocation.get", self.api.bm.get_allocation, found.id)
        if not allocation.node_id:
            self.api.call("allocation.delete", self.api.bm.delete_allocation, found.id)
            return []
        node = found.node or allocation.node_id
        for port in (allocation.extra or {}).get("bmaas_ports") or ():
            if not port.get("vif", True):
                continue  # a noop network interface: the ledger was the binding
            self._quiet(
                "node.vif_detach",
                node,
                self.api.bm.detach_vif_from_node,
                allocation.node_id,
                port["id"],
            )
        ended = self.tear_down(node, allocation.node_id, deadline)
        if ended == "error":
            self.fence(
                node,
                allocation.node_id,
                f"bmaas: undeploy of {found.name}: tear-down ended in error",
                deadline,
            )
        self._delete_allocation(found.id, node)
        return [node]

    def open_move(self, instance: str, *, to: str | None = None) -> Job:
        found = self.instance(instance)
        request: Request = found.request()
        job: Job = self.open(request, among=(to,) if to else None)  # type: ignore[attr-defined]
        return dataclasses.replace(job, moving=found)

    def set_maintenance(self, node: str, *, reason: str, by: str) -> None:
        self.api.call(
            "node.set_maintenance",
            self.api.bm.set_node_maintenance,
            node,
            reason=f"{reason} (by {by})",
            node=node,
        )

    def holder(self, node: str) -> Instance | None:
        found = self.api.call("node.get", self.api.bm.get_node, node, node=node)
        if not found.allocation_id:
            return None
        allocation = self.api.call(
            "allocation.get", self.api.bm.get_allocation, found.allocation_id, node=node
        )
        return self._instance(allocation, {found.id: found}) if is_instance(allocation) else None

    def readiness(self, node: str) -> Readiness:
        found = self.api.call("node.get", self.api.bm.get_node, node, node=node)
        held = []
        if found.allocation_id:
            held.append(f"allocation {found.allocation_id}")
        if found.instance_id:
            held.append(f"instance {found.instance_id}")
        ready = bool(found.is_maintenance) and not held
        detail = (
            "ready"
            if ready
            else (
                "not in maintenance" if not found.is_maintenance else "held by " + ", ".join(held)
            )
        )
        return Readiness(
            node=node,
            ready=ready,
            maintenance=bool(found.is_maintenance),
            maintenance_by=None,
            reason=found.maintenance_reason,
            fault=found.fault,
            held_by=tuple(held),
            detail=detail,
        )
