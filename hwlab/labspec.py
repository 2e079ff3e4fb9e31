"""What a lab is made of: nodes, their BMC protocols, hardware, credentials
and fault rules. Read from a lab file (YAML) or generated for ``--nodes N``.

A lab file::

    seed: 42
    profile: flaky                 # optional: a built-in profile or a file
    redfish_tls: false
    defaults:                      # every node starts from these
      protocols: [ipmi, redfish]   # one machine, both BMC protocols
      credentials: {username: admin, password: lab-password}
      hardware: {vendor: Dell Inc., model: PowerEdge R650, cpus: 32,
                 memory_mb: 262144, power_on_time: 2.0}
      resource_class: baremetal
      network_segment: rack1
    nodes:
      - name: r1-n01
        faults:                    # rules in the fakes.faults format
          - {effect: busy, operation: "power.*", probability: 0.2}
      - name: "r1-n{n:02d}"        # a group: count nodes, numbered from start
        count: 9
        start: 2
        protocols: [redfish]

Every error names the file, the line and the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from bmaas.driver import PowerState
from bmaas.faults import InputError
from bmaas.secrets import Secret
from bmaas.yamlsrc import line_of, load_file
from fakes.faults import FaultRule, parse_rules
from fakes.machine import Hardware
from hwlab.proxy.effects import check_rules
from hwlab.proxy.spec import ProxySpec, parse_proxy

__all__ = [
    "DEFAULT_PASSWORD",
    "DEFAULT_USERNAME",
    "PROTOCOLS",
    "LabSpec",
    "NodeSpec",
    "generate",
    "load_labfile",
]

PROTOCOLS = ("ipmi", "redfish")
DEFAULT_USERNAME = "admin"
DEFAULT_PASSWORD = "hwlab-password"  # noqa: S105 - an emulator's default, as vbmc's "password"

_NODE_KEYS = {
    "name",
    "count",
    "start",
    "protocols",
    "hardware",
    "credentials",
    "network_segment",
    "resource_class",
    "faults",
    "power",
    "proxy",
}
_TOP_KEYS = {"seed", "profile", "redfish_tls", "defaults", "nodes"}
_HARDWARE_FIELDS = {f.name: f.type for f in dataclasses.fields(Hardware)}


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    name: str
    protocols: tuple[str, ...] = PROTOCOLS
    hardware: Hardware = dataclasses.field(default_factory=Hardware)
    username: str = DEFAULT_USERNAME
    password: Secret = dataclasses.field(default_factory=lambda: Secret(DEFAULT_PASSWORD))
    network_segment: str | None = None
    resource_class: str = "baremetal"
    rules: tuple[FaultRule, ...] = ()
    power: PowerState = PowerState.OFF
    #: set for a node whose BMC is real (or stock): hwlab runs a proxy in front of it
    proxy: ProxySpec | None = None


@dataclasses.dataclass(frozen=True)
class LabSpec:
    nodes: tuple[NodeSpec, ...]
    seed: int | str = 0
    profile: str | None = None
    redfish_tls: bool = False
    source: str | None = None

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for node in self.nodes:
            if node.name in seen:
                raise InputError(f"duplicate node name {node.name!r}", source=self.source)
            seen.add(node.name)


def generate(
    count: int,
    *,
    protocols: str = "mixed",
    seed: int | str = 0,
    profile: str | None = None,
    redfish_tls: bool = False,
    hardware: Hardware | None = None,
    prefix: str = "node",
) -> LabSpec:
    """``count`` identical nodes named ``node-001``...; ``protocols`` is
    ``ipmi``, ``redfish``, ``both`` (every machine speaks both), or ``mixed``
    (alternating, half and half)."""
    if count < 1:
        raise InputError("must be at least 1", field="--nodes")
    choices = {
        "ipmi": [("ipmi",)],
        "redfish": [("redfish",)],
        "both": [PROTOCOLS],
        "mixed": [("ipmi",), ("redfish",)],
    }
    if protocols not in choices:
        raise InputError(f"must be one of {', '.join(choices)}", field="--protocols")
    cycle = choices[protocols]
    width = max(3, len(str(count)))
    nodes = tuple(
        NodeSpec(
            name=f"{prefix}-{i:0{width}d}",
            protocols=cycle[(i - 1) % len(cycle)],
            hardware=hardware or Hardware(serial=f"HWLAB{i:06d}"),
            network_segment="lab",
        )
        for i in range(1, count + 1)
    )
    return LabSpec(nodes=nodes, seed=seed, profile=profile, redfish_tls=redfish_tls)


def load_labfile(path: str) -> LabSpec:
    """Read and validate a lab file."""
    data = load_file(path)
    return parse_labfile(data, source=path)


def parse_labfile(data: Any, *, source: str) -> LabSpec:
    if not isinstance(data, Mapping):
        raise InputError("a lab file is a mapping with a 'nodes' list", source=source)
    _check_keys(data, _TOP_KEYS, source, "")
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int | str):
        raise _err("must be an integer or a string", data, "seed", source)
    tls = data.get("redfish_tls", False)
    if not isinstance(tls, bool):
        raise _err("must be true or false", data, "redfish_tls", source)
    profile = data.get("profile")
    if profile is not None and not isinstance(profile, str):
        raise _err("must be a profile name or a file path", data, "profile", source)
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        raise _err("must be a mapping", data, "defaults", source)
    _check_keys(defaults, _NODE_KEYS - {"name", "count", "start"}, source, "defaults.")
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise _err("must be a non-empty list of nodes", data, "nodes", source)
    nodes: list[NodeSpec] = []
    for i, raw in enumerate(raw_nodes):
        where = f"nodes[{i}]"
        if not isinstance(raw, Mapping):
            raise InputError("must be a mapping", source=source, field=where)
        _check_keys(raw, _NODE_KEYS, source, where + ".")
        merged = {**defaults, **raw}
        nodes.extend(_expand(merged, raw, source, where))
    seen: dict[str, str] = {}
    for node in nodes:
        if node.name in seen:
            raise InputError(
                f"duplicate node name {node.name!r} (also {seen[node.name]})",
                source=source,
                field="nodes",
            )
        seen[node.name] = node.name
    return LabSpec(nodes=tuple(nodes), seed=seed, profile=profile, redfish_tls=tls, source=source)


def _expand(merged: Mapping[str, Any], raw: Mapping[str, Any], source: str, where: str):
    def err(message: str, key: str) -> InputError:
        holder = raw if key in raw else merged
        return InputError(message, source=source, line=line_of(holder, key), field=f"{where}.{key}")

    name = merged.get("name")
    if not isinstance(name, str) or not name:
        raise InputError("is required", source=source, line=line_of(raw), field=f"{where}.name")
    count = merged.get("count", 1)
    start = merged.get("start", 1)
    for key, value in (("count", count), ("start", start)):
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or value < (1 if key == "count" else 0)
        ):
            raise err("must be a whole number (count >= 1)", key)
    if count > 1 and "{" not in name:
        raise err("a group of nodes needs a pattern such as 'r1-n{n:02d}'", "name")

    protocols = merged.get("protocols", list(PROTOCOLS))
    if isinstance(protocols, str):
        protocols = list(PROTOCOLS) if protocols == "both" else [protocols]
    if (
        not isinstance(protocols, list)
        or not protocols
        or any(p not in PROTOCOLS for p in protocols)
    ):
        raise err("must list ipmi and/or redfish (or say 'both')", "protocols")

    hardware_raw = merged.get("hardware") or {}
    if not isinstance(hardware_raw, Mapping):
        raise err("must be a mapping", "hardware")
    hardware_kw: dict[str, Any] = {}
    for key, value in hardware_raw.items():
        if key not in _HARDWARE_FIELDS:
            raise err(
                f"unknown hardware field {key!r} (known: {', '.join(_HARDWARE_FIELDS)})", "hardware"
            )
        kind = _HARDWARE_FIELDS[key]
        if kind in ("int", int) and (isinstance(value, bool) or not isinstance(value, int)):
            raise err(f"{key} must be a whole number", "hardware")
        if kind in ("float", float) and (
            isinstance(value, bool) or not isinstance(value, int | float)
        ):
            raise err(f"{key} must be a number of seconds", "hardware")
        if kind in ("str", str) and not isinstance(value, str | int):
            raise err(f"{key} must be text", "hardware")
        hardware_kw[key] = str(value) if kind in ("str", str) else value

    creds = merged.get("credentials") or {}
    if not isinstance(creds, Mapping) or set(creds) - {"username", "password"}:
        raise err("must be a mapping with username and password", "credentials")
    power_value = merged.get("power", "off")
    if isinstance(power_value, bool):  # YAML 1.1 reads a bare on/off as a boolean
        power_value = "on" if power_value else "off"
    power_raw = str(power_value).lower()
    if power_raw not in ("on", "off"):
        raise err("must be on or off", "power")
    rules = tuple(parse_rules(merged.get("faults") or [], source=source, field=f"{where}.faults"))
    for key in ("network_segment", "resource_class"):
        if key in merged and not isinstance(merged[key], str):
            raise err("must be text", key)

    if "proxy" in merged and count > 1:
        raise err("a proxied node fronts one BMC: give each its own entry", "count")

    nodes = []
    for n in range(start, start + count):
        try:
            node_name = name.format(n=n, i=n) if "{" in name else name
        except (KeyError, IndexError, ValueError):
            raise err("bad pattern: use {n} or {n:02d}", "name") from None
        proxy = None
        username = str(creds.get("username", DEFAULT_USERNAME))
        password = Secret(str(creds.get("password", DEFAULT_PASSWORD)))
        if "proxy" in merged:
            proxy = _proxy(node_name, merged["proxy"], creds, source, f"{where}.proxy")
            protocols = [proxy.protocol]
            username, password = proxy.username or username, proxy.password or password
            raw_rules = merged.get("faults") or []
            check_rules(
                rules,
                proxy.protocol,
                credentials=proxy.credentials,
                field=f"{where}.faults",
                source=source,
                lines=[line_of(r) for r in raw_rules] if isinstance(raw_rules, list) else (),
                node=node_name,
            )
        nodes.append(
            NodeSpec(
                name=node_name,
                protocols=tuple(p for p in PROTOCOLS if p in protocols),
                hardware=Hardware(**{"serial": f"HWLAB-{node_name}", **hardware_kw}),
                username=username,
                password=password,
                network_segment=merged.get("network_segment"),
                resource_class=merged.get("resource_class", "baremetal"),
                rules=rules,
                power=PowerState(power_raw),
                proxy=proxy,
            )
        )
    return nodes


def _proxy(
    node: str,
    data: Any,
    creds: Mapping[str, Any],
    source: str,
    where: str,
) -> ProxySpec:
    """A node's ``proxy:``; the BMC credentials default to the node's, and
    for a stock vbmc to virtualbmc's own defaults."""
    spec = parse_proxy(node, data, source=source, where=where)
    if spec.username is None:
        user = creds.get("username", DEFAULT_USERNAME)
        password = creds.get("password", "password" if spec.stock == "vbmc" else "")
        spec = dataclasses.replace(spec, username=str(user), password=Secret(str(password)))
    return spec


def _check_keys(data: Mapping[str, Any], allowed: set[str], source: str, prefix: str) -> None:
    for key in data:
        if key not in allowed:
            raise InputError(
                f"unknown key (allowed: {', '.join(sorted(allowed))})",
                source=source,
                line=line_of(data, key),
                field=f"{prefix}{key}",
            )


def _err(message: str, data: Any, key: str, source: str) -> InputError:
    return InputError(message, source=source, line=line_of(data, key), field=key)
