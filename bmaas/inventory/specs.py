"""What an inventory file describes, and the collector of its problems."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

from bmaas import validate
from bmaas.faults import InputError
from bmaas.yamlsrc import line_of

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


class InventoryError(InputError):
    """Every problem found in one inventory file (``problems``), each an
    ``InputError`` with source, line and field."""

    def __init__(self, problems: list[InputError]) -> None:
        first = problems[0]
        super().__init__(
            first.message, source=first.source, line=first.line, field=first.field, node=first.node
        )
        self.problems = problems

    def __str__(self) -> str:
        text = str(self.problems[0])
        if len(self.problems) > 1:
            text += f" (and {len(self.problems) - 1} more problem(s))"
        return text


class Checker:
    """Collects problems while walking one document."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[InputError] = []

    def fail(
        self,
        message: str,
        *,
        data: Any = None,
        key: str | None = None,
        field: str | None = None,
        node: str | None = None,
        line: int | None = None,
    ) -> None:
        where = line if line is not None else line_of(data, key)
        self.problems.append(
            InputError(message, source=self.source, line=where, field=field or key, node=node)
        )

    def unknown_keys(
        self, data: Mapping[str, Any], allowed: tuple[str, ...], *, prefix: str, node: str | None
    ) -> None:
        for key in data:
            if key not in allowed:
                hint = difflib.get_close_matches(str(key), allowed, n=1)
                extra = f"; did you mean {hint[0]!r}?" if hint else ""
                allowed_text = ", ".join(allowed)
                self.fail(
                    f"unknown key{extra} (allowed: {allowed_text})",
                    data=data,
                    key=str(key),
                    field=f"{prefix}{key}",
                    node=node,
                )

    def text(
        self,
        data: Mapping[str, Any],
        key: str,
        *,
        prefix: str,
        node: str | None,
        required: bool = False,
    ) -> str | None:
        value = data.get(key)
        if value is None:
            if required:
                self.fail("is required", data=data, field=f"{prefix}{key}", node=node)
            return None
        if not isinstance(value, str) or not value:
            self.fail(
                f"must be a non-empty string, not {value!r}",
                data=data,
                key=key,
                field=f"{prefix}{key}",
                node=node,
            )
            return None
        return value

    def name(
        self,
        data: Mapping[str, Any],
        key: str,
        *,
        prefix: str,
        node: str | None,
        required: bool = False,
    ) -> str | None:
        """Like :meth:`text`, and from :data:`bmaas.validate.NAME_ALPHABET`."""
        value = self.text(data, key, prefix=prefix, node=node, required=required)
        if value is not None and not validate.is_name(value):
            self.fail(
                f"must be {validate.NAME_ALPHABET}",
                data=data,
                key=key,
                field=f"{prefix}{key}",
                node=node,
            )
            return None
        return value
