"""The values that cross the backend seam: what a user asks for, what the
loop holds while it works, and what it hands back.

They are plain frozen dataclasses so any backend (the embedded store, Ironic
through openstacksdk) can build them, and so results pickle and print.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from bmaas.faults import Attempt

__all__ = ["Claim", "Deployed", "Instance", "Job", "Moved", "Provisioned", "Request"]


@dataclasses.dataclass(frozen=True)
class Request:
    """What a user asks for. ``properties`` are minimums for numbers
    (``cpus: 8`` means at least 8) and exact for anything else."""

    name: str
    resource_class: str | None = None
    properties: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: boot this image by virtual media where the node supports it (else PXE)
    image_url: str | None = None
    #: create one port on this network for the request (bmaas owns it)
    network: str | None = None
    #: ports the user created: reused by every attempt, never deleted by bmaas
    ports: tuple[str, ...] = ()
    #: the instance's name (default: the request's)
    instance_name: str | None = None
    #: traits a node must have (Ironic backends; the embedded one matches
    #: them against the node's ``traits`` property)
    traits: tuple[str, ...] = ()

    def to_data(self) -> dict[str, Any]:
        """What an instance remembers of its request (a move re-reads it)."""
        return {
            "resource_class": self.resource_class,
            "properties": dict(self.properties),
            "image_url": self.image_url,
            "traits": list(self.traits),
        }

    @classmethod
    def from_data(cls, name: str, data: Mapping[str, Any]) -> Request:
        """The request an instance was made from (for moves)."""
        return cls(
            name,
            resource_class=data.get("resource_class"),
            properties=dict(data.get("properties") or {}),
            image_url=data.get("image_url"),
            traits=tuple(data.get("traits") or ()),
        )


@dataclasses.dataclass(frozen=True)
class Instance:
    """A deployed request: a durable owner of one node."""

    id: str
    name: str
    node: str | None
    #: the request's data (:meth:`Request.to_data`), plus what the backend keeps
    data: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: the node's provision state as the backend reports it ("active", ...)
    state: str | None = None

    def request(self) -> Request:
        return Request.from_data(self.name, self.data)


@dataclasses.dataclass(frozen=True)
class Job:
    """One unit of work for the reschedule loop: a provision request, or the
    move of an instance (``moving`` set). The backend made it in
    :meth:`~bmaas.provision.backend.Backend.open`/``open_move`` and gets it
    back in every later call; ``handle`` is the backend's own bookkeeping
    (the embedded backend: the request's owner id) and is never read by the loop."""

    request: Request
    #: request-level resources the job holds (port ids): created once,
    #: reused by every attempt
    ports: tuple[str, ...] = ()
    #: set for a move: the instance being moved, and the node it leaves
    moving: Instance | None = None
    #: only these nodes, in this order (``candidates=`` / ``move --to``)
    among: tuple[str, ...] | None = None
    handle: Any = None

    @property
    def label(self) -> str:
        """How reports name the job: the request, or ``move:INSTANCE``."""
        return f"move:{self.moving.name}" if self.moving else self.request.name


@dataclasses.dataclass(frozen=True)
class Claim:
    """One attempt's hold on one node (the embedded backend: an attempt owner,
    or for a move the instance's claim on the target; Ironic: an allocation)."""

    job: Job
    node: str
    #: 1 for the first attempt of the job, 2 for the next...
    number: int
    handle: Any = None


@dataclasses.dataclass(frozen=True)
class Deployed:
    """What a deploy reports when it worked."""

    node: str
    #: "vmedia", "pxe", or the backend's word for it ("ironic")
    boot_method: str
    steps: Mapping[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Provisioned:
    """A request that became an instance."""

    request: str
    instance: str
    instance_id: str
    node: str
    #: every node tried, oldest first, the one that worked last
    #: (``outcome="succeeded"``), and every candidate refused on the way;
    #: a first-try success has one entry. See :class:`~bmaas.faults.Attempt`.
    attempts: tuple[Attempt, ...]
    elapsed: float
    ports: tuple[str, ...]
    boot_method: str

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["attempts"] = [dataclasses.asdict(a) for a in self.attempts]
        return out


@dataclasses.dataclass(frozen=True)
class Moved:
    """An instance that now runs on ``target``; ``source`` was given back."""

    instance: str
    source: str
    target: str
    attempts: tuple[Attempt, ...]
    elapsed: float
