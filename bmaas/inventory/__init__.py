"""Inventory files: the fleet in Ironic's node vocabulary, YAML or JSON.

::

    networks:
      - name: provisioning
        segments:
          - name: rack1
            cidr: 10.1.0.0/24
            gateway_ip: 10.1.0.1
            allocation_pools: [{start: 10.1.0.10, end: 10.1.0.200}]
    nodes:
      - name: r1-n01
        driver: ipmi
        driver_info: {ipmi_address: 10.0.0.11, ipmi_username: admin,
                      ipmi_password: "${BMC_PASSWORD}"}
        resource_class: baremetal.small
        properties: {cpus: 16, memory_mb: 65536, local_gb: 480, cpu_arch: x86_64}
        network_segment: rack1

Node keys are Ironic's (``driver_info`` keys included, checked against the
driver's own ``required_info``/``accepted_info``); segments follow Neutron's
routed networks (``cidr``, ``gateway_ip``, ``allocation_pools``). Passwords:
see :mod:`bmaas.credentials`.

Validation collects *every* problem, each naming file, line and field, and
raises them together as :class:`InventoryError`; :func:`enroll` writes nothing
unless the whole file is valid, then writes it in one transaction.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from bmaas.faults import InputError
from bmaas.inventory.networks import parse_networks
from bmaas.inventory.nodes import parse_node
from bmaas.inventory.specs import (
    Checker,
    Inventory,
    InventoryError,
    NetworkSpec,
    NodeSpec,
    SegmentSpec,
)
from bmaas.yamlsrc import line_of, load_file

if TYPE_CHECKING:
    from bmaas.store import EnrollReport, Store

__all__ = [
    "Inventory",
    "InventoryError",
    "NetworkSpec",
    "NodeSpec",
    "SegmentSpec",
    "enroll",
    "load",
    "parse",
]

TOP_KEYS = ("networks", "nodes")


def load(
    path: str | os.PathLike[str],
    *,
    environ: Mapping[str, str] | None = None,
    known_segments: Collection[str] | None = None,
) -> Inventory:
    """Read and validate an inventory file (see :func:`parse`)."""
    source = os.fspath(path)
    data = load_file(source)
    base_dir = os.path.dirname(os.path.abspath(source))
    return parse(
        data, source=source, base_dir=base_dir, environ=environ, known_segments=known_segments
    )


def parse(
    data: Any,
    *,
    source: str = "<inventory>",
    base_dir: str | None = None,
    environ: Mapping[str, str] | None = None,
    known_segments: Collection[str] | None = None,
) -> Inventory:
    """Validate a loaded document; ``InventoryError`` lists every problem,
    in line order. ``known_segments`` (already enrolled) extends the segments
    a node may name; ``None`` skips that check."""
    check = Checker(source)
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise InventoryError([InputError("must be a mapping with 'nodes'", source=source)])
    check.unknown_keys(data, TOP_KEYS, prefix="", node=None)
    networks = parse_networks(check, data.get("networks"), data)
    nodes: list[NodeSpec] = []
    named_segments: list[tuple[str, str, int | None]] = []
    raw_nodes = data.get("nodes")
    if raw_nodes is None:
        check.fail("is required", data=data, field="nodes")
    elif not isinstance(raw_nodes, list):
        check.fail("must be a list of nodes", data=data, key="nodes")
    else:
        seen: dict[str, int | None] = {}
        for index, raw in enumerate(raw_nodes):
            name = raw.get("name") if isinstance(raw, Mapping) else None
            if isinstance(name, str) and name in seen:
                first = seen[name]
                where = f" (first at line {first})" if first else ""
                check.fail(f"duplicate node name{where}", data=raw, key="name", node=name)
                continue
            if isinstance(name, str):
                seen[name] = line_of(raw)
            spec = parse_node(check, raw, index, base_dir, environ, data)
            if spec is not None:
                nodes.append(spec)
            segment = raw.get("network_segment") if isinstance(raw, Mapping) else None
            if isinstance(segment, str):
                label = name if isinstance(name, str) else f"nodes[{index}]"
                named_segments.append((label, segment, line_of(raw, "network_segment")))
    if known_segments is not None:
        # Checked on every node, valid or not, so one pass reports everything.
        # A segment declared in the file but invalid has its own error; the
        # nodes in it are not each reported again.
        known = _declared_segments(data) | set(known_segments)
        for label, segment, line in named_segments:
            if segment not in known:
                check.fail(
                    f"unknown segment {segment!r}",
                    line=line,
                    field="network_segment",
                    node=label,
                )
    if check.problems:
        raise InventoryError(sorted(check.problems, key=lambda p: p.line or 0))
    return Inventory(source, nodes, networks)


def _declared_segments(data: Mapping[str, Any]) -> set[str]:
    names: set[str] = set()
    nets = data.get("networks")
    for net in nets if isinstance(nets, list) else ():
        segments = net.get("segments") if isinstance(net, Mapping) else None
        for seg in segments if isinstance(segments, list) else ():
            if isinstance(seg, Mapping) and isinstance(seg.get("name"), str):
                names.add(seg["name"])
    return names


def enroll(store: Store, inventory: Inventory, *, actor: str | None = None) -> EnrollReport:
    """Write a validated inventory: every node or none (one transaction).

    A node's ``network_segment`` must name a segment in this file or one
    already enrolled.
    """
    known = inventory.segment_names() | store.nodes.segment_names()
    problems = [
        InputError(
            f"unknown segment {spec.network_segment!r}",
            source=inventory.source,
            line=spec.segment_line,
            field="network_segment",
            node=spec.name,
        )
        for spec in inventory.nodes
        if spec.network_segment is not None and spec.network_segment not in known
    ]
    if problems:
        raise InventoryError(problems)
    return store.nodes.enroll(inventory.nodes, inventory.networks, actor=actor)
