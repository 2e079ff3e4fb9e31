"""An in-process driver over a :class:`~fakes.machine.FakeMachine`.

The retry and provisioning layers are unit-tested against this driver, so it
raises exactly the typed fault a real driver raises for the same misbehaviour,
and it never sleeps for real: a ``hang`` advances the injected clock by the
call's deadline and raises ``BMCTimeout``, as the IPMI driver does after its
deadline on a real clock.

``wire_calls`` lists every request that "went on the wire", so tests can
assert how many calls a policy made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from bmaas.driver import (
    DEFAULT_DEADLINE,
    BMCDriver,
    BMCInfo,
    BootDevice,
    BootSetting,
    Capability,
    Inventory,
    Operation,
    PowerAction,
    PowerState,
)
from bmaas.driver_info import DriverInfo
from bmaas.faults import (
    BMCAuthError,
    BMCBusy,
    BMCInternalError,
    BMCProtocolError,
    BMCTimeout,
    BMCUnreachable,
    BootFailure,
    UnsupportedOperation,
)
from fakes.faults import Effect, Firing, Layer
from fakes.fleet import DEFAULT_FLEET, FakeFleet
from fakes.machine import FakeMachine

__all__ = ["FakeDriver"]

T = TypeVar("T")

# What each BMC-layer effect looks like to a client: fault class and message.
_BMC_FAULTS: dict[Effect, tuple[type[Any], str]] = {
    Effect.AUTH_FAIL: (BMCAuthError, "login rejected"),
    Effect.INTERNAL_ERROR: (BMCInternalError, "the BMC reported an internal error"),
    Effect.MALFORMED_REPLY: (BMCProtocolError, "reply could not be decoded"),
    Effect.UNSUPPORTED: (UnsupportedOperation, "the BMC does not support this command"),
}


class FakeDriver(BMCDriver):
    """A complete driver for simulated machines. Every capability is offered."""

    name = "fake"
    capabilities = frozenset(Capability)
    required_info = ()
    accepted_info = frozenset({"fake_machine"})

    def __init__(
        self,
        node: str,
        info: DriverInfo | None = None,
        *,
        deadline: float = DEFAULT_DEADLINE,
        machine: FakeMachine | None = None,
        fleet: FakeFleet | None = None,
        **kw: Any,
    ) -> None:
        info = info or DriverInfo()
        if machine is None:
            fleet = fleet or DEFAULT_FLEET
            machine = fleet.machine(info.fake_machine or node)
            kw.setdefault("clock", fleet.clock.monotonic)
            kw.setdefault("sleep", fleet.clock.sleep)
        super().__init__(node, info, deadline=deadline, **kw)
        self.machine = machine
        #: every operation sent "on the wire", in order
        self.wire_calls: list[str] = []
        # A simulated session: the first call logs in (``logins``), close() ends it.
        self._session = False

    @property
    def address(self) -> str:
        return f"fake://{self.machine.name}"

    # -- the one place effects become faults ----------------------------------

    def _call(
        self,
        operation: Operation,
        deadline: float | None,
        act: Callable[[list[Firing]], T],
    ) -> T:
        limit = self._deadline(deadline)
        start = self._clock()
        self.wire_calls.append(str(operation))

        def elapsed() -> float:
            return self._clock() - start

        if self.machine.bmc_down():
            self._sleep(min(limit, 0.01))  # a refused connection answers quickly
            raise self.fault(
                BMCUnreachable, "connection refused", operation=operation, elapsed=elapsed()
            )
        if not self._session:
            self.logins += 1
            self._session = True
        firings = self.machine.plan.evaluate(str(operation), protocol="fake")
        hardware = [f for f in firings if f.layer is Layer.HARDWARE]
        for firing in firings:
            effect, params = firing.effect, firing.params
            if effect in (Effect.HANG, Effect.DROP):
                # The request never reached the BMC's logic: nothing happened.
                self._sleep(limit)
                raise self._timeout(operation, limit, elapsed())
            if effect is Effect.DELAY and params["seconds"] >= limit:
                # The BMC acts, but its answer comes after we stopped waiting:
                # the caller cannot tell whether anything happened.
                self._sleep(limit)
                act(hardware)
                raise self._timeout(operation, limit, elapsed())
            if effect is Effect.DUPLICATE:
                # The request reached the BMC more than once (a retransmitting
                # middlebox): the BMC acted on every copy, the client saw one answer.
                for _ in range(params["copies"]):
                    self.wire_calls.append(str(operation))
                    act(hardware)
            elif effect is Effect.DELAY:
                self._sleep(params["seconds"])
            elif effect is Effect.BMC_REBOOT:
                self.machine.reboot_bmc(params["duration"])
                raise self.fault(
                    BMCUnreachable, "BMC is rebooting", operation=operation, elapsed=elapsed()
                )
            elif effect is Effect.BUSY:
                raise self.fault(
                    BMCBusy,
                    "node busy",
                    operation=operation,
                    elapsed=elapsed(),
                    retry_after=params.get("retry_after"),
                    status="0xC0",
                )
            elif effect is Effect.AUTH_FAIL and params.get("scope") == "session":
                self.logins += 1  # a real driver logs in again once, transparently
                continue
            elif effect in _BMC_FAULTS:
                cls, message = _BMC_FAULTS[effect]
                extra = {"message_id": params["message_id"]} if cls is BMCInternalError else {}
                raise self.fault(cls, message, operation=operation, elapsed=elapsed(), **extra)
        return act(hardware)

    def _timeout(self, operation: Operation, limit: float, elapsed: float) -> BMCTimeout:
        message = f"no answer within {limit:g}s"
        fault = self.fault(BMCTimeout, message, operation=operation, elapsed=elapsed)
        assert isinstance(fault, BMCTimeout)
        return fault

    def session_alive(self) -> bool:
        return self._session

    def close(self) -> None:
        self._session = False

    # -- contract ------------------------------------------------------------

    def probe(self, *, deadline: float | None = None) -> BMCInfo:
        def act(hw: list[Firing]) -> BMCInfo:
            self.machine.apply(hw)
            return BMCInfo(
                power_state=self.machine.power_state(),
                manufacturer=self.machine.hardware.vendor,
                firmware_version="fake-1.0",
            )

        return self._call(Operation.PROBE, deadline, act)

    def get_power_state(self, *, deadline: float | None = None) -> PowerState:
        def act(hw: list[Firing]) -> PowerState:
            self.machine.apply(hw)
            return self.machine.power_state()

        return self._call(Operation.POWER_GET, deadline, act)

    def request_power(self, action: PowerAction, *, deadline: float | None = None) -> None:
        self._call(Operation.POWER_SET, deadline, lambda hw: self.machine.set_power(action, hw))

    def get_boot_device(self, *, deadline: float | None = None) -> BootSetting:
        return self._call(Operation.BOOT_GET, deadline, lambda hw: self.machine.boot_device())

    def set_boot_device(
        self, device: BootDevice, *, persistent: bool = False, deadline: float | None = None
    ) -> None:
        start = self._clock()
        self._call(
            Operation.BOOT_SET,
            deadline,
            lambda hw: self.machine.set_boot_device(device, persistent=persistent, firings=hw),
        )
        applied = self.machine.boot_device()
        if applied != BootSetting(device, persistent):
            raise self.fault(
                BootFailure,
                f"asked for {device} (persistent={persistent}), BMC reads back "
                f"{applied.device} (persistent={applied.persistent})",
                operation=Operation.BOOT_SET,
                elapsed=self._clock() - start,
            )

    def insert_virtual_media(self, url: str, *, deadline: float | None = None) -> None:
        self._call(Operation.VMEDIA_INSERT, deadline, lambda hw: self.machine.insert_media(url))

    def eject_virtual_media(self, *, deadline: float | None = None) -> None:
        self._call(Operation.VMEDIA_EJECT, deadline, lambda hw: self.machine.eject_media())

    def get_inventory(self, *, deadline: float | None = None) -> Inventory:
        return self._call(
            Operation.INVENTORY_GET, deadline, lambda hw: Inventory(**self.machine.inventory())
        )

    def get_boot_progress(self, *, deadline: float | None = None) -> str | None:
        return self._call(
            Operation.BOOT_PROGRESS_GET, deadline, lambda hw: self.machine.boot_progress()
        )
