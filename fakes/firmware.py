"""Firmware updates on a simulated server (issue 51).

An update takes an image for one firmware component now and lands
``Hardware.firmware_update_time`` seconds later on the machine's clock: the
component then reads the image's version. The BMC's own firmware makes the
BMC reboot when it lands (down for ``Hardware.bmc_reboot_time``, as the
``bmc_reboot`` effect takes it down), so it comes back with the new version.
:class:`~bmaas.fakes.machine.FakeMachine` lands due updates whenever its state
is read; hwlab's Redfish ``SimpleUpdate`` and its tasks are made of these.

The update effects (issue 51) shape one update as it is taken:
``task_hang`` (its task runs for ever, nothing lands), ``update_rejected``
(the task ends ``Exception`` with the Update registry's
``VerificationFailed``, nothing lands), ``version_unchanged`` (it completes
and the component keeps its version), ``update_reboot`` (the BMC reboots as
it lands, ``duration`` seconds, and the task completes once it is back, with
the new version or, ``version=old``, the old one).
"""

from __future__ import annotations

import dataclasses
import math
import urllib.parse

__all__ = ["BMC_COMPONENT", "FirmwareUpdate", "image_version", "shaped"]

#: the component that is the BMC's own firmware
BMC_COMPONENT = "BMC"


@dataclasses.dataclass(frozen=True)
class FirmwareUpdate:
    """One update: ``number`` counts from 1 per machine; ``start``/``end`` on
    the machine's clock."""

    number: int
    target: str
    image: str
    version: str
    start: float
    end: float
    #: ``ok``, ``hang`` (never ends: ``end`` is infinite) or ``rejected``
    #: (ends ``Exception``, nothing lands)
    outcome: str = "ok"
    #: seconds the BMC is down from ``end`` (``update_reboot``): the task
    #: completes once it is back
    reboot: float = 0.0

    @property
    def lands(self) -> bool:
        """Whether the component takes the image's version at ``end``."""
        return self.outcome == "ok"

    @property
    def lands_nothing(self) -> bool:
        """Hung or rejected: no version, no BMC reboot, and the updates
        taken after it are not held up by it."""
        return self.outcome in ("hang", "rejected")

    def progress(self, now: float) -> tuple[str, int]:
        """(state, percent) at ``now``: ``New`` when taken, ``Running``,
        then ``Completed`` (``Exception`` when rejected) at ``end`` plus the
        BMC's reboot."""
        if now >= self.end + self.reboot:
            return ("Exception" if self.outcome == "rejected" else "Completed"), 100
        if now <= self.start:
            return "New", 0
        if math.isinf(self.end):
            return "Running", 50
        span = self.end + self.reboot - self.start
        return "Running", min(99, int(100 * (now - self.start) / span))


def shaped(update: FirmwareUpdate, effects: dict[str, dict[str, object]]) -> FirmwareUpdate:
    """``update`` as the update effects that fired on its request make it
    (``effects``: effect name -> its parameters)."""
    if "task_hang" in effects:
        return dataclasses.replace(update, outcome="hang", end=math.inf)
    if "update_rejected" in effects:
        return dataclasses.replace(update, outcome="rejected")
    reboot = effects.get("update_reboot")
    if reboot is not None:
        update = dataclasses.replace(update, reboot=float(str(reboot.get("duration", 2.0))))
        if reboot.get("version") == "old":
            update = dataclasses.replace(update, outcome="unchanged")
    if "version_unchanged" in effects:
        update = dataclasses.replace(update, outcome="unchanged")
    return update


def image_version(image: str, current: str | None) -> str:
    """The version an image installs: its URI's last path segment (the
    current version with ``.1`` appended when the URI names no file)."""
    leaf = urllib.parse.urlsplit(image).path.rpartition("/")[2]
    return urllib.parse.unquote(leaf) or f"{current or '0'}.1"
