"""``bmaas status check --cloud NAME``: is Ironic ready for bmaas's reschedule?

Four checks, in the vocabulary of :mod:`bmaas.status` (Success / Warning /
Failure, exit 0/1/2):

====================  =========================================================
check                 says
====================  =========================================================
ironic-api            the API answers (Failure if not: nothing else can run)
ironic-drivers        nodes by hardware type: ``bmaas-*`` nodes report faults
                      exactly (the ``[bmaas CODE retry=SCOPE]`` prefix); stock
                      ones by message table only (Warning, with their names)
ironic-maintenance    nodes in maintenance: fenced by bmaas (reason
                      ``bmaas: ...``), by Ironic itself (``fault`` set, e.g.
                      power failure), or by a person (Warning if any)
ironic-allocations    allocations with no bmaas instance and no node in a
                      deploy (leaked: Failure), allocations in ``error``
====================  =========================================================
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

from bmaas.drivers.ironic_backend.instances import is_instance
from bmaas.status import Outcome
from bmaas.status.checks import Check
from bmaas.status.context import CheckContext
from bmaas.status.result import listing

if TYPE_CHECKING:
    from bmaas.drivers.ironic_backend.api import Api

__all__ = ["checks"]

#: provision states in which an attempt legitimately holds an allocation
IN_FLIGHT = {"deploying", "wait call-back", "deploy failed", "deleting", "cleaning", "active"}


def checks(ironic: Api) -> list[Check]:
    """The Ironic checks, bound to the backend's ``ironic`` API (they read one node listing).
    Every API call ends by the command's ``--deadline`` (``ctx.deadline``):
    a silent Ironic fails ``ironic-api`` with ``IronicTimeout`` by then, and
    the checks after it fail at once (nothing is left to wait for)."""
    read = _Checks(ironic)
    return [
        Check("ironic-api", "Ironic's API answers", read.api),
        Check("ironic-drivers", "nodes on bmaas-* hardware types vs stock", read.drivers),
        Check(
            "ironic-maintenance", "nodes in maintenance, and who put them there", read.maintenance
        ),
        Check("ironic-allocations", "no allocation without an owner", read.allocations),
    ]


class _Checks:
    """The checks' bodies, over one node listing read once."""

    def __init__(self, ironic: Api) -> None:
        self.ironic = ironic
        self.cache: dict[str, Any] = {}

    def nodes(self, ctx: CheckContext) -> list[Any]:
        if "nodes" not in self.cache:
            ironic = self.ironic
            self.cache["nodes"] = ironic.call(
                "node.list", ironic.bm.nodes, details=True, deadline=ctx.deadline
            )
        return list(self.cache["nodes"])

    def api(self, ctx: CheckContext) -> Outcome:
        version = self.ironic.call(
            "api.version", self.ironic.bm.get_endpoint, deadline=ctx.deadline
        )
        count = len(self.nodes(ctx))
        return Outcome().note(f"Ironic at {version} answers; {count} node(s)")

    def drivers(self, ctx: CheckContext) -> Outcome:
        by_driver = collections.defaultdict(list)
        for node in self.nodes(ctx):
            by_driver[node.driver].append(node.name or node.id)
        out = Outcome()
        for driver, names in sorted(by_driver.items()):
            if driver.startswith("bmaas-"):
                out.note(f"{driver}: {len(names)} node(s), faults typed exactly")
            else:
                out.warn(
                    f"{driver}: {len(names)} node(s) on a stock driver, faults classified by "
                    f"message table only: {listing(sorted(names))}",
                    key="stock",
                    nodes=names,
                )
        if not by_driver:
            out.note("no nodes enrolled")
        return out

    def maintenance(self, ctx: CheckContext) -> Outcome:
        out = Outcome()
        fenced = [n for n in self.nodes(ctx) if n.is_maintenance]
        for node in fenced:
            reason = node.maintenance_reason or "no reason given"
            who = (
                "bmaas" if reason.startswith("bmaas:") else ("Ironic" if node.fault else "a person")
            )
            out.warn(f"{node.name or node.id}: by {who}: {reason}", key=who, nodes=[node.name])
        if not fenced:
            out.note("no node in maintenance")
        return out

    def allocations(self, ctx: CheckContext) -> Outcome:
        out = Outcome()
        states = {n.id: n.provision_state for n in self.nodes(ctx)}
        found: list[Any] = list(
            self.ironic.call("allocation.list", self.ironic.bm.allocations, deadline=ctx.deadline)
        )
        leaked = [
            a.id
            for a in found
            if not is_instance(a) and states.get(a.node_id) not in IN_FLIGHT - {"active"}
        ]
        errors = [a.id for a in found if a.state == "error"]
        if leaked:
            out.fail(
                f"{len(leaked)} allocation(s) without an owner: {listing(leaked)}",
                key="leaked",
                nodes=leaked,
            )
        if errors:
            out.warn(f"{len(errors)} allocation(s) in error: {listing(errors)}")
        if not leaked and not errors:
            owned = sum(1 for a in found if is_instance(a))
            out.note(f"{len(found)} allocation(s), {owned} owned by bmaas instances")
        return out
