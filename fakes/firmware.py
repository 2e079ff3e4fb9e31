"""Firmware updates on a simulated server (issue 51).

An update takes an image for one firmware component now and lands
``Hardware.firmware_update_time`` seconds later on the machine's clock: the
component then reads the image's version. The BMC's own firmware makes the
BMC reboot when it lands (down for ``Hardware.bmc_reboot_time``, as the
``bmc_reboot`` effect takes it down), so it comes back with the new version.
:class:`~bmaas.fakes.machine.FakeMachine` lands due updates whenever its state
is read; hwlab's Redfish ``SimpleUpdate`` and its tasks are made of these.
"""

from __future__ import annotations

import dataclasses
import urllib.parse

__all__ = ["BMC_COMPONENT", "FirmwareUpdate", "image_version"]

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

    def progress(self, now: float) -> tuple[str, int]:
        """(state, percent) at ``now``: ``New`` when taken, ``Running``,
        then ``Completed`` at ``end``."""
        if now >= self.end:
            return "Completed", 100
        if now <= self.start:
            return "New", 0
        return "Running", min(99, int(100 * (now - self.start) / (self.end - self.start)))


def image_version(image: str, current: str | None) -> str:
    """The version an image installs: its URI's last path segment (the
    current version with ``.1`` appended when the URI names no file)."""
    leaf = urllib.parse.urlsplit(image).path.rpartition("/")[2]
    return urllib.parse.unquote(leaf) or f"{current or '0'}.1"
