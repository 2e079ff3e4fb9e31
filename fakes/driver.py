"""An in-process driver over a :class:`~bmaas.fakes.machine.FakeMachine`.

The retry and provisioning layers are unit-tested against this driver, so it
raises exactly the typed fault a real driver raises for the same misbehaviour,
and it never sleeps for real: a ``hang`` advances the injected clock by the
time left until the call's deadline and raises ``BMCTimeout``, as the IPMI
driver does at its deadline on a real clock.

``wire_calls`` lists every request that "went on the wire", so tests can
assert how many calls a policy made.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from bmaas.deadline import Deadline
from bmaas.driver import (
    DEFAULT_BMC_TIMEOUT,
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
from bmaas.fakes.effects import EFFECTS, Action, Effect, decide, incident_of, trickle_seconds
from bmaas.fakes.faults import Firing
from bmaas.fakes.fleet import DEFAULT_FLEET, FakeFleet
from bmaas.fakes.machine import FakeMachine
from bmaas.faults import (
    BMCBusy,
    BMCFault,
    BMCInternalError,
    BMCTimeout,
    BMCUnreachable,
    BootFailure,
    InputError,
    RequestRejected,
)
from bmaas.hardware import (
    BiosSettings,
    FirmwareComponent,
    TaskStatus,
    UpdateTask,
    check_bios_changes,
)

__all__ = ["FakeDriver"]

T = TypeVar("T")

#: the size of an answer, for a trickled one's time (a small Redfish resource)
NOMINAL_ANSWER_BYTES = 2048


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
        bmc_timeout: float = DEFAULT_BMC_TIMEOUT,
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
        super().__init__(node, info, bmc_timeout=bmc_timeout, **kw)
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
        deadline: Deadline,
        act: Callable[[list[Firing]], T],
    ) -> T:
        limit = self._deadline(deadline).left()
        start = self._clock()
        if limit <= 0:
            raise self.too_late(operation, start)
        self.wire_calls.append(str(operation))

        def elapsed() -> float:
            return self._clock() - start

        self._connect(operation, limit, elapsed)
        action = decide(self.machine.plan.evaluate(str(operation), protocol="fake"))
        self._arrive(operation, action, limit, elapsed, act)
        self._refuse(operation, action, elapsed)
        # A duplicated request reached the BMC more than once (a retransmitting
        # middlebox): the BMC acted on every copy, the client saw one answer.
        for _ in range(action.copies):
            self.wire_calls.append(str(operation))
            act(action.hardware)
        return act(action.hardware)

    def _connect(self, operation: Operation, limit: float, elapsed: Callable[[], float]) -> None:
        """A BMC that is down refuses the connection; the first call logs in."""
        if self.machine.bmc_down():
            self._sleep(min(limit, 0.01))  # a refused connection answers quickly
            raise self.fault(
                BMCUnreachable, "connection refused", operation=operation, elapsed=elapsed()
            )
        if not self._session:
            self.logins += 1
            self._session = True

    def _arrive(
        self,
        operation: Operation,
        action: Action,
        limit: float,
        elapsed: Callable[[], float],
        act: Callable[[list[Firing]], object],
    ) -> None:
        """The request on its way: a BMC rebooting, silent, or answering
        after ``limit`` (a timeout, the hardware acted or not); else the
        answer's own delay, slept."""
        if action.reboot is not None:
            self.machine.reboot_bmc(action.reboot)
            raise self.fault(
                BMCUnreachable, "BMC is rebooting", operation=operation, elapsed=elapsed()
            )
        if action.silent is not None:
            # The request never reached the BMC's logic: nothing happened.
            self._sleep(limit)
            raise self._timeout(operation, limit, elapsed())
        late = action.delay
        if action.trickle is not None:
            late += trickle_seconds(NOMINAL_ANSWER_BYTES, action.trickle)
        if late >= limit:
            # The BMC acts, but its answer comes after we stopped waiting:
            # the caller cannot tell whether anything happened.
            self._sleep(limit)
            if action.answer is None:
                act(action.hardware)
            raise self._timeout(operation, limit, elapsed())
        if late:
            self._sleep(late)

    def _refuse(self, operation: Operation, action: Action, elapsed: Callable[[], float]) -> None:
        """The BMC's answer, when it is a fault (an expired session is
        logged into again, transparently; "already there" is a success)."""
        answer = action.answer
        incident = incident_of(answer) if answer is not None else None
        if incident is not None and incident.fault is None:
            answer = None  # "already there": the BMC acted, a real driver re-reads: success
        if answer is not None:
            if answer.effect is Effect.AUTH_FAIL and answer.params.get("scope") == "session":
                self.logins += 1  # an expired session: a real driver logs in again, transparently
            else:
                raise self._answer_fault(operation, answer, elapsed())
        if action.corrupt:
            fault = EFFECTS[Effect.MALFORMED_REPLY].fault
            assert fault is not None
            raise self.fault(
                fault, "reply could not be decoded", operation=operation, elapsed=elapsed()
            )

    def _answer_fault(self, operation: Operation, answer: Firing, elapsed: float) -> BMCFault:
        """The fault a BMC-layer answer is, as the real drivers raise it."""
        incident = incident_of(answer)
        cls = incident.fault if incident is not None else EFFECTS[answer.effect].fault
        assert cls is not None
        params = answer.params
        extra: dict[str, Any] = {}
        if cls is BMCBusy:
            extra = {"retry_after": params.get("retry_after"), "status": "0xC0"}
        elif cls is BMCInternalError:
            extra = {"message_id": params["message_id"]}
        message = EFFECTS[answer.effect].says
        if incident is not None:
            message = f"{incident.summary} ({incident.name})"
            status = incident.redfish.status if incident.redfish else incident.ipmi_code
            extra["status"] = str(status) if status is not None else None
        return self.fault(cls, message, operation=operation, elapsed=elapsed, **extra)

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

    def probe(self, *, deadline: Deadline) -> BMCInfo:
        def act(hw: list[Firing]) -> BMCInfo:
            self.machine.apply(hw)
            return BMCInfo(
                power_state=self.machine.power_state(),
                manufacturer=self.machine.hardware.vendor,
                firmware_version="fake-1.0",
            )

        return self._call(Operation.PROBE, deadline, act)

    def get_power_state(self, *, deadline: Deadline) -> PowerState:
        def act(hw: list[Firing]) -> PowerState:
            self.machine.apply(hw)
            return self.machine.power_state()

        return self._call(Operation.POWER_GET, deadline, act)

    def request_power(self, action: PowerAction, *, deadline: Deadline) -> None:
        self._call(Operation.POWER_SET, deadline, lambda hw: self.machine.set_power(action, hw))

    def get_boot_device(self, *, deadline: Deadline) -> BootSetting:
        return self._call(Operation.BOOT_GET, deadline, lambda hw: self.machine.boot_device())

    def set_boot_device(
        self, device: BootDevice, *, persistent: bool = False, deadline: Deadline
    ) -> None:
        start = self._clock()
        self._call(
            Operation.BOOT_SET,
            deadline,
            lambda hw: self.machine.set_boot_device(device, persistent=persistent, firings=hw),
        )
        try:
            self.check_boot_readback(BootSetting(device, persistent), self.machine.boot_device())
        except BootFailure as fault:
            fault.elapsed = self._clock() - start
            raise

    def insert_virtual_media(self, url: str, *, deadline: Deadline) -> None:
        self._call(Operation.VMEDIA_INSERT, deadline, lambda hw: self.machine.insert_media(url))

    def eject_virtual_media(
        self, *, deadline: Deadline, url: str | None = None, force: bool = False
    ) -> None:
        """The simulated slot holds only what bmaas inserted; a named ``url``
        that is not the one it holds leaves it as it is."""

        def eject(hw: Any) -> None:
            if force or url is None or self.machine.media == url:
                self.machine.eject_media()

        self._call(Operation.VMEDIA_EJECT, deadline, eject)

    def get_inventory(self, *, deadline: Deadline, detail: bool = False) -> Inventory:
        def act(hw: Any) -> Inventory:
            parts = self.machine.parts() if detail else {}
            return Inventory(**self.machine.inventory(), **parts)

        return self._call(Operation.INVENTORY_GET, deadline, act)

    def get_firmware_inventory(self, *, deadline: Deadline) -> list[FirmwareComponent]:
        return self._call(Operation.FIRMWARE_GET, deadline, lambda hw: list(self.machine.firmware))

    def get_bios(self, *, deadline: Deadline) -> BiosSettings:
        return self._call(Operation.BIOS_GET, deadline, lambda hw: self.machine.bios.settings())

    def set_bios(
        self, changes: Mapping[str, Any], *, deadline: Deadline, apply_time: str = "OnReset"
    ) -> dict[str, Any]:
        """Checked against the simulated registry before anything is "sent"."""
        check_bios_changes(changes, self.machine.bios.registry, node=self.node)
        if apply_time not in ("OnReset", "Immediate"):
            raise self.unsupported(Operation.BIOS_SET, f"no apply time {apply_time!r}")

        def act(hw: Any) -> dict[str, Any]:
            self.machine.bios.stage(dict(changes), immediate=apply_time == "Immediate")
            self.machine.apply(hw)  # bios_pending, bios_partial: what the next boot applies
            return self.machine.bios.settings().pending

        return self._call(Operation.BIOS_SET, deadline, act)

    def start_firmware_update(
        self, image_uri: str, *, targets: tuple[str, ...] = (), deadline: Deadline
    ) -> UpdateTask:
        """The simulated machine takes the image for one component (the
        BIOS when none is named), shaped by the update effects that fired."""
        target = targets[0] if targets else "BIOS"
        if len(targets) > 1 or target not in {c.id for c in self.machine.firmware}:
            raise InputError(f"no single firmware component {targets!r}", field="targets")

        def act(hw: list[Firing]) -> UpdateTask:
            update = self.machine.update_firmware(target, image_uri, hw)
            return UpdateTask("task", f"fake-task/{update.number}", (target,))

        return self._call(Operation.FIRMWARE_UPDATE, deadline, act)

    def get_update_task(self, task: UpdateTask, *, deadline: Deadline) -> TaskStatus:
        """The update's state now; one rejected (``update_rejected``) is
        ``RequestRejected``, as the Redfish driver types VerificationFailed."""

        def act(hw: Any) -> TaskStatus:
            _parts, updates, now = self.machine.firmware_now()
            state, percent = updates[int(str(task.path).rsplit("/", 1)[-1]) - 1].progress(now)
            if state == "Exception":
                raise self.fault(
                    RequestRejected,
                    "the task ended Exception: Update.1.0.VerificationFailed",
                    operation=Operation.FIRMWARE_UPDATE,
                )
            return TaskStatus(state, percent)

        return self._call(Operation.FIRMWARE_UPDATE, deadline, act)

    def request_bmc_reset(self, *, deadline: Deadline) -> None:
        """The simulated BMC goes down for the machine's ``bmc_reboot_time``."""
        self._call(
            Operation.BMC_RESET,
            deadline,
            lambda hw: self.machine.reboot_bmc(self.machine.hardware.bmc_reboot_time),
        )

    def get_boot_progress(self, *, deadline: Deadline) -> str | None:
        return self._call(
            Operation.BOOT_PROGRESS_GET, deadline, lambda hw: self.machine.boot_progress()
        )
