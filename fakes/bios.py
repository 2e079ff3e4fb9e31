"""A simulated BIOS: current and pending attributes, a registry, and what a
reset applies.

A change is staged (pending) and applied by the machine's next boot
(:meth:`~bmaas.fakes.machine.FakeMachine` calls :meth:`FakeBios.boot`), as a
real BIOS applies a Redfish settings object at the next POST. ``applies``
says how much of it a boot applies, so tests reproduce the field's
failures: ``all``, ``partly`` (the attributes in ``sticky``, or the first
pending one, stay pending) or ``never`` (everything stays pending).
"""

from __future__ import annotations

import threading
from typing import Any

from bmaas.hardware import AttributeInfo, BiosSettings

__all__ = ["APPLIES", "DEFAULT_BIOS", "DEFAULT_REGISTRY", "FakeBios"]

#: how much of the pending settings a boot applies
APPLIES = ("all", "partly", "never")

#: the attributes of a simulated BIOS, with the registry the BMC publishes
DEFAULT_REGISTRY: dict[str, AttributeInfo] = {
    "BootMode": AttributeInfo("Enumeration", ("Uefi", "LegacyBios")),
    "ProcTurboMode": AttributeInfo("Enumeration", ("Enabled", "Disabled")),
    "ProcHyperthreading": AttributeInfo("Enumeration", ("Enabled", "Disabled")),
    "ProcCoreDisable": AttributeInfo("Integer", lower=0, upper=7),
    "SriovEnable": AttributeInfo("Boolean"),
    "AdminPhone": AttributeInfo("String", max_length=20),
    "SystemModelName": AttributeInfo("String", read_only=True),
    "AdminPassword": AttributeInfo("Password", max_length=32),
}
DEFAULT_BIOS: dict[str, Any] = {
    "BootMode": "Uefi",
    "ProcTurboMode": "Enabled",
    "ProcHyperthreading": "Enabled",
    "ProcCoreDisable": 0,
    "SriovEnable": False,
    "AdminPhone": "",
    "SystemModelName": "FakeServer 1U",
    "AdminPassword": "",
}


class FakeBios:
    """One machine's BIOS settings. Thread-safe."""

    def __init__(
        self,
        current: dict[str, Any] | None = None,
        registry: dict[str, AttributeInfo] | None = DEFAULT_REGISTRY,
    ) -> None:
        self._lock = threading.Lock()
        self.current = dict(DEFAULT_BIOS if current is None else current)
        self.pending: dict[str, Any] = {}
        #: the registry the BMC publishes (None: it publishes none)
        self.registry = None if registry is None else dict(registry)
        #: how much of the pending settings the next boot applies (APPLIES)
        self.applies = "all"
        #: the attributes a partial apply leaves pending (empty: the first one)
        self.sticky: set[str] = set()
        #: how much the next boot alone applies (the ``bios_pending`` and
        #: ``bios_partial`` effects), then ``applies`` again (None: ``applies``)
        self.next_boot: str | None = None

    def settings(self) -> BiosSettings:
        with self._lock:
            pending = {k: v for k, v in self.pending.items() if self.current.get(k) != v}
            registry = None if self.registry is None else dict(self.registry)
            return BiosSettings(dict(self.current), pending, registry, ("OnReset", "Immediate"))

    def stage(self, changes: dict[str, Any], *, immediate: bool = False) -> None:
        """Take ``changes``: pending until the next boot, or at once."""
        with self._lock:
            if immediate:
                self.current.update(changes)
                for name in changes:
                    self.pending.pop(name, None)
            else:
                self.pending.update(changes)

    def hold(self, applies: str) -> None:
        """The next boot applies ``applies`` (one of :data:`APPLIES`) of what is pending."""
        if applies not in APPLIES:
            raise ValueError(f"applies must be one of {', '.join(APPLIES)}, not {applies!r}")
        with self._lock:
            self.next_boot = applies

    def boot(self) -> None:
        """The machine boots: apply the pending settings as ``applies`` says."""
        with self._lock:
            applies, self.next_boot = self.next_boot or self.applies, None
            if applies == "never" or not self.pending:
                return
            kept: set[str] = set()
            if applies == "partly":
                kept = (self.sticky & set(self.pending)) or {next(iter(self.pending))}
            for name, value in list(self.pending.items()):
                if name not in kept:
                    self.current[name] = value
                    del self.pending[name]
