"""What a node's bmaas driver learned about its BMC, recorded inside Ironic.

bmaas's own CLI keeps a driver's quirks (:class:`bmaas.driver.Quirk`) on the
node (``extra.bmc_quirks`` with a ``bmc_quirk`` event; :mod:`bmaas.quirks`)
and ``bmaas status check`` warns about a downgrade. Inside Ironic the same
facts are kept where Ironic keeps a driver's own facts, and told where an
operator of Ironic looks:

=========================  ==================================================
bmaas CLI                  inside Ironic (this module)
=========================  ==================================================
``extra.bmc_quirks``       ``driver_internal_info["bmaas_quirks"]``
                           (:data:`KEY`), written when the call holds the
                           node's exclusive lock (a power action, a
                           deploy's or an API call's read); Ironic's
                           periodic reads hold a shared lock, under which
                           the node is not saved, so there it waits for
                           the next such call
a ``bmc_quirk`` event      a node history entry (``baremetal node history
                           list``, event type ``monitoring``), at once,
                           under either lock
the driver's warning       the same warning in the conductor's log, and
                           one from here naming the node's UUID
=========================  ==================================================

A quirk is told once per node and conductor process (:class:`Told`, a
part of the conductor's runtime), and not at all once the node's
``driver_internal_info`` has it. Nothing here may fail the
call: the BMC's answer stands (a failure to record is logged at debug).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

from bmaas.quirks import warning

__all__ = ["KEY", "Told", "recorded", "report", "reported"]

LOG = logging.getLogger(__name__)

#: the node's ``driver_internal_info`` key that keeps its BMC's quirks
KEY = "bmaas_quirks"


class Told:
    """The (node UUID, quirk) pairs already told by this conductor process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._told: set[tuple[str, str]] = set()

    def first(self, uuid: str, quirks: list[str]) -> list[str]:
        """The ``quirks`` of ``uuid`` not told yet, now counted as told."""
        with self._lock:
            untold = [q for q in quirks if (uuid, q) not in self._told]
            self._told.update((uuid, q) for q in untold)
            return untold


def recorded(node: Any) -> set[str]:
    """The quirks the node's ``driver_internal_info`` keeps."""
    internal = getattr(node, "driver_internal_info", None) or {}
    found = internal.get(KEY) or ()
    return {str(q) for q in found} if isinstance(found, list | tuple) else set()


def report(told: Told, task: Any, driver: Any) -> None:
    """Record and tell what ``driver`` (the node's pooled bmaas driver, after
    a call) learned that the node does not have yet. Never raises."""
    try:
        _report(told, task, driver)
    except Exception:  # advisory: the call's own result stands
        LOG.debug("bmaas: could not record BMC quirks", exc_info=True)


@contextlib.contextmanager
def reported(told: Told, task: Any, driver: Any) -> Iterator[None]:
    """:func:`report` when the block ends, whether the call worked or not (a
    session downgraded at login whose request then failed is still one)."""
    try:
        yield
    finally:
        report(told, task, driver)


def _report(told: Told, task: Any, driver: Any) -> None:
    node = task.node
    learned = {str(q) for q in getattr(driver, "quirks", ())}
    known = recorded(node)
    new = sorted(learned - known)
    if not new:
        return
    uuid = str(getattr(node, "uuid", "") or getattr(node, "name", ""))
    untold = told.first(uuid, new)
    if getattr(task, "shared", False) is not True:
        # under a shared lock (Ironic's periodic read) the next exclusive call saves it
        internal = dict(node.driver_internal_info or {})
        internal[KEY] = sorted(known | learned)
        node.driver_internal_info = internal
        node.save()
    for quirk in untold:
        _tell(node, uuid, quirk)


def _tell(node: Any, uuid: str, quirk: str) -> None:
    told = warning(quirk)
    text = f"bmaas: BMC quirk {quirk}" + (f": {told}" if told else "")
    if told:
        LOG.warning("%s (node %s)", text, uuid)
    else:
        LOG.info("%s (node %s)", text, uuid)
    from ironic.conductor import utils as conductor_utils  # the conductor's own

    conductor_utils.node_history_record(node, event=text, event_type="monitoring")
