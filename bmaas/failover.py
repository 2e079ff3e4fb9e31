"""Protocol failover for a BMC that speaks both IPMI and Redfish.

bmclib tries its providers in turn ("provider fallthrough"); neither Ironic
nor MAAS does. A :class:`FailoverDriver` holds two drivers of one node, the
first protocol and the other, and for power and boot-device operations only::

    first protocol ── ok ─────────────────────────────────> result
          │
          └─ fault ── policy: other protocol may cure it? ── no ──> the fault
                                    │
                                    yes ── other protocol, same deadline ──> result / its fault
                                                                             (noting the first)

Which faults the other protocol may cure is the policy table's "other
protocol" column (:data:`bmaas.policy.OTHER_PROTOCOL_MAY_CURE`: only faults
that say nothing happened, so a reset is never sent twice); both calls share
the caller's one :class:`~bmaas.deadline.Deadline`; each failover is
recorded (:attr:`FailoverDriver.history`, ``on_failover``). Off by default
(:func:`build_failover`, ``driver_factory(failover=True)``); the why of
each rule: docs/faults.md, "Protocol failover".
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from bmaas.deadline import Deadline
from bmaas.driver import (
    BiosSettings,
    BMCDriver,
    BMCInfo,
    BootDevice,
    BootSetting,
    Capability,
    FirmwareComponent,
    Inventory,
    Operation,
    PowerAction,
    PowerState,
)
from bmaas.faults import BMCFault
from bmaas.policy import policy_for

if TYPE_CHECKING:  # read, never built, here: no sealing, TLS or ssl for a command's options
    from bmaas.driver_info import DriverInfo

__all__ = ["FailoverDriver", "FailoverRecord", "build_failover", "protocols_in"]

LOG = logging.getLogger(__name__)
R = TypeVar("R")

#: the driver_info keys that say a protocol is configured (its address)
_ADDRESS_KEYS = {"ipmi": "ipmi_address", "redfish": "redfish_address"}


@dataclasses.dataclass(frozen=True)
class FailoverRecord:
    """One failover: which operation left which protocol for which, why, and
    how it ended (``ok`` or the other protocol's fault code)."""

    node: str
    operation: str
    first: str
    other: str
    fault_code: str
    outcome: str


class FailoverDriver(BMCDriver):
    """Two drivers of one node; power and boot-device calls fall through from
    the first to the other when the policy says the other may cure the fault."""

    name: ClassVar[str] = "failover"

    def __init__(
        self,
        first: BMCDriver,
        other: BMCDriver,
        *,
        on_failover: Callable[[FailoverRecord], None] | None = None,
    ) -> None:
        super().__init__(first.node, first.info, bmc_timeout=first.bmc_timeout, clock=first.clock)
        self.first = first
        self.other = other
        self.on_failover = on_failover
        #: every failover this driver made, oldest first
        self.history: list[FailoverRecord] = []

    @property
    def capabilities(self) -> frozenset[Capability]:  # type: ignore[override]
        return self.first.capabilities

    @property
    def address(self) -> str:
        return self.first.address

    def _fall_through(
        self, operation: Operation, call: Callable[[BMCDriver], R], deadline: Deadline
    ) -> R:
        bound = self._deadline(deadline)
        try:
            return call(self.first)
        except BMCFault as fault:
            if not policy_for(fault).other_protocol_may_cure or bound.expired:
                raise
            first_fault = fault
        LOG.warning(
            "%s: %s over %s failed (%s); trying %s",
            self.node,
            operation,
            self.first.name,
            first_fault.code,
            self.other.name,
        )
        try:
            result = call(self.other)
        except BMCFault as fault:
            self._record(operation, first_fault, fault.code)
            fault.add_note(f"after failing over from {self.first.name}: {first_fault}")
            raise
        self._record(operation, first_fault, "ok")
        return result

    def _record(self, operation: Operation, fault: BMCFault, outcome: str) -> None:
        record = FailoverRecord(
            self.node, str(operation), self.first.name, self.other.name, fault.code, outcome
        )
        self.history.append(record)
        if self.on_failover is not None:
            self.on_failover(record)

    # -- power and boot device: may fall through ------------------------------------

    def get_power_state(self, *, deadline: Deadline) -> PowerState:
        bound = self._deadline(deadline)
        return self._fall_through(
            Operation.POWER_GET, lambda d: d.get_power_state(deadline=bound), bound
        )

    def request_power(self, action: PowerAction, *, deadline: Deadline) -> None:
        bound = self._deadline(deadline)
        self._fall_through(
            Operation.POWER_SET, lambda d: d.request_power(action, deadline=bound), bound
        )

    def get_boot_device(self, *, deadline: Deadline) -> BootSetting:
        bound = self._deadline(deadline)
        return self._fall_through(
            Operation.BOOT_GET, lambda d: d.get_boot_device(deadline=bound), bound
        )

    def set_boot_device(
        self, device: BootDevice, *, persistent: bool = False, deadline: Deadline
    ) -> None:
        bound = self._deadline(deadline)
        self._fall_through(
            Operation.BOOT_SET,
            lambda d: d.set_boot_device(device, persistent=persistent, deadline=bound),
            bound,
        )

    # -- the rest: the first protocol only ------------------------------------------

    def probe(self, *, deadline: Deadline) -> BMCInfo:
        return self.first.probe(deadline=self._deadline(deadline))

    def insert_virtual_media(self, url: str, *, deadline: Deadline) -> None:
        self.first.insert_virtual_media(url, deadline=self._deadline(deadline))

    def eject_virtual_media(
        self, *, deadline: Deadline, url: str | None = None, force: bool = False
    ) -> None:
        self.first.eject_virtual_media(deadline=self._deadline(deadline), url=url, force=force)

    def get_inventory(self, *, deadline: Deadline, detail: bool = False) -> Inventory:
        return self.first.get_inventory(deadline=self._deadline(deadline), detail=detail)

    def get_firmware_inventory(self, *, deadline: Deadline) -> list[FirmwareComponent]:
        return self.first.get_firmware_inventory(deadline=self._deadline(deadline))

    def get_bios(self, *, deadline: Deadline) -> BiosSettings:
        return self.first.get_bios(deadline=self._deadline(deadline))

    def set_bios(
        self, changes: Mapping[str, Any], *, deadline: Deadline, apply_time: str = "OnReset"
    ) -> dict[str, Any]:
        return self.first.set_bios(
            changes, deadline=self._deadline(deadline), apply_time=apply_time
        )

    def get_boot_progress(self, *, deadline: Deadline) -> str | None:
        return self.first.get_boot_progress(deadline=self._deadline(deadline))

    def session_alive(self) -> bool:
        return self.first.session_alive()

    def close(self) -> None:
        try:
            self.first.close()
        finally:
            self.other.close()


def protocols_in(driver_info: Mapping[str, Any] | DriverInfo) -> list[str]:
    """The protocols ``driver_info`` configures (those whose address it has)."""
    get = (
        driver_info.get
        if isinstance(driver_info, Mapping)
        else lambda key: getattr(driver_info, key, None)
    )
    return [protocol for protocol, key in _ADDRESS_KEYS.items() if get(key)]


def build_failover(
    node: str,
    driver: str,
    driver_info: Mapping[str, Any] | DriverInfo,
    *,
    build: Callable[..., BMCDriver],
    on_failover: Callable[[FailoverRecord], None] | None = None,
    **options: Any,
) -> BMCDriver:
    """The node's ``driver``, falling through to its other protocol when
    ``driver_info`` configures both; else just ``driver``. ``build`` is
    :func:`bmaas.registry.build_driver` (passed in: no import cycle)."""
    first = build(node, driver, driver_info, **options)
    others = [p for p in protocols_in(driver_info) if p != driver]
    if driver not in _ADDRESS_KEYS or not others:
        return first
    other = build(node, others[0], driver_info, **options)
    return FailoverDriver(first, other, on_failover=on_failover)
