"""What a lab is made of: nodes, their BMC protocols, hardware, credentials
and fault rules. Read from a lab file (YAML) or generated for ``--nodes N``.

A lab file::

    seed: 42
    profile: flaky                 # optional: a built-in profile or a file
    redfish_tls: false
    redfish_service_size: 1        # >1: that many Redfish systems per service (one port)
    sse_keepalive: 30              # seconds between ': keepalive' comments on an
                                   # idle SSE stream; 0 or null: none (as bmcweb)
    defaults:                      # every node starts from these
      protocols: [ipmi, redfish]   # one machine, both BMC protocols
      credentials: {username: admin, password: lab-password}
      hardware: {vendor: Dell Inc., model: PowerEdge R650, cpus: 32,
                 memory_mb: 262144, power_on_time: 2.0}
      resource_class: baremetal
      network_segment: rack1
    nodes:
      - name: r1-n01
        faults:                    # rules in the bmaas.fakes.faults format
          - {effect: busy, operation: "power.*", probability: 0.2}
      - name: "r1-n{n:02d}"        # a group: count nodes, numbered from start
        count: 9
        start: 2
        protocols: [redfish]
        profile: idrac10           # this group's BMCs: a vendor profile
                                   # (shares pick among the nodes naming it)
        shape: idrac10             # its Redfish BMCs' vendor shape (default:
                                   # the vendor profile's, else hwlab's own)

Every problem is reported at once, each naming the file, the line and the
field (:class:`LabFileError`, bmaas's inventory error); node names follow the
rule ``bmaas enroll`` applies, so the inventory hwlab writes always enrolls.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bmaas import fields, validate
from bmaas.driver import PowerState
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.machine import Hardware
from bmaas.faults import InputError
from bmaas.hwlab.limits import MAX_NODES, MAX_REDFISH_SERVICE_SIZE, SSE_KEEPALIVE
from bmaas.inventory.nodes import is_valid_name
from bmaas.inventory.specs import Checker, InventoryError
from bmaas.secrets import Secret
from bmaas.yamlsrc import SourceDict, line_of, load_file

if TYPE_CHECKING:
    from bmaas.hwlab.proxy.spec import ProxySpec

__all__ = [
    "DEFAULT_PASSWORD",
    "DEFAULT_USERNAME",
    "MAX_NODES",
    "PROTOCOLS",
    "LabFileError",
    "LabSpec",
    "NodeSpec",
    "generate",
    "load_labfile",
    "loopback_hosts",
    "shape_of",
    "sse_keepalive_of",
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
    "profile",
    "shape",
}
_TOP_KEYS = {
    "seed",
    "profile",
    "redfish_tls",
    "redfish_service_size",
    "sse_keepalive",
    "defaults",
    "nodes",
}

#: bounds on what a lab file may ask for; each error names the limit
MAX_LABFILE_BYTES = 4 * 1024 * 1024
MAX_RULES = 64
MAX_START = 10**9
MAX_COUNT = 1 << 31
MAX_SECONDS = validate.MAX_SECONDS
MAX_TEXT = 255
#: a format field with a width or precision of three digits or more
_WIDE = re.compile(r"\{[^}]*:[^}]*[0-9]{3}")
_HARDWARE_FIELDS = {f.name: f.type for f in dataclasses.fields(Hardware)}


class LabFileError(InventoryError):
    """Every problem in one lab file (``problems``), as an inventory's are."""


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
    #: a profile for this node (a vendor's BMC); its shares pick among the
    #: nodes that name the same profile
    profile: str | None = None
    #: the vendor shape its Redfish BMC serves (:mod:`bmaas.hwlab.redfish.shapes`;
    #: None: the vendor profile's shape, else hwlab's own)
    shape: str | None = None


@dataclasses.dataclass(frozen=True)
class LabSpec:
    nodes: tuple[NodeSpec, ...]
    seed: int | str = 0
    profile: str | None = None
    redfish_tls: bool = False
    source: str | None = None
    #: Redfish systems per service: >1 serves consecutive Redfish nodes of a
    #: worker as the systems of one service on one port (a chassis manager,
    #: sushy-tools), each at /redfish/v1/Systems/<node name>
    redfish_service_size: int = 1
    #: seconds between ``: keepalive`` comments on an idle Redfish SSE stream
    #: (None: none at all, as OpenBMC's bmcweb, which writes only events)
    sse_keepalive: float | None = SSE_KEEPALIVE

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
    redfish_service_size: int = 1,
    shape: str | None = None,
    sse_keepalive: float | None = SSE_KEEPALIVE,
) -> LabSpec:
    """``count`` identical nodes named ``node-001``...; ``protocols`` is
    ``ipmi``, ``redfish``, ``both`` (every machine speaks both), or ``mixed``
    (alternating, half and half). ``sse_keepalive``: seconds between keepalive
    comments on an idle SSE stream; 0 or None: none."""
    if count < 1:
        raise InputError("must be at least 1", field="--nodes")
    if not 1 <= redfish_service_size <= MAX_REDFISH_SERVICE_SIZE:
        raise InputError(
            f"must be from 1 to {MAX_REDFISH_SERVICE_SIZE}", field="--redfish-service-size"
        )
    keepalive = sse_keepalive_of(sse_keepalive, field="--sse-keepalive")
    choices: dict[str, list[tuple[str, ...]]] = {
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
            shape=shape,
        )
        for i in range(1, count + 1)
    )
    return LabSpec(
        nodes=nodes,
        seed=seed,
        profile=profile,
        redfish_tls=redfish_tls,
        redfish_service_size=redfish_service_size,
        sse_keepalive=keepalive,
    )


def sse_keepalive_of(value: Any, *, field: str = "sse_keepalive") -> float | None:
    """``sse_keepalive`` as the lab keeps it: seconds (> 0, finite, at most
    :data:`MAX_SECONDS`), or None for no keepalive at all (given as None or
    0). Anything else (text, a boolean, a negative, NaN, inf) is an
    ``InputError`` naming ``field``."""
    if value is None:
        return None
    try:
        seconds = validate.seconds(value, high=MAX_SECONDS)
    except ValueError as exc:
        raise InputError(f"{exc} (0 or null: no keepalive)", field=field) from None
    return seconds or None


def load_labfile(path: str) -> LabSpec:
    """Read and validate a lab file: every problem at once (:class:`LabFileError`).
    It must be a regular file of at most :data:`MAX_LABFILE_BYTES`."""
    data = load_file(path, limit=MAX_LABFILE_BYTES)
    return parse_labfile(data, source=path)


def parse_labfile(data: Any, *, source: str) -> LabSpec:
    """Validate a lab file's document; raises :class:`LabFileError` listing
    every problem found, each with file, line and field."""
    check = Checker(source)
    if not isinstance(data, Mapping):
        check.fail("a lab file is a mapping with a 'nodes' list")
        raise LabFileError(check.problems)
    check.unknown_keys(data, tuple(sorted(_TOP_KEYS)), prefix="", node=None)
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int | str):
        check.fail("must be an integer or a string", data=data, key="seed")
    tls = data.get("redfish_tls", False)
    if not isinstance(tls, bool):
        check.fail("must be true or false", data=data, key="redfish_tls")
    service_size = data.get("redfish_service_size", 1)
    try:
        validate.whole(service_size, low=1, high=MAX_REDFISH_SERVICE_SIZE)
    except ValueError as exc:
        check.fail(str(exc), data=data, key="redfish_service_size")
        service_size = 1
    keepalive: float | None = SSE_KEEPALIVE
    try:
        keepalive = sse_keepalive_of(data.get("sse_keepalive", SSE_KEEPALIVE))
    except InputError as exc:
        check.fail(exc.message, data=data, key="sse_keepalive")
    profile = data.get("profile")
    if profile is not None and not isinstance(profile, str):
        check.fail("must be a profile name or a file path", data=data, key="profile")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        check.fail("must be a mapping", data=data, key="defaults")
        defaults = {}
    allowed_defaults = tuple(sorted(_NODE_KEYS - {"name", "count", "start"}))
    check.unknown_keys(defaults, allowed_defaults, prefix="defaults.", node=None)
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        check.fail("must be a non-empty list of nodes", data=data, key="nodes")
        raw_nodes = []
    nodes: list[NodeSpec] = []
    for i, raw in enumerate(raw_nodes):
        where = f"nodes[{i}]"
        if not isinstance(raw, Mapping):
            check.fail("must be a mapping", data=data, key="nodes", field=where)
            continue
        check.unknown_keys(raw, tuple(sorted(_NODE_KEYS)), prefix=where + ".", node=None)
        nodes.extend(_expand(check, defaults, raw, where, room=MAX_NODES - len(nodes)))
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            check.fail(f"duplicate node name {node.name!r}", data=data, key="nodes", node=node.name)
        seen.add(node.name)
    if check.problems:
        raise LabFileError(check.problems)
    return LabSpec(
        nodes=tuple(nodes),
        seed=seed,
        profile=profile,
        redfish_tls=tls,
        source=source,
        redfish_service_size=service_size,
        sse_keepalive=keepalive,
    )


class _OrEmpty:
    """A nested record whose null (or any empty value) means none given."""

    def __init__(self, record: fields.Shape, empty: Any) -> None:
        self.record, self.empty = record, empty

    def walk(
        self, value: Any, check: Checker, path: str, line: int | None, node: str | None
    ) -> Any:
        return self.record.walk(value, check, path, line, node) if value else self.empty


def _hardware_field(kind: Any) -> fields.Field:
    if kind in ("int", int):
        return fields.whole(low=0, high=MAX_COUNT)
    if kind in ("float", float):
        return fields.seconds(high=MAX_SECONDS)
    return fields.Field(_short_text)


def _short_text(value: Any) -> str:
    if not isinstance(value, str | int) or len(str(value)) > MAX_TEXT:
        raise ValueError(f"must be text of at most {MAX_TEXT} characters")
    return str(value)


def _label(value: Any) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise ValueError(f"must be text of at most {MAX_TEXT} characters")
    return value


def _credential(value: Any) -> str:
    if not isinstance(value, str) or not value:
        # A YAML null or number would become the text "None" or "123".
        raise ValueError(f"must be a non-empty string (quote it), not {value!r}")
    if len(value) > MAX_TEXT:
        raise ValueError(f"longer than {MAX_TEXT} characters")
    return value


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("is required")
    return value


def _protocols(value: Any) -> list[str]:
    if isinstance(value, str):
        value = list(PROTOCOLS) if value == "both" else [value]
    if not isinstance(value, list) or not value or any(p not in PROTOCOLS for p in value):
        raise ValueError("must list ipmi and/or redfish (or say 'both')")
    return value


def _power(value: Any) -> PowerState:
    if isinstance(value, bool):  # YAML 1.1 reads a bare on/off as a boolean
        value = "on" if value else "off"
    if str(value).lower() not in ("on", "off"):
        raise ValueError("must be on or off")
    return PowerState(str(value).lower())


def _profile(value: Any) -> str:
    from bmaas.hwlab.profiles import resolve  # the lab file's node names its BMC's profile

    if not isinstance(value, str):
        raise ValueError("must be a profile name or a file path")
    resolve(value)  # an InputError: its message, at this field
    return value


def _shape(value: Any) -> str:
    from bmaas.hwlab.redfish.shapes import validate as valid_shape

    if not isinstance(value, str):
        raise ValueError("must be a shape name")
    valid_shape(value)
    return value


class _Rules:
    """A node's ``faults``: each rule checked on its own, so every bad rule is reported."""

    def walk(self, raw: Any, check: Checker, path: str, line: int | None, node: str | None) -> Any:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            check.fail("must be a list of rules", field=path, line=line)
            return ()
        if len(raw) > MAX_RULES:
            message = f"has {len(raw)} rules; at most {MAX_RULES} per node (MAX_RULES)"
            check.fail(message, field=path, line=line_of(raw))
            return ()
        rules = []
        for i, item in enumerate(raw):
            try:
                rules.append(FaultRule.from_dict(item, source=check.source, where=f"{path}[{i}]"))
            except InputError as exc:
                check.problems.extend(getattr(exc, "problems", None) or [exc])
        return tuple(rules)


def _group(found: fields.Found) -> None:
    """A group's size and pattern, a proxied node's count, and fault rules no
    client of the node could see."""
    values, data = found.values, found.data
    count = values.get("count") or 0
    if found.ok("count"):
        if count > found.context["room"]:
            found.fail(f"would make more than {MAX_NODES} nodes in the lab (MAX_NODES)", "count")
        elif count > 1 and found.ok("name") and "{" not in values["name"]:
            found.fail("a group of nodes needs a pattern such as 'r1-n{n:02d}'", "name")
    if found.ok("start") and values["start"] > MAX_START:
        found.fail(f"must be at most {MAX_START}", "start")
    if "proxy" in data and found.ok("count") and count > 1:
        found.fail("a proxied node fronts one BMC: give each its own entry", "count")
    raw_rules = found.context["own_faults"]
    rules = values.get("faults") or ()
    if "proxy" not in data and isinstance(raw_rules, list) and len(raw_rules) == len(rules):
        # the node's own rules (not defaults', which every node shares): one no
        # client of this node could see is refused, not logged as fired
        protocols = values["protocols"] if found.ok("protocols") else list(PROTOCOLS)
        for i, rule in enumerate(rules):
            why = rule.unseen_on(protocols)
            if why:
                found.fail(why, field=f"{found.path}.faults[{i}]", line=line_of(raw_rules[i]))


_HARDWARE = fields.Record(
    {key: _hardware_field(kind) for key, kind in _HARDWARE_FIELDS.items()},
    unknown=f"unknown hardware field (known: {', '.join(_HARDWARE_FIELDS)})",
    file_order=True,
)
_CREDENTIALS = fields.Record(
    {"username": fields.Field(_credential), "password": fields.Field(_credential)},
    unknown="unknown key (allowed: {allowed})",
    not_mapping="must be a mapping with username and password",
)
#: one entry of a lab file's ``nodes`` (merged over ``defaults``)
NODE = fields.Record(
    {
        "name": fields.Field(_name, required=True),
        "count": fields.whole(low=1, default=1),
        "start": fields.whole(low=0, default=1),
        "protocols": fields.Field(_protocols, default=list(PROTOCOLS)),
        "hardware": fields.Field(_OrEmpty(_HARDWARE, {}), default={}),
        "credentials": fields.Field(_OrEmpty(_CREDENTIALS, {}), default={}),
        "power": fields.Field(_power, default=PowerState.OFF),
        "faults": fields.Field(_Rules(), default=()),
        "profile": fields.Field(fields.optional(_profile), default=None),
        "shape": fields.Field(fields.optional(_shape), default=None),
        "network_segment": fields.Field(_label, default=None),
        "resource_class": fields.Field(_label, default="baremetal"),
        "proxy": fields.Field(),
    },
    checks=(_group,),
)


def _merged(defaults: Mapping[str, Any], raw: Mapping[str, Any]) -> SourceDict:
    """``defaults`` overlaid by the entry ``raw`` (the keys of a node only:
    others were reported by the caller), each key with the line it came from."""
    merged = SourceDict()
    merged.line = line_of(raw)
    for key, value in {**defaults, **raw}.items():
        if key in _NODE_KEYS:
            merged.set_at(key, value, line_of(raw if key in raw else defaults, key))
    return merged


def _expand(
    check: Checker, defaults: Mapping[str, Any], raw: Mapping[str, Any], where: str, *, room: int
) -> list[NodeSpec]:
    """The nodes one entry (over ``defaults``) stands for; its problems go to
    ``check`` (none: [])."""
    before = len(check.problems)
    data = _merged(defaults, raw)
    context = {"room": room, "own_faults": raw.get("faults")}
    values = NODE.walk(data, check, where, line_of(raw), context=context)
    if values is None or len(check.problems) > before:
        return []
    name = values["name"]
    if _WIDE.search(name):
        # '{n:999999999d}' would make one name a gigabyte long
        check.fail(
            "bad pattern: a width of at most two digits, such as {n:02d}",
            data=data,
            key="name",
            field=f"{where}.name",
        )
        return []
    nodes = []
    for n in range(values["start"], values["start"] + values["count"]):
        node = _node(check, values, data, where, n)
        if node is None:
            return []
        nodes.append(node)
    return nodes


def _node(
    check: Checker, values: dict[str, Any], data: Mapping[str, Any], where: str, n: int
) -> NodeSpec | None:
    """Node ``n`` of an entry (its problems go to ``check``: None)."""
    name = values["name"]

    def err(message: str) -> None:
        check.fail(message, data=data, key="name", field=f"{where}.name")

    try:
        node_name = name.format(n=n, i=n) if "{" in name else name
    except (KeyError, IndexError, ValueError):
        err("bad pattern: use {n} or {n:02d}")
        return None
    if not is_valid_name(node_name):
        err(
            f"{node_name!r} is not a name bmaas enroll accepts (letters, digits, "
            "'.', '_', '-'; starting with a letter or digit; at most 255)"
        )
        return None
    creds, rules = values["credentials"], values["faults"]
    username = str(creds.get("username", DEFAULT_USERNAME))
    password = Secret(str(creds.get("password", DEFAULT_PASSWORD)))
    protocols, proxy = values["protocols"], None
    if "proxy" in values:
        # Imported here: a lab worker (no proxies) need not load the proxy package.
        from bmaas.hwlab.proxy.effects import check_rules

        try:
            proxy = _proxy(node_name, values["proxy"], creds, check.source, f"{where}.proxy")
            raw_rules = data.get("faults") or []
            check_rules(
                rules,
                proxy.protocol,
                credentials=proxy.credentials,
                field=f"{where}.faults",
                source=check.source,
                lines=[line_of(r) for r in raw_rules] if isinstance(raw_rules, list) else (),
                node=node_name,
            )
        except InputError as exc:  # every refused rule, one problem each
            check.problems.extend(getattr(exc, "problems", None) or [exc])
            return None
        protocols = [proxy.protocol]
        username, password = proxy.username or username, proxy.password or password
    return NodeSpec(
        name=node_name,
        protocols=tuple(p for p in PROTOCOLS if p in protocols),
        hardware=Hardware(**{"serial": f"HWLAB-{node_name}", **values["hardware"]}),
        username=username,
        password=password,
        network_segment=values["network_segment"],
        resource_class=values["resource_class"],
        rules=rules,
        power=values["power"],
        proxy=proxy,
        profile=values["profile"],
        shape=values["shape"],
    )


def _proxy(
    node: str,
    data: Any,
    creds: Mapping[str, Any],
    source: str | None,
    where: str,
) -> ProxySpec:
    """A node's ``proxy:``; the BMC credentials default to the node's, and
    for a stock vbmc to virtualbmc's own defaults."""
    from bmaas.hwlab.proxy.spec import parse_proxy

    spec = parse_proxy(node, data, source=source, where=where)
    if spec.username is None:
        user = creds.get("username", DEFAULT_USERNAME)
        password = creds.get("password", "password" if spec.stock == "vbmc" else "")
        spec = dataclasses.replace(spec, username=str(user), password=Secret(str(password)))
    return spec


def loopback_hosts(names: Sequence[str]) -> dict[str, str]:
    """A loopback address of its own for each of ``names``: ``127.1.0.1``,
    ``127.1.0.2``, ... (254 per third octet, then the second; room for
    16 million). Linux answers the whole of 127.0.0.0/8 on ``lo``, so these
    need no configuration. Why: Ironic's stock ``ipmi`` waits
    ``[ipmi]min_command_interval`` between two commands to the same address
    *string*, so BMCs sharing 127.0.0.1 are throttled as one."""
    per_octet = 254
    out = {}
    for index, name in enumerate(names):
        high, low = divmod(index, per_octet)
        second, third = divmod(high, 256)
        if second > 254:
            raise InputError(f"more than {254 * 256 * per_octet} loopback addresses asked for")
        out[name] = f"127.{1 + second}.{third}.{low + 1}"
    return out


def shape_of(node: NodeSpec, lab_profile: str | None = None) -> str | None:
    """The vendor shape ``node``'s Redfish BMC serves: its own ``shape``,
    else the shape of the vendor profile it (or else the lab) names, else
    None (hwlab's own service)."""
    if node.shape is not None:
        return node.shape
    from bmaas.hwlab.profiles import shape_for  # profiles import fakes: only when asked

    return shape_for(node.profile) or shape_for(lab_profile)
