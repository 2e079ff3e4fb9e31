"""A simulated server: power physics, boot device, virtual media, inventory.

Like real hardware (and like sushy-tools' fake driver), a power action is
accepted at once and *lands* after a transition time; the machine applies
pending transitions lazily, whenever someone looks. REBOOT (a power cycle,
Redfish ForceRestart) passes through OFF; a hard reset (:meth:`FakeMachine.reset`,
IPMI chassis control 0x03) does not: power reads on throughout, as on real
BMCs, and the machine boots again ``reset_time`` later.
A one-time boot device is consumed by the next power-on.

Time comes from an injected clock, randomness from a seeded ``random.Random``,
so a simulation replays exactly. Thread-safe: hwlab's IPMI and Redfish servers
share one machine, as a real BMC speaks both.

Hardware fault effects (``power_stuck``, ``slow_power``, ``power_lost``,
``boot_not_persisted``, ``boot_crash``, ``bios_pending``, ``bios_partial``)
are carried out here; the caller passes the firings its fault plan returned for the request.
"""

from __future__ import annotations

import dataclasses
import random
import threading
from collections.abc import Callable, Iterable
from typing import Any

from bmaas import clock as _clock
from bmaas.driver import BootDevice, BootSetting, PowerAction, PowerState
from bmaas.fakes.bios import FakeBios
from bmaas.fakes.faults import Effect, FaultPlan, Firing
from bmaas.fakes.firmware import BMC_COMPONENT, FirmwareUpdate, image_version, shaped
from bmaas.hardware import Dimm, Disk, FirmwareComponent, Nic, Processor

__all__ = ["HEALTH_STATES", "FakeMachine", "Hardware"]

#: the overall health values a BMC reports (Redfish's Status.Health)
HEALTH_STATES = ("OK", "Warning", "Critical")


@dataclasses.dataclass(frozen=True)
class Hardware:
    """Static facts and timings of a simulated server."""

    vendor: str = "bmaas-lab"
    model: str = "FakeServer 1U"
    serial: str = ""
    cpus: int = 8
    memory_mb: int = 32768
    #: seconds from "power on" accepted to the node reading on
    power_on_time: float = 2.0
    #: seconds from "power off" accepted to the node reading off
    power_off_time: float = 1.0
    #: seconds a graceful shutdown takes
    soft_off_time: float = 5.0
    #: seconds from power-on until the OS runs (BootProgress OSRunning)
    os_boot_time: float = 10.0
    #: seconds from a hard reset until the machine boots again (power stays on)
    reset_time: float = 0.5
    #: seconds a firmware update takes to land (hwlab's SimpleUpdate task)
    firmware_update_time: float = 2.0
    #: seconds the BMC is down rebooting into new BMC firmware
    bmc_reboot_time: float = 2.0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Hardware:
        return cls(**data)


class FakeMachine:
    """One simulated server, with its fault plan attached."""

    def __init__(
        self,
        name: str,
        hardware: Hardware | None = None,
        *,
        clock: _clock.ClockFn | None = None,
        rng: random.Random | None = None,
        plan: FaultPlan | None = None,
        power: PowerState = PowerState.OFF,
    ) -> None:
        if power not in (PowerState.ON, PowerState.OFF):
            raise ValueError("a machine starts either on or off")
        self.name = name
        self.hardware = hardware or Hardware(serial=f"SN-{name}")
        self._clock = clock or _clock.monotonic
        self.rng = rng or random.Random(name)
        self.plan = plan if plan is not None else FaultPlan(node=name, clock=self._clock)
        self._lock = threading.RLock()
        self._power: PowerState = power
        self._on_since: float | None = self._clock() if power is PowerState.ON else None
        self._since = self._clock()  # the last power transition landed then
        self.plan.power_window = self.power_window
        # pending transitions: (time it lands, state it lands in), in order
        self._pending: list[tuple[float, PowerState]] = []
        self._crash_armed: float | None = None  # boot_crash: seconds after next power-on
        self._crash_deadline: float | None = None  # boot_crash: when this boot falls over
        self._persistent = BootDevice.DISK
        self._once: BootDevice | None = None
        self._last_boot: BootDevice | None = None
        self._media: str | None = None
        #: a power fault latched by power_lost, cleared by the next power-on
        self.power_fault = False
        #: the BMC is rebooting (bmc_reboot) until this time on the clock
        self.bmc_down_until: float | None = None
        self._health = "OK"
        self._boots = 0
        #: the BIOS settings; a boot applies what is pending (issue 51)
        self.bios = FakeBios()
        #: the firmware images the BMC reports
        self.firmware: list[FirmwareComponent] = [
            FirmwareComponent("BMC", "BMC firmware", "fake-1.0", True),
            FirmwareComponent("BIOS", "System BIOS", "fake-bios-1.0", True),
            FirmwareComponent("NIC1", "NIC firmware", "fake-nic-1.0", True),
        ]
        #: every firmware update taken, in order; the last ones may not have landed
        self.updates: list[FirmwareUpdate] = []
        self._updates_landed = 0
        self._reset_at: float | None = None  # a hard reset lands (reboots) then
        #: called with (power, health, seconds since power landed) as they are
        #: at that instant, under the machine's lock (keep them short, never
        #: call back in), after power lands, health changes, or a transition
        #: is scheduled: a BMC that sends events watches here
        #: (:mod:`bmaas.hwlab.redfish.events`), whoever changed the machine
        self.watchers: list[Callable[[PowerState, str, float], None]] = []

    def __repr__(self) -> str:
        return f"<FakeMachine {self.name} {self.power_state()}>"

    # -- power ---------------------------------------------------------------

    def power_state(self) -> PowerState:
        """The state now, after applying every transition that has landed."""
        with self._lock:
            self._settle()
            if self._pending:
                # The next landing decides: a reboot reads POWERING_OFF, then POWERING_ON.
                upcoming = self._pending[0][1]
                if upcoming is PowerState.ON and self._power is PowerState.OFF:
                    return PowerState.POWERING_ON
                if upcoming is PowerState.OFF and self._power is PowerState.ON:
                    return PowerState.POWERING_OFF
            return self._power

    def power_window(self) -> tuple[str, float, float]:
        """("on"|"off", seconds in that state, seconds since the last power
        transition) for fault rules with a power window. "On" counts from
        the last boot, so a hard reset opens a POST window again."""
        with self._lock:
            self._settle()
            now = self._clock()
            on = self._power is PowerState.ON
            began = self._on_since if on and self._on_since is not None else self._since
            return ("on" if on else "off", now - began, now - self._since)

    @property
    def settled_power(self) -> PowerState:
        """ON or OFF as the hardware is right now (a transition counts as the
        state it has not yet left). What an IPMI chassis status reports."""
        with self._lock:
            self._settle()
            return self._power

    def set_power(self, action: PowerAction, firings: Iterable[Firing] = ()) -> None:
        """Accept a power action; it lands later (see :class:`Hardware`)."""
        effects = {f.effect: f for f in firings}
        with self._lock:
            self._settle()
            self._apply_lost(effects)
            if Effect.BOOT_CRASH in effects:
                self._crash_armed = float(effects[Effect.BOOT_CRASH].params["up_for"])
            if Effect.POWER_STUCK in effects:
                return
            self._schedule(action, effects.get(Effect.SLOW_POWER))
            self._notify()

    def _schedule(self, action: PowerAction, slow: Firing | None) -> None:
        hw = self.hardware
        on_time = float(slow.params["seconds"]) if slow else hw.power_on_time
        off_time = float(slow.params["seconds"]) if slow else hw.power_off_time
        if not slow and action in (PowerAction.SOFT_OFF, PowerAction.SOFT_REBOOT):
            off_time = hw.soft_off_time
        now = self._clock()
        heading = self._pending[-1][1] if self._pending else self._power
        if action is PowerAction.ON:
            if heading is not PowerState.ON:
                self._pending = [(now + on_time, PowerState.ON)]
        elif action in (PowerAction.OFF, PowerAction.SOFT_OFF):
            if heading is not PowerState.OFF:
                self._pending = [(now + off_time, PowerState.OFF)]
        elif self._power is PowerState.OFF and not self._pending:
            # A reset of a machine that is off powers it on, as most BMCs do.
            self._pending = [(now + on_time, PowerState.ON)]
        else:
            off_at = now + off_time
            self._pending = [(off_at, PowerState.OFF), (off_at + on_time, PowerState.ON)]

    def reset(self, firings: Iterable[Firing] = ()) -> None:
        """A hard reset (IPMI chassis control 0x03: the reset line, not a power
        cycle). Power stays on and reads on all through; ``reset_time`` later
        (``slow_power``'s seconds if it fires) the machine boots again: a boot
        is counted, the one-time boot device consumed, BootProgress starts
        over. A machine that is off or powering off powers on, as most BMCs do."""
        effects = {f.effect: f for f in firings}
        with self._lock:
            self._settle()
            self._apply_lost(effects)
            if Effect.BOOT_CRASH in effects:
                self._crash_armed = float(effects[Effect.BOOT_CRASH].params["up_for"])
            if Effect.POWER_STUCK in effects:
                return
            slow = effects.get(Effect.SLOW_POWER)
            heading = self._pending[-1][1] if self._pending else self._power
            if self._power is PowerState.OFF or heading is PowerState.OFF:
                self._schedule(PowerAction.ON, slow)
                self._notify()
                return
            delay = float(slow.params["seconds"]) if slow else self.hardware.reset_time
            self._reset_at = self._clock() + delay

    def force_power(self, state: PowerState) -> None:
        """Change power at once, behind the BMC's back (a person at the rack)."""
        if state not in (PowerState.ON, PowerState.OFF):
            raise ValueError("force_power takes ON or OFF")
        with self._lock:
            self._pending.clear()
            self._reset_at = None
            self._land(state, self._clock())

    def apply(self, firings: Iterable[Firing]) -> None:
        """Carry out hardware effects that need no action (``power_lost``;
        ``bios_pending`` and ``bios_partial``: what the next boot applies)."""
        effects = {f.effect: f for f in firings}
        with self._lock:
            self._settle()
            self._apply_lost(effects)
        if Effect.BIOS_PENDING in effects:  # the next boot applies none of it
            self.bios.hold("never")
        if Effect.BIOS_PARTIAL in effects:  # the next boot applies some of it
            self.bios.hold("partly")

    def _apply_lost(self, effects: dict[Effect, Firing]) -> None:
        if Effect.POWER_LOST in effects:
            self._pending.clear()
            if self._power is PowerState.ON:
                self._land(PowerState.OFF, self._clock())
            self.power_fault = True

    def _settle(self) -> None:
        """Land every transition, hard reset and boot crash due by now, in time
        order (and every firmware update due)."""
        self._land_updates()
        now = self._clock()
        while True:
            on = self._power is PowerState.ON
            due: list[tuple[float, int]] = []
            if on and self._crash_deadline is not None and self._crash_deadline <= now:
                due.append((self._crash_deadline, 0))
            if self._pending and self._pending[0][0] <= now:
                due.append((self._pending[0][0], 1))
            if self._reset_at is not None and self._reset_at <= now:
                due.append((self._reset_at, 2))
            if not due:
                return
            at, kind = min(due)
            if kind == 0:
                self._pending.clear()
                self._land(PowerState.OFF, at)
            elif kind == 1:
                _, state = self._pending.pop(0)
                self._land(state, at)
            else:
                self._reset_at = None
                if on:
                    self._crash_deadline = None
                    self._boot(at)

    def _land(self, state: PowerState, at: float) -> None:
        previous = self._power
        self._power = state
        self._since = at
        self._crash_deadline = None
        if state is PowerState.ON and previous is PowerState.OFF:
            self.power_fault = False
            self._boot(at)
        elif state is PowerState.OFF:
            self._on_since = None
            self._reset_at = None  # power went away before the reset landed
        self._notify()

    def _notify(self) -> None:
        if self.watchers:
            power, health, age = self._power, self._health, self._clock() - self._since
            for watcher in self.watchers:
                watcher(power, health, age)

    def next_change_in(self) -> float | None:
        """Seconds until the next scheduled landing (a transition, a boot
        crash), None when nothing is scheduled: a watcher looks again then."""
        with self._lock:
            self._settle()
            crash = self._crash_deadline
            due = [crash] if crash is not None and self._power is PowerState.ON else []
            if self._pending:
                due.append(self._pending[0][0])
            return max(0.0, min(due) - self._clock()) if due else None

    def _boot(self, at: float) -> None:
        """The machine starts booting at ``at`` (a power-on, or a hard reset)."""
        self._on_since = at
        self._boots += 1
        self._last_boot = self._once or self._persistent
        self._once = None
        self.bios.boot()  # a BIOS applies its pending settings at POST
        if self._crash_armed is not None:
            self._crash_deadline = at + self._crash_armed
            self._crash_armed = None

    @property
    def boots(self) -> int:
        """How many times the machine has booted (power-on landings)."""
        with self._lock:
            self._settle()
            return self._boots

    # -- boot device -----------------------------------------------------------

    def boot_device(self) -> BootSetting:
        """The device the next boot uses, and whether the setting persists."""
        with self._lock:
            self._settle()
            if self._once is not None:
                return BootSetting(self._once, persistent=False)
            return BootSetting(self._persistent, persistent=True)

    def set_boot_device(
        self, device: BootDevice, *, persistent: bool, firings: Iterable[Firing] = ()
    ) -> None:
        if any(f.effect is Effect.BOOT_NOT_PERSISTED for f in firings):
            return
        if any(f.effect is Effect.BOOT_ONCE_PERSISTENT for f in firings):
            persistent = True  # this BMC keeps no one-time override apart
        with self._lock:
            if persistent:
                self._persistent = device
                self._once = None
            else:
                self._once = device

    @property
    def last_boot_device(self) -> BootDevice | None:
        """The device the machine booted from at its last power-on."""
        with self._lock:
            self._settle()
            return self._last_boot

    def boot_progress(self) -> str:
        """Redfish ``BootProgress.LastState`` as this machine would report it."""
        with self._lock:
            self._settle()
            if self._power is not PowerState.ON or self._on_since is None:
                return "None"
            if self._last_boot is BootDevice.BIOS:
                return "SetupEntered"
            if self._clock() - self._on_since < self.hardware.os_boot_time:
                return "OSBootStarted"
            return "OSRunning"

    # -- virtual media and inventory -----------------------------------------

    @property
    def media(self) -> str | None:
        with self._lock:
            return self._media

    def insert_media(self, url: str) -> None:
        with self._lock:
            self._media = url

    def eject_media(self) -> None:
        with self._lock:
            self._media = None

    def inventory(self) -> dict[str, Any]:
        hw = self.hardware
        return {
            "manufacturer": hw.vendor,
            "model": hw.model,
            "serial": hw.serial,
            "cpus": hw.cpus,
            "memory_mb": hw.memory_mb,
        }

    def parts(self) -> dict[str, Any]:
        """What ``get_inventory(detail=True)`` lists: one processor, two
        DIMMs, one NIC (a MAC derived from the name), one disk, the firmware."""
        hw = self.hardware
        mac = "52:54:00:" + ":".join(f"{b:02x}" for b in self.name.encode()[-3:].rjust(3, b"\0"))
        half = hw.memory_mb // 2
        return {
            "processors": (Processor("CPU1", "FakeCPU", hw.cpus, hw.cpus * 2, "x86-64"),),
            "dimms": (Dimm("DIMM1", half, "DDR4"), Dimm("DIMM2", hw.memory_mb - half, "DDR4")),
            "nics": (Nic("NIC1", mac, 25000, "LinkUp"),),
            "disks": (Disk("Disk1", "Disk 1", 480 * 10**9, "FakeSSD"),),
            "firmware": tuple(self.firmware),
        }

    # -- BMC state -------------------------------------------------------------

    def bmc_down(self) -> bool:
        """True while the BMC is rebooting (a ``bmc_reboot`` effect, or new
        BMC firmware landing)."""
        with self._lock:
            self._land_updates()
            return self.bmc_down_until is not None and self._clock() < self.bmc_down_until

    @property
    def health(self) -> str:
        """The system's overall health as its BMC reports it (Redfish
        ``Status.Health``): one of :data:`HEALTH_STATES`."""
        with self._lock:
            return self._health

    def set_health(self, health: str) -> None:
        """Change what the BMC reports (a fan failed, a DIMM was replaced)."""
        if health not in HEALTH_STATES:
            raise ValueError(f"health must be one of {', '.join(HEALTH_STATES)}, not {health!r}")
        with self._lock:
            changed = health != self._health
            self._health = health
            if changed:
                self._notify()

    # -- firmware ------------------------------------------------------------

    def update_firmware(
        self, target: str, image: str, firings: Iterable[Firing] = ()
    ) -> FirmwareUpdate:
        """Take ``image`` for the component ``target`` now; it lands
        ``firmware_update_time`` seconds later, as the update effects among
        ``firings`` shape it (see :mod:`bmaas.fakes.firmware`)."""
        with self._lock:
            self._land_updates()
            found = [c for c in self.firmware if c.id == target]
            if not found:
                raise ValueError(f"no firmware component {target!r}")
            now = self._clock()
            update = FirmwareUpdate(
                len(self.updates) + 1,
                target,
                image,
                image_version(image, found[0].version),
                now,
                now + self.hardware.firmware_update_time,
            )
            update = shaped(update, {str(f.effect): dict(f.params) for f in firings})
            self.updates.append(update)
            return update

    def firmware_now(
        self,
    ) -> tuple[tuple[FirmwareComponent, ...], tuple[FirmwareUpdate, ...], float]:
        """(the components, every update, the time) after landing every
        update due by now."""
        with self._lock:
            self._land_updates()
            return tuple(self.firmware), tuple(self.updates), self._clock()

    def _land_updates(self) -> None:
        now = self._clock()
        while self._updates_landed < len(self.updates):
            update = self.updates[self._updates_landed]
            if update.lands_nothing:  # hung or rejected: never changes the machine
                self._updates_landed += 1
                continue
            if update.end > now:
                return
            self._updates_landed += 1
            self.firmware = [
                dataclasses.replace(c, version=update.version)
                if c.id == update.target and update.lands
                else c
                for c in self.firmware
            ]
            reboot = update.reboot or (
                self.hardware.bmc_reboot_time if update.target == BMC_COMPONENT else 0.0
            )
            if reboot:  # the BMC reboots into it
                back = update.end + reboot
                self.bmc_down_until = max(self.bmc_down_until or back, back)

    def reboot_bmc(self, duration: float) -> None:
        with self._lock:
            self.bmc_down_until = self._clock() + duration
