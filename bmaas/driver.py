"""The driver contract: what every BMC protocol offers bmaas.

A driver is a small required core (probe, power, boot device) plus optional
capabilities (virtual media, inventory, boot progress, BIOS settings,
firmware inventory) that raise
:class:`~bmaas.faults.UnsupportedOperation` unless a driver implements them.
``capabilities`` declares what a driver offers so callers can filter nodes
without calling them (bmclib's provider features).

Every method:

* runs under a :class:`~bmaas.deadline.Deadline` (``deadline=``, a
  **required** keyword: the caller's budget, handed down; there is no
  default, so a missing one is a type error, never a fresh budget) and never
  blocks past it; a call whose deadline has passed sends nothing and raises
  ``SlotTimeout`` (bmaas's budget, never counted against the node). A method
  that makes several BMC requests (``set_power_state`` with ``wait``) gives
  each one a share of at most ``bmc_timeout``;
* makes **one** bounded attempt: retry limits live only in ``bmaas.retry``;
* raises only :class:`~bmaas.faults.BmaasError` subclasses;
* states its idempotency, because the retry layer decides by it: repeating an
  idempotent call is safe after a ``BMCTimeout``, repeating REBOOT is not.

``PowerState.UNKNOWN`` means "could not tell". It is never treated as off.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Self

from bmaas import clock as _clock
from bmaas.deadline import Deadline
from bmaas.faults import (
    BMCFault,
    BootFailure,
    PowerFailure,
    PowerPending,
    SettingsNotApplied,
    SlotTimeout,
    UnsupportedOperation,
)
from bmaas.gate import GATES, Gate, GateRegistry
from bmaas.hardware import (
    AttributeInfo,
    BiosSettings,
    Dimm,
    Disk,
    FirmwareComponent,
    Nic,
    Processor,
    TaskStatus,
    UpdateTask,
)
from bmaas.updates import UpdateBounds, UpdateSteps, follow_update, wait_back

if TYPE_CHECKING:  # the enums and the base class load without sealing, TLS or ssl
    from bmaas.driver_info import DriverInfo

__all__ = [
    "DEFAULT_BMC_TIMEOUT",
    "AttributeInfo",
    "BMCDriver",
    "BMCInfo",
    "BiosSettings",
    "BootDevice",
    "BootSetting",
    "Capability",
    "Dimm",
    "Disk",
    "FirmwareComponent",
    "Inventory",
    "Nic",
    "Operation",
    "OtherBootDevice",
    "PowerAction",
    "PowerState",
    "Processor",
    "Quirk",
    "soft_reboot",
]

LOG = logging.getLogger(__name__)

#: seconds one BMC request may take at most (a driver's default ``bmc_timeout``)
DEFAULT_BMC_TIMEOUT = 10.0
#: seconds between power-state reads while waiting for a transition
POWER_POLL_INTERVAL = 1.0


class PowerState(StrEnum):
    ON = "on"
    OFF = "off"
    POWERING_ON = "powering_on"
    POWERING_OFF = "powering_off"
    #: the BMC could not tell (or we could not ask). Never the same as OFF.
    UNKNOWN = "unknown"


class PowerAction(StrEnum):
    ON = "on"
    OFF = "off"
    SOFT_OFF = "soft_off"
    REBOOT = "reboot"
    SOFT_REBOOT = "soft_reboot"

    @property
    def idempotent(self) -> bool:
        """Doing it twice is the same as doing it once (ON, OFF, SOFT_OFF)."""
        return self in (PowerAction.ON, PowerAction.OFF, PowerAction.SOFT_OFF)

    @property
    def target(self) -> PowerState:
        """The power state the node settles in once the action has landed."""
        if self in (PowerAction.OFF, PowerAction.SOFT_OFF):
            return PowerState.OFF
        return PowerState.ON


def soft_reboot(
    step: Callable[[PowerAction, bool], PowerState], *, wait: bool = True
) -> PowerState:
    """THE soft reboot where a BMC has no single request for it (IPMI never
    does; Redfish without ``GracefulRestart``; Ironic's SOFT_REBOOT on any of
    them): a soft off waited for (the OS shut down, the node reads off), then
    on, waited for when ``wait``. Both steps are idempotent, so a caller's
    retry may repeat either; a SOFT_REBOOT itself is not, and is never resent.

    ``step(action, wait)`` requests one action (through the caller's retry and
    budget) and, with ``wait``, waits for ``action.target``; it returns the
    last state read. The driver (IPMI), the retry layer
    (:class:`bmaas.retry.RetryingDriver`) and Ironic's power interface each
    pass their own step; the order lives here."""
    step(PowerAction.SOFT_OFF, True)
    return step(PowerAction.ON, wait)


class BootDevice(StrEnum):
    PXE = "pxe"
    DISK = "disk"
    CDROM = "cdrom"
    BIOS = "bios"


class OtherBootDevice(str):
    """A boot override the BMC reports that no :class:`BootDevice` stands for,
    by the BMC's own name (Redfish ``Usb``, ``Utilities``, ``UefiShell``:
    left by another tool or a person at the console).

    A reader sees what the BMC will boot instead of a fault (``boot-device
    get`` shows ``Usb (once)``). It is not a :class:`BootDevice` member on
    purpose: the contract suite sets every BootDevice on every driver, and
    no driver can set these -- ``set_boot_device`` takes a BootDevice only.
    In JSON it is the plain name, so a boot setting keeps its one shape
    (``{"device", "persistent"}``)."""

    __slots__ = ()


class Quirk(StrEnum):
    """Capability facts a BMC shows in its answers, not in its declarations.

    A driver adds one to ``driver.quirks`` when it sees it; a deploy records it
    on the node (``extra.bmc_quirks``) and adapts instead of failing.
    """

    #: asked for a one-time boot override, reads back a persistent one
    #: (stock sushy-tools, several real BMCs). Ironic's answer is
    #: ``[*]force_persistent_boot_device``; bmaas's: ask for a persistent
    #: override on this node, and restore the boot device after the deploy.
    BOOT_ONCE_KEPT_PERSISTENT = "boot_once_kept_persistent"
    #: asked for a persistent override, reads back a one-time one
    BOOT_PERSISTENT_KEPT_ONCE = "boot_persistent_kept_once"
    #: asked for a one-time override, reads back the target with the override
    #: ``Disabled`` (Supermicro H13): the BMC took it and boots it once
    BOOT_ONCE_READS_DISABLED = "boot_once_reads_disabled"
    #: the BMC offers no persistent override (Lenovo XCC: ``Once`` and
    #: ``Disabled`` only): a persistent request is sent as once and sent again
    #: before every power-on or reboot this driver makes (as Ironic does)
    BOOT_NO_CONTINUOUS = "boot_no_continuous"
    #: the BMC answers the boot-device read from the *running* machine, and
    #: a set takes at the machine's next cold start (stock virtualbmc: it
    #: writes the device into libvirt's saved definition and reads it back
    #: from the running domain). While the node is on, a set reads back the
    #: device the node booted with: the read-back is checked against that
    #: (anything else is still a ``BootFailure``), the setting is kept as
    #: :attr:`BMCDriver.unverified_boot` until a cold start shows it, and a
    #: deploy power-cycles such a node (off, then on) instead of a warm reset
    BOOT_READS_RUNNING = "boot_reads_running"
    #: the BMC refused IPMI cipher suite 17 and the session runs suite 3
    #: (HMAC-SHA1 integrity), as ``ipmi_cipher_suite: auto`` allows: a
    #: downgrade the operator must see (``bmaas status check`` warns)
    IPMI_SUITE_3 = "ipmi_cipher_suite_3"


class Capability(StrEnum):
    POWER = "power"
    SOFT_POWER = "soft_power"
    BOOT_DEVICE = "boot_device"
    VIRTUAL_MEDIA = "virtual_media"
    INVENTORY = "inventory"
    BOOT_PROGRESS = "boot_progress"
    #: BIOS attributes read (with their registry) and set, verified after the reset
    BIOS = "bios"
    #: the firmware images the BMC reports (component, version, updateable)
    FIRMWARE = "firmware"


class Operation(StrEnum):
    """Names of BMC operations. Fault rules glob over these (``power.*``), and
    faults and events name them, so the lab, the drivers and the metrics all
    speak of the same thing."""

    LOGIN = "login"
    PROBE = "probe"
    POWER_GET = "power.get"
    POWER_SET = "power.set"
    BOOT_GET = "boot.get"
    BOOT_SET = "boot.set"
    VMEDIA_INSERT = "vmedia.insert"
    VMEDIA_EJECT = "vmedia.eject"
    INVENTORY_GET = "inventory.get"
    BOOT_PROGRESS_GET = "boot_progress.get"
    BIOS_GET = "bios.get"
    BIOS_SET = "bios.set"
    #: reading the BIOS back after the reset that was to apply a change
    BIOS_VERIFY = "bios.verify"
    FIRMWARE_GET = "firmware.get"
    #: taking a firmware image (Redfish UpdateService.SimpleUpdate or a
    #: multipart push) and following its task
    FIRMWARE_UPDATE = "firmware.update"
    #: restarting the BMC itself (Redfish Manager.Reset) and waiting for it
    BMC_RESET = "bmc.reset"


@dataclasses.dataclass(frozen=True)
class BootSetting:
    #: a BootDevice, or what the BMC calls an override bmaas has no device for
    device: BootDevice | OtherBootDevice
    persistent: bool


@dataclasses.dataclass(frozen=True)
class BMCInfo:
    """What ``probe()`` learns: the BMC answered and accepted our credentials."""

    power_state: PowerState
    manufacturer: str | None = None
    firmware_version: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Inventory:
    """What the machine is. The summary (vendor to memory) is always read;
    the parts (``processors`` to ``firmware``) only by ``get_inventory(
    detail=True)`` on a driver that can list them: None means "not read",
    an empty tuple "read, none there"."""

    manufacturer: str | None = None
    model: str | None = None
    serial: str | None = None
    cpus: int | None = None
    memory_mb: int | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    processors: tuple[Processor, ...] | None = None
    dimms: tuple[Dimm, ...] | None = None
    #: network interfaces with their MAC addresses
    nics: tuple[Nic, ...] | None = None
    disks: tuple[Disk, ...] | None = None
    #: the firmware versions the BMC reports (BIOS, BMC, controllers)
    firmware: tuple[FirmwareComponent, ...] | None = None


class BMCDriver(abc.ABC):
    """One node's BMC, spoken to over one protocol.

    Subclasses set ``name``, ``capabilities``, ``required_info`` and
    ``accepted_info`` and implement the abstract methods. A driver instance may
    keep a session open between calls; :meth:`close` releases it.
    """

    #: the entry-point name in ``bmaas.drivers`` ("ipmi", "redfish", "fake")
    name: ClassVar[str] = ""
    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    #: driver_info keys this driver cannot work without
    required_info: ClassVar[tuple[str, ...]] = ()
    #: every driver_info key this driver reads (keys bmaas does not know at all
    #: are input errors; keys of other drivers are allowed, as in Ironic)
    accepted_info: ClassVar[frozenset[str]] = frozenset()
    #: seconds between power-state reads while waiting for a transition
    poll_interval: float = POWER_POLL_INTERVAL
    #: seconds a logged-in session may sit unused and still be trusted (BMCs
    #: forget idle sessions); a driver pool logs out sooner than this
    session_idle: ClassVar[float] = 60.0
    #: seconds of idleness after which a driver pool sends :meth:`keepalive`
    #: on the session (None: this driver keeps no session alive, the pool
    #: logs it out after ``session_idle``); below ``session_idle``
    session_keepalive: ClassVar[float | None] = None
    #: requests one BMC serves at once from this process (:mod:`bmaas.gate`);
    #: ``driver_info.bmc_max_requests`` may lower it for one BMC
    max_requests: ClassVar[int] = 1
    #: seconds between request starts on one BMC; ``bmc_min_interval`` may widen it
    min_interval: ClassVar[float] = 0.0
    #: the registry this driver takes its BMC's gate from (tests inject their own)
    gates: GateRegistry = GATES

    def __init__(
        self,
        node: str,
        info: DriverInfo,
        *,
        bmc_timeout: float = DEFAULT_BMC_TIMEOUT,
        clock: _clock.ClockFn | None = None,
        sleep: _clock.SleepFn | None = None,
    ) -> None:
        self.node = node
        self.info = info
        #: the most seconds each BMC request gets of the caller's deadline (one
        #: request of a several-request method, or one attempt of a retry)
        self.bmc_timeout = bmc_timeout
        self._clock = clock or _clock.monotonic
        self._sleep = sleep or _clock.sleep
        #: logins (first and re-logins) this driver made: a driver pool sums
        #: them into "reads per login", the figure that says sessions last
        self.logins = 0
        #: capability facts learned from the BMC's answers (:class:`Quirk`), for
        #: the caller to record (a deploy stores them on the node)
        self.quirks: set[Quirk] = set()
        #: a boot setting the BMC took while the node was on and cannot show
        #: before the node's next cold start (:attr:`Quirk.BOOT_READS_RUNNING`):
        #: accepted against what the BMC can show, verified once it shows
        self.unverified_boot: BootSetting | None = None
        self._gate: Gate | None = None

    # -- identity ------------------------------------------------------------

    @property
    @abc.abstractmethod
    def address(self) -> str:
        """Where the BMC is, for faults and logs (never with credentials)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} node={self.node!r} address={self.address!r}>"

    @property
    def bmc_label(self) -> str:
        """Which BMC the requests go to, as gates and pools name it: every
        node behind one BMC (one Redfish service) has the same label."""
        return f"{self.name}:{self.node}"

    @property
    def gate(self) -> Gate:
        """This BMC's request gate in this process (:mod:`bmaas.gate`): every
        wire call of a driver runs inside ``gate.hold``."""
        if self._gate is None:
            cap, spacing = self.max_requests, self.min_interval
            if self.info.bmc_max_requests is not None:
                cap = min(cap, self.info.bmc_max_requests)
            if self.info.bmc_min_interval is not None:
                spacing = max(spacing, self.info.bmc_min_interval)
            self._gate = self.gates.gate(self.bmc_label, cap=cap, spacing=spacing)
        return self._gate

    @property
    def clock(self) -> _clock.ClockFn:
        """The clock this driver's deadlines are measured on (a caller making
        a :class:`~bmaas.deadline.Deadline` for it uses the same one)."""
        return self._clock

    @property
    def sleep(self) -> _clock.SleepFn:
        """The sleep this driver's waits use (a retry around it waits on the
        same clock: :meth:`clock`)."""
        return self._sleep

    def supports(self, capability: Capability) -> bool:
        return capability in self.capabilities

    # -- required core ---------------------------------------------------------

    @abc.abstractmethod
    def probe(self, *, deadline: Deadline) -> BMCInfo:
        """Check that the BMC answers and accepts our credentials.

        Read-only and idempotent. Raises ``BMCAuthError`` on bad credentials,
        so enrollment can refuse a node before anything acts on it.
        """

    @abc.abstractmethod
    def get_power_state(self, *, deadline: Deadline) -> PowerState:
        """Read the power state. Read-only and idempotent.

        Returns ``UNKNOWN`` when the BMC answers without a usable state; a BMC
        that does not answer raises a fault instead.
        """

    def set_power_state(
        self,
        action: PowerAction,
        *,
        wait: bool = False,
        timeout: float | None = None,
        deadline: Deadline,
    ) -> PowerState:
        """Ask for a power action; with ``wait``, poll until the target state.

        ON, OFF and SOFT_OFF are idempotent: powering on a node that is on
        succeeds. REBOOT and SOFT_REBOOT are **not**: each call restarts the
        node, so after a ``BMCTimeout`` the caller must re-read the power state
        before sending another.

        With ``wait=True`` the call returns once the node reads the target
        state, and raises ``PowerFailure`` if it does not within ``timeout``
        seconds. ``deadline`` bounds the whole method, the wait included; each
        BMC request in it gets a share of at most ``bmc_timeout``. Returns the
        last state read (``action.target`` when waited, else the state right
        after the request, which may still be the old one).
        """
        start = self._clock()
        self.request_power(action, deadline=self.call_deadline(deadline))
        if not wait:
            return self.get_power_state(deadline=self.call_deadline(deadline))
        return self.wait_for_power(action.target, timeout=timeout, deadline=deadline, start=start)

    @abc.abstractmethod
    def request_power(self, action: PowerAction, *, deadline: Deadline) -> None:
        """Send exactly one power request to the BMC and return once it is
        accepted, without waiting for it to land. The unit the retry layer
        retries: idempotency is the action's (see :class:`PowerAction`)."""

    @abc.abstractmethod
    def get_boot_device(self, *, deadline: Deadline) -> BootSetting:
        """Read the next-boot device and whether it persists. Idempotent."""

    @abc.abstractmethod
    def set_boot_device(
        self, device: BootDevice, *, persistent: bool = False, deadline: Deadline
    ) -> None:
        """Set the device the node boots from next; ``persistent=False`` means
        once, consumed by the next power-on. Idempotent.

        Drivers read the setting back (:meth:`check_boot_readback`) and raise
        ``BootFailure`` when the BMC accepted it but set another device; one
        that keeps the device with another persistence adds a :class:`Quirk`.
        """

    # -- optional capabilities ----------------------------------------------

    def insert_virtual_media(self, url: str, *, deadline: Deadline) -> None:
        """Insert an image (by URL) into the virtual CD slot. Idempotent for
        the same URL."""
        raise self.unsupported(Operation.VMEDIA_INSERT)

    def eject_virtual_media(
        self, *, deadline: Deadline, url: str | None = None, force: bool = False
    ) -> None:
        """Eject the virtual CD media bmaas inserted, never another tool's:
        the image this driver's last insert put there, or ``url`` when the
        caller names it (an insert made by another process); ``force``: the
        media of every CD slot, whoever inserted it. A slot holding another
        image is left as it is. Idempotent: ejecting an empty slot succeeds."""
        raise self.unsupported(Operation.VMEDIA_EJECT)

    def get_inventory(self, *, deadline: Deadline, detail: bool = False) -> Inventory:
        """Read static hardware facts (vendor, model, serial, cpus, memory);
        with ``detail`` also the parts a driver can list (processors, DIMMs,
        NICs with MACs, disks, firmware versions: more requests, one budget).
        Idempotent."""
        raise self.unsupported(Operation.INVENTORY_GET)

    def get_firmware_inventory(self, *, deadline: Deadline) -> list[FirmwareComponent]:
        """The firmware images the BMC reports, each with its version and
        whether it can be updated. Idempotent."""
        raise self.unsupported(Operation.FIRMWARE_GET)

    def get_bios(self, *, deadline: Deadline) -> BiosSettings:
        """The BIOS attributes: current, pending (set, waiting for the next
        reset) and the attribute registry when the BMC publishes one.
        Idempotent."""
        raise self.unsupported(Operation.BIOS_GET)

    def set_bios(
        self, changes: Mapping[str, Any], *, deadline: Deadline, apply_time: str = "OnReset"
    ) -> dict[str, Any]:
        """Ask for BIOS attribute changes, applied at ``apply_time``
        (:data:`bmaas.hardware.APPLY_TIMES`: ``OnReset``, the next reboot;
        ``Immediate`` where the BMC offers it). Checked first against the
        registry when the BMC publishes one (:func:`bmaas.hardware.
        check_bios_changes`: every problem at once as an ``InputError``,
        nothing sent). Returns what is pending after the request (the
        attributes set and not applied yet). Idempotent: the same changes
        twice leave the same pending settings. Nothing is applied until the
        reset: :meth:`verify_bios` reads the result after it."""
        raise self.unsupported(Operation.BIOS_SET)

    def verify_bios(self, expected: Mapping[str, Any], *, deadline: Deadline) -> BiosSettings:
        """Read the BIOS after the reset that was to apply ``expected`` and
        raise :class:`~bmaas.faults.SettingsNotApplied` naming every
        attribute whose current value is not the one asked for (with what it
        reads and whether it is still pending): never success. Returns the
        settings read when all applied. Idempotent (one :meth:`get_bios`)."""
        start = self._clock()
        settings = self.get_bios(deadline=deadline)
        missed: dict[str, Any] = {}
        for name, wanted in expected.items():
            now = settings.current.get(name)
            if now != wanted:
                missed[name] = {
                    "wanted": wanted,
                    "current": now,
                    "pending": name in settings.pending,
                }
        if missed:
            shown = "; ".join(
                f"{name}: wanted {m['wanted']!r}, reads {m['current']!r}"
                + (" (still pending)" if m["pending"] else "")
                for name, m in missed.items()
            )
            raise self.fault(
                SettingsNotApplied,
                f"{len(missed)} of {len(expected)} attribute(s) did not apply: {shown}",
                operation=Operation.BIOS_VERIFY,
                elapsed=self._clock() - start,
                attributes=missed,
            )
        return settings

    def start_firmware_update(
        self, image_uri: str, *, targets: tuple[str, ...] = (), deadline: Deadline
    ) -> UpdateTask:
        """Hand the BMC one firmware image for ``targets`` (firmware
        component ids; empty: the BMC chooses) and return where it reports
        the update. One request: **not** idempotent (an image sent twice is
        two updates). :meth:`update_firmware` follows it to its end."""
        raise self.unsupported(Operation.FIRMWARE_UPDATE)

    def get_update_task(self, task: UpdateTask, *, deadline: Deadline) -> TaskStatus:
        """Read an update's task (or vendor job) once. A task that ended
        badly raises its fault (an image refused: ``RequestRejected``).
        Idempotent."""
        raise self.unsupported(Operation.FIRMWARE_UPDATE)

    def request_bmc_reset(self, *, deadline: Deadline) -> None:
        """Ask the BMC to restart itself (one request, not idempotent);
        :meth:`reset_bmc` waits for its return."""
        raise self.unsupported(Operation.BMC_RESET)

    def update_steps(self, **steps: Any) -> UpdateSteps:
        """This driver's one-request steps for :mod:`bmaas.updates`; a
        caller (the retrying driver) replaces some with retried ones."""
        own: dict[str, Any] = {
            "start": lambda image, *, targets, deadline: self.start_firmware_update(
                image, targets=targets, deadline=self.call_deadline(deadline)
            ),
            "read_task": lambda task, *, deadline: self.get_update_task(
                task, deadline=self.call_deadline(deadline)
            ),
            "read_firmware": lambda *, deadline: self.get_firmware_inventory(
                deadline=self.call_deadline(deadline)
            ),
            "ask": lambda *, deadline: self.probe(deadline=self.call_deadline(deadline)),
        }
        own.update(steps)
        return UpdateSteps(fault=self.fault, clock=self._clock, sleep=self._sleep, **own)

    def update_firmware(
        self,
        image_uri: str,
        *,
        targets: tuple[str, ...] = (),
        deadline: Deadline,
        bounds: UpdateBounds | None = None,
        progress: Callable[[str], None] | None = None,
        steps: UpdateSteps | None = None,
    ) -> list[FirmwareComponent]:
        """Update firmware and follow it to its end within ``deadline``: the
        task until it ends (``TaskStuck`` past ``bounds.task``), the BMC
        through a reboot (``BMCNotBack`` past ``bounds.back``), the version
        read back (unchanged: ``SettingsNotApplied``). Returns the firmware
        inventory after. See :mod:`bmaas.updates`. Not idempotent."""
        return follow_update(
            steps or self.update_steps(),
            image_uri,
            targets,
            bounds or UpdateBounds(),
            deadline=deadline,
            operation=Operation.FIRMWARE_UPDATE,
            progress=progress,
        )

    def reset_bmc(
        self,
        *,
        deadline: Deadline,
        bounds: UpdateBounds | None = None,
        progress: Callable[[str], None] | None = None,
        steps: UpdateSteps | None = None,
    ) -> float:
        """Restart the BMC and wait for it to answer ``bounds.good`` times
        in a row (``BMCNotBack`` past ``bounds.back``). Returns the seconds
        it was waited for. Not idempotent."""
        steps = steps or self.update_steps()
        self.request_bmc_reset(deadline=self.call_deadline(deadline))
        if progress is not None:
            progress("reset taken: waiting for the BMC")
        return wait_back(
            steps,
            bounds or UpdateBounds(),
            deadline=deadline,
            operation=Operation.BMC_RESET,
            progress=progress,
        )

    def get_boot_progress(self, *, deadline: Deadline) -> str | None:
        """Read how far the node got in booting (Redfish ``BootProgress.LastState``,
        e.g. ``OSRunning``); ``None`` when the BMC does not say. Idempotent."""
        raise self.unsupported(Operation.BOOT_PROGRESS_GET)

    def keepalive(self, *, deadline: Deadline) -> bool:
        """Keep an established session alive with the cheapest request the
        protocol has, so a long wait between uses (a sync interval) costs no
        login. Never logs in: ``False`` when there is no trusted session to
        keep (the pool then logs it out). Drivers without
        ``session_keepalive`` return ``False``."""
        return False

    def close(self) -> None:  # noqa: B027 - optional hook: most drivers hold nothing
        """Release sessions and sockets. Safe to call twice."""

    def session_alive(self) -> bool:
        """Whether a logged-in session is held and believed usable (a driver
        pool reports it; the driver re-logs in on its own when it is not)."""
        return False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers for subclasses ----------------------------------------------

    def check_boot_readback(
        self,
        wanted: BootSetting,
        applied: BootSetting,
        *,
        running: BootSetting | None = None,
    ) -> None:
        """Judge a boot override's read-back: another *device* is a
        ``BootFailure`` (the BMC ignored the request); the same device with
        another *persistence* is a capability fact about the BMC (a
        :class:`Quirk`, logged once per driver), never a fault.

        ``running``: what a BMC with :attr:`Quirk.BOOT_READS_RUNNING` read
        *before* the set, the node being on -- the device the node booted
        with, all such a BMC can show until the node's next cold start. A
        read-back of that device is then the BMC's answer, not a refusal:
        the setting is kept as :attr:`unverified_boot` (logged), and any
        other device is still a ``BootFailure``."""
        if applied.device != wanted.device:
            if (
                running is not None
                and Quirk.BOOT_READS_RUNNING in self.quirks
                and applied.device == running.device
            ):
                self.unverified_boot = wanted
                LOG.info(
                    "%s: asked for %s (persistent=%s) while the node is on; the BMC reads "
                    "back the running device %s (%s): shown at the next cold start",
                    self.node,
                    wanted.device,
                    wanted.persistent,
                    applied.device,
                    Quirk.BOOT_READS_RUNNING,
                )
                return
            raise self.fault(
                BootFailure,
                f"asked for {wanted.device} (persistent={wanted.persistent}), the BMC reads "
                f"back {applied.device} (persistent={applied.persistent})",
                operation=Operation.BOOT_SET,
            )
        self.unverified_boot = None
        if applied.persistent == wanted.persistent:
            return
        quirk = (
            Quirk.BOOT_ONCE_KEPT_PERSISTENT
            if applied.persistent
            else Quirk.BOOT_PERSISTENT_KEPT_ONCE
        )
        if quirk not in self.quirks:
            LOG.warning(
                "%s: the BMC keeps boot overrides its own way (%s): asked %s persistent=%s, "
                "reads back persistent=%s; not a fault",
                self.node,
                quirk,
                wanted.device,
                wanted.persistent,
                applied.persistent,
            )
        self.quirks.add(quirk)

    def _deadline(self, deadline: Deadline) -> Deadline:
        """The bound of a one-request method: the caller's deadline as given
        (checked to be a :class:`Deadline`, not seconds)."""
        return _checked(deadline)

    def too_late(self, operation: Operation | str, start: float) -> SlotTimeout:
        """The fault of a call whose deadline passed before anything was sent
        (spent before the call began, or by bmaas's own spacing before its
        next request): bmaas's budget, never the BMC's fault. A
        :class:`~bmaas.faults.SlotTimeout`, so the policy table never counts
        it toward the node's health nor fences the node for it (issue 36:
        as a ``BMCTimeout`` it put healthy nodes into maintenance)."""
        return self.slot_timeout(
            "the deadline passed before the call: nothing sent", operation, start
        )

    def node_busy(self, operation: Operation | str, start: float) -> SlotTimeout:
        """The fault of a call that waited out its deadline for this node's one
        call slot (another call on the node still running): bmaas's own
        contention, never the BMC's."""
        return self.slot_timeout("another call to this node is still running", operation, start)

    def slot_timeout(
        self, message: str, operation: Operation | str, start: float | None
    ) -> SlotTimeout:
        """bmaas's own wait for this node ended the call (``start``: when the
        wait began, None when not measured)."""
        return SlotTimeout(
            message,
            node=self.node,
            driver=self.name,
            operation=str(operation),
            address=self.bmc_label,
            waited=None if start is None else self._clock() - start,
        )

    def call_deadline(self, deadline: Deadline) -> Deadline:
        """The bound of one BMC request inside a longer method: a share of
        ``deadline`` of at most ``bmc_timeout``."""
        return _checked(deadline).share(cap=self.bmc_timeout)

    def fault(
        self,
        cls: type[BMCFault],
        message: str,
        *,
        operation: Operation | str,
        elapsed: float | None = None,
        **kw: Any,
    ) -> BMCFault:
        """Build a fault of ``cls`` that names this node, driver and address."""
        return cls(
            message,
            node=self.node,
            driver=self.name,
            operation=str(operation),
            address=self.address,
            elapsed=elapsed,
            **kw,
        )

    def unsupported(self, operation: Operation, why: str = "") -> UnsupportedOperation:
        message = why or f"the {self.name} driver does not offer {operation}"
        fault = self.fault(UnsupportedOperation, message, operation=operation, elapsed=0.0)
        assert isinstance(fault, UnsupportedOperation)
        return fault

    def wait_for_power(
        self,
        target: PowerState,
        *,
        timeout: float | None,
        deadline: Deadline,
        start: float | None = None,
        read: Callable[..., PowerState] | None = None,
    ) -> PowerState:
        """Poll the power state until ``target``; ``PowerFailure`` after ``timeout``.

        ``timeout`` is what the hardware is allowed (power must land within
        it; ``3 * bmc_timeout`` when None); ``deadline`` is the caller's budget
        and bounds everything, reads and sleeps. When the budget runs out
        first the wait ends with :class:`~bmaas.faults.PowerPending` (the
        BMC took the action and we stopped looking before the hardware's
        time was up: under way, not failed; bmaas's budget, not the node's
        fault, so never counted nor fenced), never later than the deadline.

        This is waiting for hardware, not retrying: a fault on a read is raised
        as is, unless ``read`` (e.g. a retrying reader from ``bmaas.retry``,
        called as ``read(deadline=...)``) handles it -- but a read that goes
        unanswered after the BMC answered this wait, given less than
        ``bmc_timeout`` because the budget had no more, is the budget's end:
        ``PowerPending``. Each read gets the
        deadline (the default reader takes a share of at most ``bmc_timeout``).
        The last poll never sleeps past ``timeout``, and the read that calls
        it a failure is one asked after ``timeout`` ran out.
        """
        timeout = self.bmc_timeout * 3 if timeout is None else timeout
        start = self._clock() if start is None else start
        if read is None:

            def read(*, deadline: Deadline) -> PowerState:
                return self.get_power_state(deadline=self.call_deadline(deadline))

        window_end = start + timeout
        state = PowerState.UNKNOWN
        answered = False
        while True:
            asked = self._clock()
            # a read bounded by what the caller's budget has left, less than a
            # BMC call is given: unanswered, it is the budget that ended it
            cut = deadline.left() < self.bmc_timeout and deadline.at < window_end
            try:
                state = read(deadline=deadline)
            except BMCFault as exc:
                from bmaas.policy import policy_for  # the table imports the drivers' faults

                if answered and cut and policy_for(type(exc)).no_answer:
                    # This wait's reads were answered; the last one got the
                    # sliver of budget left (at load 25, a BMCTimeout "after
                    # 0.01s"): not the node's silence, the budget's end.
                    raise self._pending(target, state, start, window_end) from exc
                raise
            answered = True
            if state == target:
                return state
            remaining = window_end - self._clock()
            if remaining <= 0:
                if asked >= window_end or deadline.expired:
                    break
                # That read was asked inside the window and answered after it:
                # power may have landed in between. Only a read asked once the
                # window is over may call it a failure (a slow BMC's answer
                # is not the hardware missing its time).
                continue
            pause = min(self.poll_interval, remaining)
            if not deadline.sleep(pause, self._sleep) or deadline.expired:
                if deadline.at >= window_end:
                    break  # the hardware's time ran out too: its failure, not ours
                raise self._pending(target, state, start, window_end)
        raise self.fault(
            PowerFailure,
            f"power state is {state}, not {target}, {timeout:g}s after the request",
            operation=Operation.POWER_SET,
            elapsed=self._clock() - start,
        )

    def _pending(
        self, target: PowerState, state: PowerState, start: float, window_end: float
    ) -> PowerPending:
        """bmaas's budget ended before the hardware's window did: the node is
        not to blame (a BMCTimeout here fenced healthy nodes whose --deadline
        was shorter than --power-timeout), and the BMC took the action: under
        way, not failed (issue 48)."""
        return PowerPending(
            f"the BMC took the request {self._clock() - start:.2f}s ago; the "
            f"deadline passed while waiting for power {target} (last read "
            f"{state}), {window_end - self._clock():.2f}s before the node's "
            "power window ended",
            node=self.node,
            driver=self.name,
            operation=str(Operation.POWER_SET),
            address=self.bmc_label,
            waited=self._clock() - start,
        )


def _checked(deadline: Any) -> Deadline:
    """The contract took seconds once; a number now is a caller not yet
    converted, and fails loudly rather than being taken for a Deadline."""
    if not isinstance(deadline, Deadline):
        raise TypeError(
            f"deadline must be a bmaas.deadline.Deadline, not {type(deadline).__name__} "
            "(seconds: Deadline.after(seconds), or bmc_timeout= on the driver)"
        )
    return deadline
