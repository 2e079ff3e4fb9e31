"""Ironic's ``driver_info`` -> bmaas's :class:`~bmaas.driver_info.DriverInfo`.

Ironic keeps one ``driver_info`` per node, shared by every interface: the
power interface's ``ipmi_address`` sits beside the boot interface's
``deploy_kernel`` and the console's ``ipmi_terminal_port``. bmaas's own parse
is strict (every key must be one it knows), so here:

* keys of this protocol that bmaas reads are parsed and checked as usual;
* keys of other interfaces (no ``ipmi_``/``redfish_`` prefix), and keys
  of this protocol that stock Ironic defines but bmaas does not use
  (``ipmi_terminal_port``, ``ipmi_bridging``, ...), are ignored;
* any other key with this protocol's prefix is a typo and fails, with a
  did-you-mean (``ipmi_adress`` -> ``ipmi_address``).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from typing import Any

from bmaas.driver_info import DriverInfo
from bmaas.faults import InputError
from bmaas.registry import load_driver

__all__ = ["PREFIX", "ironic_keys", "parse_driver_info", "properties"]

#: the driver_info prefix each bmaas protocol owns
PREFIX = {"ipmi": "ipmi_", "redfish": "redfish_"}


@functools.cache
def ironic_keys(protocol: str) -> frozenset[str]:
    """Every driver_info key stock Ironic defines for ``protocol``."""
    if protocol == "ipmi":
        from ironic.drivers.modules import ipmitool

        return frozenset(ipmitool.COMMON_PROPERTIES) | frozenset(ipmitool.CONSOLE_PROPERTIES)
    from ironic.drivers.modules.redfish import utils as redfish_utils

    return frozenset(redfish_utils.COMMON_PROPERTIES)


def properties(protocol: str) -> dict[str, str]:
    """``get_properties()``: the keys bmaas reads, with a description each."""
    from bmaas.driver_info import FIELDS

    cls = load_driver(protocol)
    out = {}
    for key in sorted(cls.accepted_info):
        required = " Required." if key in cls.required_info else " Optional."
        out[key] = FIELDS[key].doc + required
    return out


def parse_driver_info(raw: Mapping[str, Any], protocol: str, *, node: str) -> DriverInfo:
    """The bmaas view of a node's ``driver_info`` for ``protocol`` ("ipmi" or
    "redfish"); ``InputError`` naming the key on a bad or misspelled one."""
    cls = load_driver(protocol)
    accepted = cls.accepted_info
    prefix = PREFIX[protocol]
    if not isinstance(raw, Mapping):  # DriverInfo says "must be a mapping"
        return DriverInfo.parse(raw, required=cls.required_info, accepted=accepted, node=node)
    ours: dict[Any, Any] = {}
    for key, value in raw.items():
        if key in accepted or not isinstance(key, str):  # DriverInfo refuses a non-text key
            ours[key] = value
        elif key.startswith(prefix) and key not in ironic_keys(protocol):
            hint = difflib.get_close_matches(key, sorted(accepted), n=1)
            extra = f"; did you mean {hint[0]!r}?" if hint else ""
            raise InputError(f"unknown key{extra}", field=f"driver_info.{key}", node=node)
    return DriverInfo.parse(ours, required=cls.required_info, accepted=accepted, node=node)
