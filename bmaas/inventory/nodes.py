"""One node of an inventory, in Ironic's vocabulary."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from bmaas import credentials, validate
from bmaas.driver_info import DriverInfo
from bmaas.faults import InputError
from bmaas.inventory.specs import Checker, NodeSpec
from bmaas.registry import load_driver
from bmaas.secrets import is_secret_key
from bmaas.yamlsrc import line_of

__all__ = ["NODE_KEYS", "PROPERTY_TYPES", "is_valid_name", "parse_node"]

NODE_KEYS = (
    "name",
    "driver",
    "driver_info",
    "resource_class",
    "properties",
    "network_segment",
    "extra",
)
#: Ironic's typed node properties; any other property must be a plain scalar
PROPERTY_TYPES: dict[str, tuple[type, int | None]] = {
    "cpus": (int, 1),
    "memory_mb": (int, 1),
    "local_gb": (int, 0),
    "cpu_arch": (str, None),
}


def parse_node(
    check: Checker,
    raw: Any,
    index: int,
    base_dir: str | None,
    environ: Mapping[str, str] | None,
    doc: Any,
) -> NodeSpec | None:
    prefix = f"nodes[{index}]"
    if not isinstance(raw, Mapping):
        check.fail(
            f"must be a mapping, not {type(raw).__name__}", data=doc, key="nodes", field=prefix
        )
        return None
    before = len(check.problems)
    name = check.text(raw, "name", prefix=f"{prefix}.", node=None, required=True)
    if name is not None and not validate.is_name(name):
        check.fail(
            f"must be {validate.NAME_ALPHABET}",
            data=raw,
            key="name",
            field="name",
            node=name,
        )
        name = None
    label = name or prefix
    check.unknown_keys(raw, NODE_KEYS, prefix="", node=label)
    driver = check.text(raw, "driver", prefix="", node=label, required=True)
    driver_cls = None
    if driver is not None:
        try:
            driver_cls = load_driver(driver)
        except InputError as exc:
            check.fail(exc.message, data=raw, key="driver", node=label)
    info = raw.get("driver_info", {})
    stored: dict[str, Any] = {}
    if not isinstance(info, Mapping):
        check.fail("must be a mapping", data=raw, key="driver_info", node=label)
    else:
        stored, resolved, failed = _driver_info(check, info, label, base_dir, environ)
        if driver_cls is not None:
            # Any key bmaas knows is accepted, as Ironic keeps every
            # interface's keys: a server whose BMC speaks both protocols
            # carries ipmi_* and redfish_* keys. Typos are still caught.
            # A password that could not be resolved is said once (above):
            # the other keys are still checked, every problem in one pass.
            required = [k for k in driver_cls.required_info if k not in failed]
            for problem in DriverInfo.problems(resolved, required=required, node=label):
                key = (problem.field or "").removeprefix("driver_info.")
                line = line_of(info, key) if key in info else line_of(raw, "driver_info")
                check.fail(problem.message, line=line, field=problem.field, node=label)
    resource_class = check.text(raw, "resource_class", prefix="", node=label)
    properties = _properties(check, raw, label)
    segment = check.text(raw, "network_segment", prefix="", node=label)
    extra = raw.get("extra", {})
    if not isinstance(extra, Mapping):
        check.fail("must be a mapping", data=raw, key="extra", node=label)
        extra = {}
    elif _has_non_finite(extra):
        # stored as JSON, which has no NaN or Infinity (PostgreSQL refuses them)
        check.fail("must hold only finite numbers", data=raw, key="extra", node=label)
    if len(check.problems) > before or name is None or driver is None:
        return None
    return NodeSpec(
        name=name,
        driver=driver,
        driver_info=stored,
        resource_class=resource_class,
        properties=properties,
        network_segment=segment,
        extra=dict(extra),
        line=line_of(raw),
        segment_line=line_of(raw, "network_segment"),
    )


def _driver_info(
    check: Checker,
    info: Mapping[str, Any],
    node: str,
    base_dir: str | None,
    environ: Mapping[str, str] | None,
) -> tuple[dict[str, Any], dict[str, Any], set[str]]:
    """(the form to store, the form to validate with passwords resolved, the
    password keys that could not be resolved: left out of the second)."""
    stored: dict[str, Any] = {}
    resolved: dict[str, Any] = {}
    failed: set[str] = set()
    for key, value in info.items():
        field = f"driver_info.{key}"
        if not (is_secret_key(str(key)) and value is not None):
            stored[key] = value
            resolved[key] = value
            continue
        if not isinstance(value, str):
            check.fail(
                "must be a string: inline, ${ENV_VAR} or file:PATH",
                data=info,
                key=str(key),
                field=field,
                node=node,
            )
            failed.add(str(key))
            continue
        stored[key] = credentials.normalize(value, base_dir=base_dir)
        try:
            secret = credentials.resolve(stored[key], field=field, node=node, environ=environ)
        except InputError as exc:
            check.fail(exc.message, data=info, key=str(key), field=field, node=node)
            failed.add(str(key))
            continue
        resolved[key] = secret
    return stored, resolved, failed


def _properties(check: Checker, raw: Mapping[str, Any], node: str) -> dict[str, Any]:
    props = raw.get("properties", {})
    if not isinstance(props, Mapping):
        check.fail("must be a mapping", data=raw, key="properties", node=node)
        return {}
    out: dict[str, Any] = {}
    for key, value in props.items():
        field = f"properties.{key}"
        if key in PROPERTY_TYPES:
            kind, low = PROPERTY_TYPES[key]
            try:
                if kind is int:
                    value = validate.whole(value, low=low)
                elif not isinstance(value, str):
                    raise ValueError(f"must be a string, not {value!r}")
            except ValueError as exc:
                check.fail(str(exc), data=props, key=str(key), field=field, node=node)
                continue
        elif not isinstance(value, str | int | float | bool) or (
            isinstance(value, float) and not math.isfinite(value)
        ):
            check.fail(
                "must be a string, finite number or boolean",
                data=props,
                key=str(key),
                field=field,
                node=node,
            )
            continue
        out[str(key)] = value
    return out


def _has_non_finite(value: Any) -> bool:
    """Whether a NaN or an infinity hides anywhere in ``value`` (the loader
    has bounded its depth)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_non_finite(v) for v in value)
    return False


def is_valid_name(name: str) -> bool:
    """Whether ``name`` is a node name an inventory accepts (hwlab's lab files
    apply the same rule, so what hwlab writes always enrolls)."""
    return validate.is_name(name)
