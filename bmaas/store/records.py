"""What the store hands out: frozen records and the vocabularies they use.

Records are plain dataclasses, detached from the database: a caller can keep
one across transactions, print it, or send it to another process. Their
``to_dict`` output masks every credential (a node's ``driver_info`` may hold
an inline password).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from enum import StrEnum
from typing import Any, Protocol

from bmaas.driver import PowerState
from bmaas.secrets import mask, mask_urls

__all__ = [
    "LEFTOVER_KEYS",
    "POWER_FAILURE",
    "QUIRKS_KEY",
    "SYSTEM",
    "UPDATE_KEY",
    "Allocation",
    "Event",
    "Network",
    "NodeRecord",
    "Owner",
    "OwnerKind",
    "Port",
    "PortOrigin",
    "ProvisionState",
    "Segment",
    "leftover_text",
    "node_record",
    "updating",
]

#: the ``maintenance_by`` of maintenance bmaas set itself (never a person's name)
SYSTEM = "system"
#: the fault the power sync sets after repeated failed reads (Ironic's word)
POWER_FAILURE = "power failure"
#: the fault that holds a reclaimed node out of service until it is cleaned
RECLAIMED = "reclaimed"
#: seconds a lease lasts unless renewed; holders renew every third of it
#: (plain values here, not beside the SQL that uses them, so that importing
#: them costs no SQLAlchemy: bmaas.store's docstring)
DEFAULT_LEASE_TTL = 60.0


class OwnerKind(StrEnum):
    """Who may hold an allocation (the migration-allocations design)."""

    REQUEST = "request"  # a provision request: holds ports before a node is picked
    ATTEMPT = "attempt"  # one try of a request on one node: holds that node
    MOVE = "move"  # a move in flight: holds the source node
    INSTANCE = "instance"  # a deployed server: holds its node, durable (no lease)
    SYNC = "sync"  # a `bmaas sync` worker: holds no allocation, only sync shares


class ProvisionState(StrEnum):
    """Where a node is in its life. A node with no allocation is always AVAILABLE:
    the store resets the state whenever it removes an allocation, so a crash can
    never leave a node "deploying" with nobody working on it."""

    AVAILABLE = "available"
    DEPLOYING = "deploying"
    ACTIVE = "active"
    UNDEPLOYING = "undeploying"


#: what :attr:`NodeRecord.leftovers` may name: the virtual media URL bmaas
#: inserted, the boot override it set, the power state it may have left on
LEFTOVER_KEYS = ("media", "boot override", "power")


def leftover_text(leftovers: dict[str, Any] | None) -> str | None:
    """A node's leftovers on one line, in :data:`LEFTOVER_KEYS` order."""
    if not leftovers:
        return None
    return mask_urls(", ".join(f"{k} {leftovers[k]}" for k in LEFTOVER_KEYS if leftovers.get(k)))


#: the key of a node's ``extra`` under which its BMC quirks are kept
#: (:class:`bmaas.driver.Quirk`; :meth:`bmaas.store.nodes.NodesRepo.record_quirks`)
QUIRKS_KEY = "bmc_quirks"
#: the key of a node's ``extra`` that says a firmware update runs on it, and
#: until when at the latest (store time): ``{"until": t, "by": who}``
#: (:meth:`bmaas.store.nodes.NodesRepo.mark_update`; the sync counts no fault
#: of the node meanwhile)
UPDATE_KEY = "firmware_update"


def updating(record: NodeRecord, now: float) -> bool:
    """Whether a firmware update runs on the node at ``now`` (its mark is
    there and its bound not past: a crashed command's mark ends by itself)."""
    mark = record.extra.get(UPDATE_KEY)
    until = mark.get("until") if isinstance(mark, dict) else None
    return isinstance(until, int | float) and now < until


class PortOrigin(StrEnum):
    BMAAS = "bmaas"  # created for a request: cleanup deletes it
    USER = "user"  # passed in by the user: cleanup only unbinds and detaches it


@dataclasses.dataclass(frozen=True)
class NodeRecord:
    """A node as stored, with its allocation (if any) joined in."""

    name: str
    driver: str
    #: as enrolled; password values may be ``${ENV}``/``file:`` references or inline
    driver_info: dict[str, Any]
    resource_class: str | None
    properties: dict[str, Any]
    extra: dict[str, Any]
    network_segment: str | None
    power_state: PowerState
    power_state_at: float | None
    provision_state: ProvisionState
    maintenance: bool
    maintenance_reason: str | None
    maintenance_by: str | None
    maintenance_at: float | None
    fault: str | None
    fault_at: float | None
    last_error: str | None
    fault_count: int
    good_count: int
    created_at: float
    updated_at: float
    owner_id: str | None = None
    owner_kind: OwnerKind | None = None
    owner_name: str | None = None
    #: what a failed attempt left on the node and could not undo
    #: (:data:`LEFTOVER_KEYS`); None when the node is clean
    leftovers: dict[str, Any] | None = None

    @property
    def allocated(self) -> bool:
        return self.owner_id is not None

    @property
    def claimable(self) -> bool:
        """What the claim's conditional write checks, as seen when this was read."""
        return not (self.allocated or self.maintenance or self.fault or self.leftovers)

    @property
    def needs_cleaning(self) -> str | None:
        """ "media http://..., boot override cdrom, power on" when a failed
        attempt left that on the node; None when it is clean."""
        return leftover_text(self.leftovers)

    @property
    def maintenance_by_system(self) -> bool:
        return self.maintenance and self.maintenance_by == SYSTEM

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with credentials masked."""
        out = dataclasses.asdict(self)
        out["driver_info"] = mask(self.driver_info)
        if self.leftovers:
            out["leftovers"] = {k: mask_urls(str(v)) for k, v in self.leftovers.items()}
        return out


@dataclasses.dataclass(frozen=True)
class Owner:
    id: str
    kind: OwnerKind
    name: str | None
    parent_id: str | None
    holder: str | None
    #: None for a durable owner (an instance)
    lease_expires_at: float | None
    data: dict[str, Any]
    created_at: float

    def expired(self, now: float) -> bool:
        return self.lease_expires_at is not None and self.lease_expires_at <= now

    def describe(self) -> str:
        """``attempt r-1/2 (3f2a...)``: how people read an owner."""
        label = f" {self.name}" if self.name else ""
        return f"{self.kind}{label} ({self.id[:8]})"

    def to_dict(self) -> dict[str, Any]:
        masked: dict[str, Any] = mask(dataclasses.asdict(self))
        return masked


@dataclasses.dataclass(frozen=True)
class Allocation:
    node: str
    owner: Owner
    created_at: float

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "owner": self.owner.to_dict(), "created_at": self.created_at}


@dataclasses.dataclass(frozen=True)
class Segment:
    name: str
    network: str
    cidr: str
    gateway_ip: str | None
    allocation_pools: list[dict[str, str]]


@dataclasses.dataclass(frozen=True)
class Network:
    name: str
    segments: list[Segment]


@dataclasses.dataclass(frozen=True)
class Port:
    id: str
    network: str
    owner_id: str | None
    created_by: PortOrigin
    name: str | None
    mac_address: str | None
    node: str | None
    segment: str | None
    ip_address: str | None
    created_at: float
    bound_at: float | None

    @property
    def bound(self) -> bool:
        return self.node is not None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Event:
    node: str
    at: float
    kind: str
    actor: str | None
    message: str
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        masked: dict[str, Any] = mask(dataclasses.asdict(self))
        return masked


class Columns(Protocol):
    """A row read by column name (SQLAlchemy's ``RowMapping``, ``sqlite3.Row``)."""

    def __getitem__(self, key: str, /) -> Any: ...


def node_record(
    m: Columns, *, json_column: Callable[[Any], Any] = lambda value: value
) -> NodeRecord:
    """A :class:`NodeRecord` from one row of the node listing query (nodes
    joined with segment and owner), by column name. ``json_column`` decodes
    the JSON columns: SQLAlchemy hands them decoded, the ``sqlite3`` reader
    of :mod:`bmaas.store.lite` as text (``json.loads``)."""
    return NodeRecord(
        name=m["name"],
        driver=m["driver"],
        driver_info=dict(json_column(m["driver_info"])),
        resource_class=m["resource_class"],
        properties=dict(json_column(m["properties"])),
        extra=dict(json_column(m["extra"])),
        network_segment=m["segment_name"],
        power_state=PowerState(m["power_state"]),
        power_state_at=m["power_state_at"],
        provision_state=ProvisionState(m["provision_state"]),
        maintenance=bool(m["maintenance"]),
        maintenance_reason=m["maintenance_reason"],
        maintenance_by=m["maintenance_by"],
        maintenance_at=m["maintenance_at"],
        fault=m["fault"],
        fault_at=m["fault_at"],
        last_error=m["last_error"],
        fault_count=m["fault_count"],
        good_count=m["good_count"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        owner_id=m["owner_id"],
        owner_kind=OwnerKind(m["owner_kind"]) if m["owner_kind"] else None,
        owner_name=m["owner_name"],
        leftovers=_leftovers(m, json_column),
    )


def _leftovers(m: Columns, json_column: Callable[[Any], Any]) -> dict[str, Any] | None:
    raw = m["leftovers"]
    decoded = json_column(raw) if raw is not None else None
    return dict(decoded) if decoded else None
