"""Request-level network resources on Ironic: what a request creates once and
every attempt reuses.

How bmaas's port model maps onto an Ironic deployment:

=====================  =====================================================
bmaas                  Ironic
=====================  =====================================================
port the request       a ledger entry made by :meth:`PortLedger.create`
creates (``network``)  when the job opens, before any node is picked
port the user passed   a ledger entry marked ``user``: attached, never deleted
bound to an attempt    ``attach_vif_to_node`` on the claimed node (a real VIF
                       with ``neutron``/``flat`` network interfaces; accepted
                       and not stored by ``noop``)
unbound after a fault  ``detach_vif_from_node``; the entry stays in the job
owned by the instance  the entries are written into the instance's allocation
                       (``extra["bmaas_ports"]``), where ``instance list``,
                       ``undeploy`` and ``move`` read them back
final failure          entries the request created are dropped; the user's
                       are detached and kept
=====================  =====================================================

With the ``noop`` network interface (standalone Ironic, no Neutron) the
ledger *is* the port: an id and a network name, held in the job while it
runs and in the allocation once the instance exists. Creating real Neutron
ports is not done here (see docs/ironic.md: bmaas in front of Ironic).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["PortEntry", "PortLedger"]

BMAAS = "bmaas"
USER = "user"


@dataclasses.dataclass(frozen=True)
class PortEntry:
    id: str
    network: str | None
    #: "bmaas" (the request made it: deleted on failure) or "user" (kept)
    created_by: str
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PortEntry:
        return cls(str(data["id"]), data.get("network"), str(data["created_by"]), data.get("name"))


class PortLedger:
    """The request-level ports of jobs in this process. Counts what it
    created and deleted, so tests and benchmarks can check leaks."""

    def __init__(self) -> None:
        self.created = 0
        self.deleted = 0
        self._live: set[str] = set()

    def create(self, network: str, *, name: str) -> PortEntry:
        entry = PortEntry(str(uuid.uuid4()), network, BMAAS, name)
        self.created += 1
        self._live.add(entry.id)
        return entry

    @staticmethod
    def user(port_id: str) -> PortEntry:
        return PortEntry(port_id, None, USER)

    def remove_created(self, entries: Iterable[PortEntry]) -> list[str]:
        """Delete what bmaas created among ``entries``; return their ids."""
        gone = []
        for entry in entries:
            if entry.created_by == BMAAS and entry.id in self._live:
                self._live.discard(entry.id)
                self.deleted += 1
                gone.append(entry.id)
        return gone

    def hand_over(self, entries: Iterable[PortEntry]) -> None:
        """The instance now owns ``entries`` (kept in its allocation)."""
        for entry in entries:
            self._live.discard(entry.id)

    @property
    def leaked(self) -> int:
        """Ports made by jobs that neither became an instance nor were cleaned up."""
        return len(self._live)
