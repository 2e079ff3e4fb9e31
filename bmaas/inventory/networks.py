"""Networks and segments of an inventory, in Neutron's routed-network terms.

A segment's ``allocation_pools`` default to the whole subnet (as Neutron's
do); the gateway is never handed out.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from bmaas import fields, validate
from bmaas.fields import at
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


def _required(rule: Any) -> Any:
    # Checker.text's words: null is missing, "" and numbers are not text
    def check(value: Any) -> Any:
        if value is None:
            raise ValueError("is required")
        if not isinstance(value, str) or not value:
            raise ValueError(f"must be a non-empty string, not {value!r}")
        return rule(value)

    return check


def _name(value: str) -> str:
    if not validate.is_name(value):
        raise ValueError(f"must be {validate.NAME_ALPHABET}")
    return value


def _network(value: str) -> Any:
    try:
        return ipaddress.ip_network(value)
    except ValueError as exc:
        raise ValueError(f"not a network: {exc}") from None


def _address(value: Any, cidr: Any) -> Any:
    try:
        ip = ipaddress.ip_address(str(value))
    except ValueError:
        raise ValueError(f"not an IP address: {value!r}") from None
    if ip not in cidr:
        raise ValueError(f"{ip} is outside {cidr}")
    return ip


def _addresses(found: fields.Found) -> None:
    """The gateway and the pools, inside the segment's cidr."""
    if not found.ok("cidr"):
        return
    cidr, check = found.values["cidr"], found.check

    def address(data: Any, key: str, field: str) -> Any:
        try:
            return _address(data[key], cidr)
        except ValueError as exc:
            check.fail(str(exc), data=data, key=key, field=field)
            return None

    if found.data.get("gateway_ip") is not None:
        found.values["gateway_ip"] = address(found.data, "gateway_ip", at(found.path, "gateway_ip"))
    raw_pools = found.data.get("allocation_pools")
    field = at(found.path, "allocation_pools")
    pools: list[dict[str, str]] = []
    found.values["allocation_pools"] = pools
    if raw_pools is None:
        hosts = list(cidr.hosts()) if cidr.num_addresses <= 2**16 else []
        if hosts:  # Neutron's default: the whole subnet
            pools.append({"start": str(hosts[0]), "end": str(hosts[-1])})
        else:
            check.fail("is required for this subnet", data=found.data, field=field)
        return
    if not isinstance(raw_pools, list) or not raw_pools:
        found.fail("must be a list of {start, end}", "allocation_pools")
        return
    ranges: list[tuple[Any, Any]] = []
    for k, pool in enumerate(raw_pools):
        where = f"{field}[{k}]"
        if not isinstance(pool, Mapping) or set(pool) != {"start", "end"}:
            found.fail("must be {start: IP, end: IP}", "allocation_pools", field=where)
            continue
        start = address(pool, "start", f"{where}.start")
        end = address(pool, "end", f"{where}.end")
        if start is None or end is None:
            continue
        if start > end:
            check.fail(f"start {start} is after end {end}", data=pool, key="start", field=where)
        elif any(start <= e and s <= end for s, e in ranges):
            check.fail("overlaps another pool", data=pool, key="start", field=where)
        else:
            ranges.append((start, end))
            pools.append({"start": str(start), "end": str(end)})


SEGMENT = fields.Record(
    {
        "name": fields.Field(_required(_name), required=True),
        "cidr": fields.Field(_required(_network), required=True),
        "gateway_ip": fields.Field(default=None),
        "allocation_pools": fields.Field(),
    },
    checks=(_addresses,),
    sort_allowed=False,
)


def _segment(check: Checker, seg: Any, prefix: str, net: Any) -> SegmentSpec | None:
    before = len(check.problems)
    values = SEGMENT.walk(seg, check, prefix, line_of(net, "segments"))
    if values is None or len(check.problems) > before:
        return None
    gateway = values["gateway_ip"]
    pools = values["allocation_pools"]
    return SegmentSpec(
        values["name"], str(values["cidr"]), gateway and str(gateway), pools, line_of(seg)
    )
