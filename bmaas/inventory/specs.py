"""What an inventory file describes, and the collector of its problems."""

from __future__ import annotations

import dataclasses
from typing import Any

from bmaas.fields import Checker, Problems

__all__ = ["Checker", "Inventory", "InventoryError", "NetworkSpec", "NodeSpec", "SegmentSpec"]


@dataclasses.dataclass(frozen=True)
class SegmentSpec:
    name: str
    cidr: str
    gateway_ip: str | None
    allocation_pools: list[dict[str, str]]
    line: int | None = None


@dataclasses.dataclass(frozen=True)
class NetworkSpec:
    name: str
    segments: list[SegmentSpec]
    line: int | None = None


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    name: str
    driver: str
    #: as it will be stored: password references kept, file paths absolute
    driver_info: dict[str, Any]
    resource_class: str | None = None
    properties: dict[str, Any] = dataclasses.field(default_factory=dict)
    network_segment: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    line: int | None = None
    segment_line: int | None = None


@dataclasses.dataclass(frozen=True)
class Inventory:
    source: str
    nodes: list[NodeSpec]
    networks: list[NetworkSpec]

    def segment_names(self) -> set[str]:
        return {seg.name for net in self.networks for seg in net.segments}


class InventoryError(Problems):
    """Every problem found in one inventory file (``problems``), each an
    ``InputError`` with source, line and field."""
