"""One bmaas driver per node per conductor: sessions reused across calls.

:func:`driver_for` is the one place the Ironic interfaces get a driver, so a
shared driver pool (one session per BMC, dropped when it misses an answer)
can replace this cache without touching the interfaces. Meanwhile:

* the cache is keyed by node UUID and remembers a fingerprint of what the
  driver was built from (protocol, name, driver_info, call deadline): an
  operator who edits ``driver_info`` gets a new driver, and the old one is
  closed (its IPMI session logged out);
* :func:`forget` drops a node's driver after a fault that means its session
  missed an answer (timeout, unreachable), so the next call logs in afresh;
* at most one driver, hence one session, per node: pyghmi watches every
  session's socket with ``select()``, which cannot go past ~1000 descriptors
  in one process, so a conductor with many IPMI nodes must not open more
  than one per BMC. Each bmaas IPMI driver also serialises its own calls.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading

from bmaas.driver import BMCDriver
from bmaas.driver_info import DriverInfo
from bmaas.registry import build_driver

__all__ = ["clear", "driver_for", "forget", "size"]

LOG = logging.getLogger(__name__)

_LOCK = threading.Lock()
_DRIVERS: dict[str, tuple[str, BMCDriver]] = {}


def _fingerprint(protocol: str, label: str, info: DriverInfo, call_deadline: float) -> str:
    # Passwords take part (a new password needs a new login) but only as a digest.
    blob = json.dumps(
        [protocol, label, info.to_dict(reveal=True), call_deadline], sort_keys=True, default=str
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def driver_for(
    uuid: str, label: str, protocol: str, info: DriverInfo, *, call_deadline: float
) -> BMCDriver:
    """The node's driver, built on first use or when what it is built from changed."""
    fingerprint = _fingerprint(protocol, label, info, call_deadline)
    stale: BMCDriver | None = None
    with _LOCK:
        cached = _DRIVERS.get(uuid)
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
        if cached is not None:
            stale = cached[1]
        driver = build_driver(label, protocol, info, deadline=call_deadline)
        _DRIVERS[uuid] = (fingerprint, driver)
    if stale is not None:
        _close(stale)
    return driver


def forget(uuid: str) -> None:
    """Drop (and close) the node's driver: its session missed an answer."""
    with _LOCK:
        cached = _DRIVERS.pop(uuid, None)
    if cached is not None:
        _close(cached[1])


def clear() -> None:
    """Close every driver (tests; conductor shutdown)."""
    with _LOCK:
        drivers = [d for _, d in _DRIVERS.values()]
        _DRIVERS.clear()
    for driver in drivers:
        _close(driver)


def size() -> int:
    return len(_DRIVERS)


def _close(driver: BMCDriver) -> None:
    try:
        driver.close()
    except Exception:  # closing is best effort: the session may be gone already
        LOG.debug("closing %r failed", driver, exc_info=True)
