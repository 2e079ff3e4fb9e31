"""Find drivers, and what each driver offers beyond the contract, through
entry points.

The core never imports a protocol library: ``load_driver("ipmi")`` imports
``bmaas.drivers.ipmi`` (and pyghmi with it) only when a node needs it, so a missing
protocol library breaks only the nodes that use it, with a clear message.

A driver's optional capabilities are entry points too, named by the driver,
in a group per capability (:func:`capability`), so a third-party driver
offers them the way it offers itself -- never a module bmaas guesses by
name:

======================  ===================================================
``bmaas.drivers``       the driver class (a :class:`~bmaas.driver.BMCDriver`)
``bmaas.events``        its event streams: ``services(records)`` ->
                        ``(streams, left out with why)`` (:mod:`bmaas.events`)
``bmaas.events.push``   its pushed events: an object with ``listener(settings)``
                        and ``services(records, push=, prefer_push=)``
======================  ===================================================
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from bmaas.driver import BMCDriver
from bmaas.driver_info import DriverInfo
from bmaas.faults import InputError

__all__ = [
    "ENTRY_POINT_GROUP",
    "EVENTS_GROUP",
    "PUSH_GROUP",
    "available_drivers",
    "build_driver",
    "capability",
    "load_driver",
]

LOG = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "bmaas.drivers"
#: a driver's event streams (``services(records)``)
EVENTS_GROUP = "bmaas.events"
#: a driver's pushed events (``listener(settings)``, ``services(records, push=, prefer_push=)``)
PUSH_GROUP = "bmaas.events.push"


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


@functools.cache
def capability(group: str, driver: str) -> Any | None:
    """What ``driver`` registered in the capability ``group`` (loaded once),
    or None when it offers none. A plugin that does not import offers none:
    logged once with why, and the caller does without (nodes are polled)."""
    matches = [ep for ep in entry_points(group=group) if ep.name == driver]
    if not matches:
        return None
    try:
        return matches[0].load()
    except Exception as exc:  # any import-time failure of a plugin is the plugin's fault
        LOG.error("%s %r is installed but does not import (%s: %s): not used",
                  group, driver, type(exc).__name__, exc)  # fmt: skip
        return None
