"""What a failed attempt leaves on a node, and cleaning it before the node
is offered again (issue 49).

A deploy inserts the deploy image, sets a boot override to it and powers the
node on. When the attempt fails, the embedded backend undoes that (power off,
eject, boot from disk) -- unless the BMC is the problem (a hang ended in
``BMCTimeout``: the policy table's ``off`` column says no) or the undo itself
fails. Then the node would boot the deploy image at its next power-on::

    attempt fails after step S
          │
          ▼
    what_was_left(S)           media, boot override, power, by the steps started
          │
          ▼
    undo_leftovers()           one bounded call each: power off, eject, disk
          ├── ok ──────────▶   nothing recorded
          └── fault / skipped  store.health.set_leftovers: "needs cleaning";
                               never a candidate, never claimed
          ▼
    clean_leftovers()          every command that reclaims (a provisioner
                               starting, each `bmaas sync` pass): the BMC
          ├── answers ─────▶   power off, eject what bmaas inserted, boot
          │                    from disk; leftovers cleared: offered again
          └── still silent ──▶ kept, tried again next time (not fenced: the
                               node is not broken, its BMC did not answer)
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bmaas.deadline import Deadline
from bmaas.deploy import Step
from bmaas.driver import BMCDriver, BootDevice, Capability, PowerAction
from bmaas.faults import BmaasError, UnsupportedOperation
from bmaas.runtime import node_driver
from bmaas.store.records import leftover_text

if TYPE_CHECKING:  # the caller's store: importing it here would load SQLAlchemy
    from bmaas.runtime import Runtime
    from bmaas.store import Store

__all__ = ["Leftovers", "Started", "clean_leftovers", "undo_leftovers", "what_was_left"]

LOG = logging.getLogger(__name__)

#: the steps after which the node may hold the deploy's boot override
#: (and its media), and after which it may be on
_BOOT_SET = (Step.BOOT_DEVICE, Step.POWER, Step.SETTLE, Step.READY, Step.FINALIZE)
_POWERED = (Step.POWER, Step.SETTLE, Step.READY, Step.FINALIZE)


@dataclasses.dataclass
class Started:
    """What one attempt's deploy set out to leave on its node: the media it
    inserts (None: it boots ``device`` instead, as the deploy's boot-device
    step chooses) and the steps started so far."""

    media: str | None
    device: BootDevice
    steps: list[Step] = dataclasses.field(default_factory=list)

    @classmethod
    def of(cls, driver: BMCDriver, image_url: str | None) -> Started:
        """The deploy's choice (:meth:`bmaas.deploy._Deploy.boot_device`):
        virtual media where there is an image and the BMC has it, else the
        node's ``deploy_boot_device`` (PXE by default)."""
        if image_url and driver.supports(Capability.VIRTUAL_MEDIA):
            return cls(image_url, BootDevice.CDROM)
        return cls(None, BootDevice(driver.info.deploy_boot_device or BootDevice.PXE))


def what_was_left(started: Started | None) -> dict[str, str]:
    """What a deploy that started ``started.steps`` may have left on the node:
    ``{"media": url, "boot override": "cdrom", "power": "on"}`` (only what
    applies; empty when it stopped before touching the node)."""
    left: dict[str, str] = {}
    if started is None:
        return left
    if any(s in _BOOT_SET for s in started.steps):
        if started.media:
            left["media"] = started.media
        left["boot override"] = str(started.device)
    if any(s in _POWERED for s in started.steps):
        left["power"] = "on"
    return left


def undo_leftovers(
    driver: BMCDriver, left: Mapping[str, str], *, deadline: Deadline
) -> dict[str, str]:
    """Undo ``left`` on the node: power off, eject the media bmaas inserted
    (by its URL, never another tool's), boot from disk; one bounded call
    each, within ``deadline``. Returns what is still left: from the first
    call that failed on (a BMC that did not answer is not asked again).
    What the BMC cannot do at all (``UnsupportedOperation``: an eject on
    IPMI) bmaas cannot have left there: counted as undone."""
    todo = dict(left)
    if not todo:
        return todo
    actions: list[tuple[str, Callable[[], None]]] = [
        (
            "power",
            lambda: driver.request_power(PowerAction.OFF, deadline=driver.call_deadline(deadline)),
        ),
        (
            "media",
            lambda: driver.eject_virtual_media(
                deadline=driver.call_deadline(deadline), url=todo["media"]
            ),
        ),
        (
            "boot override",
            lambda: driver.set_boot_device(
                BootDevice.DISK, persistent=True, deadline=driver.call_deadline(deadline)
            ),
        ),
    ]
    for key, act in actions:
        if key not in todo:
            continue
        if deadline.expired:
            LOG.info("%s: no time left to undo %s", driver.node, leftover_text(todo))
            return todo
        try:
            act()
        except UnsupportedOperation as exc:
            # a BMC without it (IPMI has no virtual media): bmaas cannot have
            # left that there, as undeploy_node judges an eject it cannot do
            LOG.info("%s: %s not undone, not supported here: %s", driver.node, key, exc)
        except BmaasError as exc:
            LOG.info("%s: could not undo %s: %s", driver.node, leftover_text(todo), exc)
            return todo
        del todo[key]
    return todo


@dataclasses.dataclass(frozen=True)
class Leftovers:
    """What a cleaning pass did: nodes cleaned, nodes still waiting (and why)."""

    cleaned: tuple[str, ...] = ()
    waiting: tuple[tuple[str, str], ...] = ()


def clean_leftovers(
    store: Store,
    rt: Runtime | None,
    *,
    driver_factory: Callable[[Any], BMCDriver],
    deadline: Deadline,
    nodes: Sequence[str] | None = None,
) -> Leftovers:
    """Clean every node a failed attempt left something on (or those of
    ``nodes``): its BMC asked once per step, each call bounded by the
    driver's own timeout and ``deadline``. A node cleaned is offered again;
    one whose BMC still does not answer keeps its leftovers (tried again by
    the next command or sync pass), the fault as its last error. ``rt``:
    the host's runtime, whose pool holds the drivers
    (:func:`~bmaas.runtime.node_driver`)."""
    cleaned: list[str] = []
    waiting: list[tuple[str, str]] = []
    for record in store.nodes.find(nodes, needs_cleaning=True):
        left = dict(record.leftovers or {})
        try:
            with node_driver(rt, record, driver_factory, deadline=deadline) as driver:
                rest = undo_leftovers(driver, left, deadline=deadline)
        except BmaasError as exc:  # no driver, or no turn at its BMC by the deadline
            waiting.append((record.name, str(exc)))
            continue
        if rest:
            why = f"still left on the node: {leftover_text(rest)} (its BMC did not answer)"
            waiting.append((record.name, why))
            continue
        if store.health.clear_leftovers(
            record.name, done=f"cleaned what a failed attempt left: {leftover_text(left)}"
        ):
            LOG.warning(
                "%s: cleaned what a failed attempt left: %s", record.name, leftover_text(left)
            )
            cleaned.append(record.name)
    return Leftovers(tuple(cleaned), tuple(waiting))
