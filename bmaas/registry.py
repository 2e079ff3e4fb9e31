"""Find drivers through the ``bmaas.drivers`` entry-point group.

The core never imports a protocol library: ``load_driver("ipmi")`` imports
``bmaas.drivers.ipmi`` (and pyghmi with it) only when a node needs it, so a missing
protocol library breaks only the nodes that use it, with a clear message.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from bmaas.driver import BMCDriver
from bmaas.driver_info import DriverInfo
from bmaas.faults import InputError

__all__ = ["ENTRY_POINT_GROUP", "available_drivers", "build_driver", "load_driver"]

ENTRY_POINT_GROUP = "bmaas.drivers"


def available_drivers() -> list[str]:
    """Names of every installed driver (entry points), sorted."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


@functools.cache
def load_driver(name: str) -> type[BMCDriver]:
    """The driver class registered as ``name``; ``InputError`` naming the
    installed drivers when there is none, or the import error when its
    library is broken."""
    matches = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not matches:
        known = ", ".join(available_drivers()) or "none"
        raise InputError(f"unknown driver {name!r} (installed: {known})", field="driver")
    try:
        cls = matches[0].load()
    except Exception as exc:  # any import-time failure of a plugin is the plugin's fault
        raise InputError(
            f"driver {name!r} is installed but does not import: {type(exc).__name__}: {exc}",
            field="driver",
            cause=exc,
        ) from exc
    if not (isinstance(cls, type) and issubclass(cls, BMCDriver)):
        raise InputError(f"driver {name!r} does not name a BMCDriver class", field="driver")
    return cls


def build_driver(
    node: str, driver: str, driver_info: Mapping[str, Any] | DriverInfo, **options: Any
) -> BMCDriver:
    """Validate ``driver_info`` for ``driver`` and construct it for ``node``."""
    cls = load_driver(driver)
    if isinstance(driver_info, DriverInfo):
        info = driver_info
    else:
        # Keys of other drivers are fine (a BMC may speak both protocols);
        # keys bmaas does not know at all are typos and fail.
        info = DriverInfo.parse(driver_info, required=cls.required_info, node=node)
    return cls(node, info, **options)
