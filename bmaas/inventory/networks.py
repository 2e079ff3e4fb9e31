"""Networks and segments of an inventory, in Neutron's routed-network terms.

A segment's ``allocation_pools`` default to the whole subnet (as Neutron's
do); the gateway is never handed out.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from bmaas.inventory.specs import Checker, NetworkSpec, SegmentSpec
from bmaas.yamlsrc import line_of

__all__ = ["NETWORK_KEYS", "SEGMENT_KEYS", "parse_networks"]

NETWORK_KEYS = ("name", "segments")
SEGMENT_KEYS = ("name", "cidr", "gateway_ip", "allocation_pools")


def parse_networks(check: Checker, raw: Any, doc: Any) -> list[NetworkSpec]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        check.fail("must be a list of networks", data=doc, key="networks")
        return []
    out: list[NetworkSpec] = []
    names: set[str] = set()
    segment_names: set[str] = set()
    for index, net in enumerate(raw):
        prefix = f"networks[{index}]"
        if not isinstance(net, Mapping):
            check.fail("must be a mapping", data=doc, key="networks", field=prefix)
            continue
        check.unknown_keys(net, NETWORK_KEYS, prefix=f"{prefix}.", node=None)
        name = check.name(net, "name", prefix=f"{prefix}.", node=None, required=True)
        if name in names:
            check.fail("duplicate network name", data=net, key="name", field=f"{prefix}.name")
        segments = []
        raw_segments = net.get("segments", [])
        if not isinstance(raw_segments, list):
            check.fail("must be a list", data=net, key="segments", field=f"{prefix}.segments")
            raw_segments = []
        for j, seg in enumerate(raw_segments):
            spec = _segment(check, seg, f"{prefix}.segments[{j}]", net)
            if spec is None:
                continue
            if spec.name in segment_names:
                check.fail(
                    "duplicate segment name", line=spec.line, field=f"{prefix}.segments[{j}].name"
                )
                continue
            segment_names.add(spec.name)
            segments.append(spec)
        if name is not None:
            names.add(name)
            out.append(NetworkSpec(name, segments, line_of(net)))
    return out


def _segment(check: Checker, seg: Any, prefix: str, net: Any) -> SegmentSpec | None:
    if not isinstance(seg, Mapping):
        check.fail("must be a mapping", data=net, key="segments", field=prefix)
        return None
    before = len(check.problems)
    check.unknown_keys(seg, SEGMENT_KEYS, prefix=f"{prefix}.", node=None)
    name = check.name(seg, "name", prefix=f"{prefix}.", node=None, required=True)
    cidr_text = check.text(seg, "cidr", prefix=f"{prefix}.", node=None, required=True)
    if cidr_text is None:
        return None
    try:
        cidr = ipaddress.ip_network(cidr_text)
    except ValueError as exc:
        check.fail(f"not a network: {exc}", data=seg, key="cidr", field=f"{prefix}.cidr")
        return None

    def address(value: Any, field: str, data: Any, key: str) -> Any:
        try:
            ip = ipaddress.ip_address(str(value))
        except ValueError:
            check.fail(f"not an IP address: {value!r}", data=data, key=key, field=field)
            return None
        if ip not in cidr:
            check.fail(f"{ip} is outside {cidr}", data=data, key=key, field=field)
            return None
        return ip

    gateway = None
    if seg.get("gateway_ip") is not None:
        gateway = address(seg["gateway_ip"], f"{prefix}.gateway_ip", seg, "gateway_ip")
    pools: list[dict[str, str]] = []
    raw_pools = seg.get("allocation_pools")
    if raw_pools is None:
        hosts = list(cidr.hosts()) if cidr.num_addresses <= 2**16 else []
        if hosts:  # Neutron's default: the whole subnet
            pools = [{"start": str(hosts[0]), "end": str(hosts[-1])}]
        else:
            check.fail("is required for this subnet", data=seg, field=f"{prefix}.allocation_pools")
    elif not isinstance(raw_pools, list) or not raw_pools:
        check.fail(
            "must be a list of {start, end}",
            data=seg,
            key="allocation_pools",
            field=f"{prefix}.allocation_pools",
        )
    else:
        ranges: list[tuple[Any, Any]] = []
        for k, pool in enumerate(raw_pools):
            field = f"{prefix}.allocation_pools[{k}]"
            if not isinstance(pool, Mapping) or set(pool) != {"start", "end"}:
                check.fail(
                    "must be {start: IP, end: IP}", data=seg, key="allocation_pools", field=field
                )
                continue
            start = address(pool["start"], f"{field}.start", pool, "start")
            end = address(pool["end"], f"{field}.end", pool, "end")
            if start is None or end is None:
                continue
            if start > end:
                check.fail(f"start {start} is after end {end}", data=pool, key="start", field=field)
                continue
            if any(start <= e and s <= end for s, e in ranges):
                check.fail("overlaps another pool", data=pool, key="start", field=field)
                continue
            ranges.append((start, end))
            pools.append({"start": str(start), "end": str(end)})
    if len(check.problems) > before or name is None:
        return None
    return SegmentSpec(name, str(cidr), str(gateway) if gateway else None, pools, line_of(seg))
