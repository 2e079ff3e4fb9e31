"""The IPMI driver: bmaas's driver contract over IPMI 2.0 (RMCP+, lanplus).

Built on ``pyghmi.ipmi.command.Command`` through :mod:`bmaas.drivers.ipmi.session`,
which bounds every wait by the call's deadline. Faults come from one mapping,
:func:`bmaas.drivers.ipmi.classify.classify`; the driver adds the two judgements
that need IPMI semantics: power faults reported by Get Chassis Status
(``PowerFailure``) and a boot device that does not read back (``BootFailure``).

Sessions: one RMCP+ session per driver, reused while it is healthy (a power
read on a reused session costs a fraction of a millisecond on loopback, a
login a few). A session that missed an answer, failed to parse a reply, or
sat idle longer than ``session_idle`` (:data:`SESSION_REUSE_IDLE`) is never
reused: the next call logs in afresh. A driver pool keeps a session alive
across long waits (a sync interval of 60 or 120 s) by calling
:meth:`IPMIDriver.keepalive` once it has been idle ``session_keepalive``
seconds (:data:`SESSION_KEEPALIVE`): one Get Device ID on the session, a
quarter of a login's exchanges. Calls on one driver are serialised.

Cipher suites: 17 unless the node's ``ipmi_cipher_suite`` says otherwise,
never 0, and never a silent fall back to 3 as pyghmi alone would make (with
``auto`` only, recorded as ``Quirk.IPMI_SUITE_3``): docs/operator.md, "BMC
security".
"""

from __future__ import annotations

import dataclasses
import logging
import struct
import threading
import weakref
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from pyghmi.exceptions import IpmiException
from pyghmi.ipmi import fru as pyghmi_fru

from bmaas import lateness
from bmaas.clock import ClockFn, SleepFn
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
    Quirk,
    soft_reboot,
)
from bmaas.driver_info import DriverInfo
from bmaas.drivers.ipmi.classify import classify
from bmaas.drivers.ipmi.command import BoundedCommand, CommandCall, open_command
from bmaas.faults import (
    BmaasError,
    BMCFault,
    InputError,
    PowerFailure,
    UnsupportedOperation,
)

__all__ = ["KNOWN_BMCS", "SESSION_KEEPALIVE", "SESSION_REUSE_IDLE", "IPMIDriver"]

LOG = logging.getLogger(__name__)

T = TypeVar("T")

#: seconds of idleness after which a session is not reused. BMCs drop idle
#: sessions (60 s is common, less is allowed), so a fresh login
#: (milliseconds) beats a timeout on a dead one.
SESSION_REUSE_IDLE = 20.0
#: seconds of idleness after which a driver pool sends a keepalive (Get
#: Device ID, as pyghmi's own keepalive): well inside SESSION_REUSE_IDLE
SESSION_KEEPALIVE = 10.0

_PRIVILEGE = {"administrator": 4, "operator": 3, "user": 2}
# Chassis Control (IPMI 2.0 section 28.3) directives
_CHASSIS_CONTROL = {
    PowerAction.OFF: 0x00,
    PowerAction.ON: 0x01,
    PowerAction.REBOOT: 0x03,  # hard reset; on a machine that is off, most BMCs power on
    PowerAction.SOFT_OFF: 0x05,  # ACPI soft shutdown
}
# boot flags device selector (Set System Boot Options parameter 5, data 2 bits 5:2)
_BOOT_SELECTOR = {BootDevice.PXE: 1, BootDevice.DISK: 2, BootDevice.CDROM: 5, BootDevice.BIOS: 6}
_SELECTOR_DEVICE = {
    **{code: device for device, code in _BOOT_SELECTOR.items()},
    3: BootDevice.DISK,  # hard disk, safe mode
    8: BootDevice.CDROM,  # remotely connected CD/DVD
}
_FRU_CHUNK = 224  # bytes per Read FRU Data (pyghmi's choice; most BMCs accept it)

#: BMCs known by their Get Device ID answer (its first 11 bytes: device id,
#: revision, firmware, IPMI version, device support, manufacturer, product)
#: to show a :class:`Quirk`, with who they are. Stock virtualbmc serves
#: pyghmi's ``Bmc`` defaults (device 0, revision 0, firmware 1.00, IPMI 2.0,
#: no device support, manufacturer 0 -- IANA's "unspecified" --, product 0;
#: hwlab's BMC answers device 0x20, product "LB"), and its
#: ``get_boot_device`` reads the *running* domain
#: (``virDomainGetXMLDesc`` without ``VIR_DOMAIN_XML_INACTIVE``) while its
#: ``set_boot_device`` writes the saved definition (``defineXML``): a set
#: while the VM runs reads back the device it booted with.
KNOWN_BMCS: dict[bytes, tuple[str, frozenset[Quirk]]] = {
    bytes([0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0]): (
        "virtualbmc (pyghmi's default identity)",
        frozenset({Quirk.BOOT_READS_RUNNING}),
    ),
}


def _after_first(pace: Callable[[Deadline], None]) -> Callable[[Deadline], None]:
    """``pace`` for every request but the first: that one has its turn
    already (the login's)."""
    first = True

    def turn(deadline: Deadline) -> None:
        nonlocal first
        if first:
            first = False
            return
        pace(deadline)

    return turn


@dataclasses.dataclass(frozen=True)
class ChassisStatus:
    """Get Chassis Status, byte 1 (current power state)."""

    power_on: bool
    overload: bool
    interlock: bool
    power_fault: bool
    control_fault: bool

    @classmethod
    def decode(cls, data: bytes) -> ChassisStatus:
        (current,) = struct.unpack_from("B", data)
        bits = [bool(current & (1 << n)) for n in range(5)]
        return cls(*bits)


class IPMIDriver(BMCDriver):
    """A node's BMC over IPMI 2.0 lanplus. Offers power (with soft power),
    boot device and inventory (FRU 0); virtual media and boot progress are
    not IPMI features.

    ``clock`` must advance in real time: deadlines are waited for on sockets.
    """

    name = "ipmi"
    #: class attributes, so a test (or a site with stricter BMCs) can set
    #: shorter ones; keepalive below idle
    session_idle = SESSION_REUSE_IDLE
    session_keepalive: ClassVar[float | None] = SESSION_KEEPALIVE
    #: one request at a time per BMC: one RMCP+ session answers in order,
    #: and small BMCs fall over on bursts (Supermicro field reports)
    max_requests = 1
    #: Ironic spaces ipmitool commands 5 s apart because each one logs in;
    #: a pooled session's commands need far less
    min_interval = 0.1
    capabilities = frozenset(
        {Capability.POWER, Capability.SOFT_POWER, Capability.BOOT_DEVICE, Capability.INVENTORY}
    )
    required_info = ("ipmi_address",)
    accepted_info = frozenset(
        {
            "ipmi_address",
            "ipmi_port",
            "ipmi_username",
            "ipmi_password",
            "ipmi_cipher_suite",
            "ipmi_priv_level",
        }
    )

    def __init__(
        self,
        node: str,
        info: DriverInfo,
        *,
        bmc_timeout: float = DEFAULT_BMC_TIMEOUT,
        clock: ClockFn | None = None,
        sleep: SleepFn | None = None,
    ) -> None:
        super().__init__(node, info, bmc_timeout=bmc_timeout, clock=clock, sleep=sleep)
        if not info.ipmi_address:
            raise InputError("is required", field="driver_info.ipmi_address", node=node)
        self._lock = threading.Lock()
        self._command: BoundedCommand | None = None
        # Logs the session out if the driver is dropped without close(), so a
        # forgotten driver does not hold a session (and a socket slot) forever.
        self._release: weakref.finalize[Any, Any] | None = None

    @property
    def address(self) -> str:
        host = self.info.ipmi_address or "?"
        host = f"[{host}]" if ":" in host else host
        return f"{host}:{self.info.ipmi_port}"

    @property
    def bmc_label(self) -> str:
        return f"ipmi:{self.address}"

    # -- the one place a call becomes a fault -------------------------------

    def _call(self, operation: Operation, deadline: Deadline, act: Callable[[CommandCall], T]) -> T:
        bound = self._deadline(deadline)
        start = self._clock()
        if bound.expired:
            raise self.too_late(operation, start)
        since, given = lateness.mark(), bound.left()  # the client's own lateness
        if not self._lock.acquire(timeout=bound.left()):
            raise self.node_busy(operation, start)
        cmd: BoundedCommand | None = None
        try:
            gate = self.gate

            def pace(deadline: Deadline, requests: int = 1) -> None:
                gate.pace(
                    deadline,
                    node=self.node,
                    operation=str(operation),
                    too_late=lambda: self.too_late(operation, start),
                    requests=requests,
                )

            # pace=False: the call's commands wait their own turns. A call
            # that logs in takes one turn for the login and its first command
            # together, back to back as every ipmitool invocation sends them:
            # spacing them too made each cold read wait the whole spacing
            # (0.1 s) after its login, which bounded a 10,000-node Ironic
            # power sync (8 workers) at 125 s however fast the rest was. The
            # turn is charged as two requests: the BMC counts the login too,
            # and a BMC that falls over above its rate (hwlab's `overload`)
            # saw 6 a second from reads paced at 4 a second plus a re-login.
            with gate.hold(bound, node=self.node, operation=str(operation), pace=False):
                login = self._command is None or not self._trusted(self._command)
                if login:
                    pace(bound, requests=2)
                cmd = self._session(bound)
                return act(cmd.within(bound, pace=_after_first(pace) if login else pace))
        except BMCFault as fault:
            if fault.elapsed is None:
                fault.elapsed = self._clock() - start
            lateness.judge(fault, since, given, elapsed=fault.elapsed)
            raise
        except BmaasError:
            raise
        except Exception as exc:
            # cmd is None while logging in: nothing was asked of a live session yet
            found = classify(
                exc, established=cmd is not None, command=cmd.last_command if cmd else None
            )
            if not found.keeps_session:
                self._discard()
            mapped = self.fault(
                found.cls,
                found.message,
                operation=operation,
                elapsed=self._clock() - start,
                status=found.status,
            )
            lateness.judge(mapped, since, given, elapsed=mapped.elapsed)
            raise mapped from exc
        finally:
            self._lock.release()

    def _session(self, deadline: Deadline) -> BoundedCommand:
        cmd = self._command
        if cmd is not None:
            if self._trusted(cmd):
                return cmd
            self._discard()
        info = self.info
        self.logins += 1  # counted when tried: a failed login still costs the BMC one
        user = (info.ipmi_username or "").encode("utf-8")
        # pyghmi must get bytes: str credentials make a second login to the
        # same BMC in this process hang (see bmaas.drivers.ipmi.session)
        cmd = open_command(
            info.ipmi_address or "",
            info.ipmi_port,
            user,
            info.ipmi_password.reveal_bytes(),
            privlevel=_PRIVILEGE[info.ipmi_priv_level],
            cipher_suite=info.ipmi_cipher_suite,
            deadline=deadline,
            clock=self._clock,
        )
        self._command = cmd
        self._release = weakref.finalize(self, cmd.close)
        if cmd.ipmi_session.downgraded and Quirk.IPMI_SUITE_3 not in self.quirks:
            # never silent: logged, and a quirk the node keeps (extra.bmc_quirks)
            # that `bmaas status check` warns about and `bmaas node show` lists
            LOG.warning(
                "%s: the BMC refused cipher suite 17; logged in with suite 3 "
                "(HMAC-SHA1, AES-128), as ipmi_cipher_suite: auto allows (%s)",
                self.node,
                Quirk.IPMI_SUITE_3,
            )
        if cmd.ipmi_session.downgraded:
            self.quirks.add(Quirk.IPMI_SUITE_3)
        return cmd

    def _trusted(self, cmd: BoundedCommand) -> bool:
        """A session that may be reused: alive, and not idle so long the BMC
        may have forgotten it."""
        return bool(cmd.ipmi_session.usable()) and (
            self._clock() - cmd.last_used < self.session_idle
        )

    def keepalive(self, *, deadline: Deadline) -> bool:
        """Get Device ID on the trusted session (never a login): the session's
        idle time starts again. ``False`` when there is no trusted session;
        a fault (the BMC did not answer) is raised as any call's."""
        cmd = self._command
        if cmd is None or not self._trusted(cmd):
            return False
        self._call(Operation.PROBE, deadline, lambda c: c.xraw_command(netfn=0x06, command=0x01))
        return True

    def _discard(self) -> None:
        release, self._release, self._command = self._release, None, None
        if release is not None:
            release()  # BoundedCommand.close, once

    def session_alive(self) -> bool:
        cmd = self._command
        return cmd is not None and bool(cmd.ipmi_session.usable())

    def close(self) -> None:
        """Log out (Close Session, not waited for). Safe to call twice."""
        with self._lock:
            self._discard()

    # -- power -------------------------------------------------------------------

    def _chassis_status(self, cmd: CommandCall) -> ChassisStatus:
        return ChassisStatus.decode(cmd.xraw_command(netfn=0x00, command=0x01)["data"])

    def probe(self, *, deadline: Deadline) -> BMCInfo:
        """Log in, read Get Device ID and the chassis power state."""

        def act(cmd: CommandCall) -> BMCInfo:
            dev = cmd.xraw_command(netfn=0x06, command=0x01)["data"]
            dev_id, revision, major, minor, version, support, mfg, product = struct.unpack_from(
                "<6B3sH", dev
            )
            self._learn_identity(bytes(dev[:11]))
            status = self._chassis_status(cmd)
            return BMCInfo(
                power_state=PowerState.ON if status.power_on else PowerState.OFF,
                firmware_version=f"{major & 0x7F}.{minor:02x}",
                extra={
                    "device_id": dev_id,
                    "device_revision": revision & 0x0F,
                    "ipmi_version": f"{version & 0x0F}.{version >> 4}",
                    "manufacturer_id": int.from_bytes(mfg, "little"),
                    "product_id": product,
                    "chassis_device": bool(support & 0x80),
                    "fru_device": bool(support & 0x08),
                    "power_fault": status.power_fault,
                    "power_control_fault": status.control_fault,
                },
            )

        return self._call(Operation.PROBE, deadline, act)

    def _learn_identity(self, device_id: bytes) -> None:
        """Add the quirks of a BMC known by its Get Device ID answer
        (:data:`KNOWN_BMCS`), logged as a warning the first time: never
        silent (the node keeps them, ``bmaas node show`` lists them)."""
        known = KNOWN_BMCS.get(device_id)
        if known is None:
            return
        who, quirks = known
        new = quirks - self.quirks
        if new:
            LOG.warning(
                "%s: the BMC answers as %s, which shows %s; handled as such",
                self.node,
                who,
                ", ".join(sorted(new)),
            )
            self.quirks |= new

    def get_power_state(self, *, deadline: Deadline) -> PowerState:
        """ON or OFF from Get Chassis Status. Raises ``PowerFailure`` when the
        BMC reports a main power fault or a power control fault (it commanded
        power and the system did not follow): the hardware is suspect."""

        def act(cmd: CommandCall) -> PowerState:
            status = self._chassis_status(cmd)
            if status.control_fault:
                raise self.fault(
                    PowerFailure,
                    "the BMC reports a power control fault (power commanded, state did not change)",
                    operation=Operation.POWER_GET,
                )
            if status.power_fault:
                raise self.fault(
                    PowerFailure,
                    "the BMC reports a main power fault",
                    operation=Operation.POWER_GET,
                )
            return PowerState.ON if status.power_on else PowerState.OFF

        return self._call(Operation.POWER_GET, deadline, act)

    def request_power(self, action: PowerAction, *, deadline: Deadline) -> None:
        if action not in _CHASSIS_CONTROL:
            raise self.unsupported(Operation.POWER_SET, f"{action} is not one IPMI request")
        # A reset must not be retransmitted: a BMC that acted and lost its
        # answer would reset the node twice. Idempotent actions may be.
        self._call(
            Operation.POWER_SET,
            deadline,
            lambda cmd: cmd.xraw_command(
                netfn=0x00,
                command=0x02,
                data=[_CHASSIS_CONTROL[action]],
                retry=action.idempotent,
            ),
        )

    def set_power_state(
        self,
        action: PowerAction,
        *,
        wait: bool = False,
        timeout: float | None = None,
        deadline: Deadline,
    ) -> PowerState:
        """As :meth:`BMCDriver.set_power_state`. IPMI has no soft reboot, so
        SOFT_REBOOT is :func:`bmaas.driver.soft_reboot`: a soft shutdown, a
        wait for off, then power on, as Ironic's IPMI drivers do it; both
        waits within ``timeout`` of the request."""
        if action is not PowerAction.SOFT_REBOOT:
            return super().set_power_state(action, wait=wait, timeout=timeout, deadline=deadline)
        timeout = self.bmc_timeout * 3 if timeout is None else timeout
        start = self._clock()

        def step(action: PowerAction, waits: bool) -> PowerState:
            self.request_power(action, deadline=self.call_deadline(deadline))
            if not waits:
                return self.get_power_state(deadline=self.call_deadline(deadline))
            return self.wait_for_power(
                action.target, timeout=timeout, deadline=deadline, start=start
            )

        return soft_reboot(step, wait=wait)

    # -- boot device -------------------------------------------------------------

    def _read_boot(self, cmd: CommandCall) -> BootSetting:
        data = cmd.xraw_command(netfn=0x00, command=0x09, data=[5, 0, 0])["data"]
        _, parameter, flags, selector = struct.unpack_from("4B", data)
        if parameter & 0x7F != 5:
            raise struct.error(f"asked for boot parameter 5, got {parameter & 0x7F}")
        if not flags & 0x80:
            # No override set: the firmware's boot order applies, which on a
            # server is the local disk. IPMI cannot say more.
            return BootSetting(BootDevice.DISK, persistent=True)
        device = _SELECTOR_DEVICE.get((selector >> 2) & 0x0F)
        if device is None:
            raise self.fault(
                UnsupportedOperation,
                f"boot device selector {(selector >> 2) & 0x0F:#x} is not one bmaas models",
                operation=Operation.BOOT_GET,
            )
        return BootSetting(device, persistent=bool(flags & 0x40))

    def get_boot_device(self, *, deadline: Deadline) -> BootSetting:
        return self._call(Operation.BOOT_GET, deadline, self._read_boot)

    def set_boot_device(
        self, device: BootDevice, *, persistent: bool = False, deadline: Deadline
    ) -> None:
        """Set System Boot Options (boot flags), then read them back in the
        same call: ``BootFailure`` when the BMC accepted and set another
        device; another persistence is a quirk (:meth:`check_boot_readback`).

        On a BMC known to read the boot device from the running machine
        (:attr:`Quirk.BOOT_READS_RUNNING`: stock virtualbmc) the call first
        reads the chassis power and, the node being on, the boot device it
        runs with: the read-back is judged against that too (two requests
        more, on such BMCs only)."""

        def act(cmd: CommandCall) -> None:
            running = None
            if Quirk.BOOT_READS_RUNNING in self.quirks and self._chassis_status(cmd).power_on:
                running = self._read_boot(cmd)
            flags = 0x80 | (0x40 if persistent else 0)
            data = [5, flags, _BOOT_SELECTOR[device] << 2, 0, 0, 0]
            cmd.xraw_command(netfn=0x00, command=0x08, data=data)
            self.check_boot_readback(
                BootSetting(device, persistent), self._read_boot(cmd), running=running
            )

        self._call(Operation.BOOT_SET, deadline, act)

    # -- inventory -----------------------------------------------------------------

    def get_inventory(self, *, deadline: Deadline, detail: bool = False) -> Inventory:
        """Manufacturer, model and serial from FRU 0 (IPMI has no standard
        record for CPU count or memory, nor a list of NICs or disks: ``detail``
        reads the same, the parts stay None). ``UnsupportedOperation`` when the
        BMC has no FRU 0."""

        def act(cmd: CommandCall) -> Inventory:
            info = pyghmi_fru.FRU(rawdata=self._read_fru(cmd)).info or {}
            fields = {k: v for k, v in info.items() if isinstance(v, str) and v}
            return Inventory(
                manufacturer=fields.get("Manufacturer") or fields.get("Board manufacturer"),
                model=fields.get("Product name") or fields.get("Board product name"),
                serial=fields.get("Serial Number") or fields.get("Board serial number"),
                extra={"fru": fields},
            )

        return self._call(Operation.INVENTORY_GET, deadline, act)

    @staticmethod
    def _read_fru(cmd: CommandCall) -> bytes:
        # Our own loop rather than pyghmi's FRU fetch: that one swallows 0xC3
        # (timeout in the BMC) and 0xC9 as "no FRU", hiding a busy BMC.
        size, _access = struct.unpack_from(
            "<HB", cmd.xraw_command(netfn=0x0A, command=0x10, data=[0])["data"]
        )
        raw = bytearray()
        chunk = min(_FRU_CHUNK, size)
        for _ in range(size // 4 + 16):  # bounded even if the BMC returns 1 byte at a time
            if len(raw) >= size or chunk == 0:
                break
            offset = len(raw)
            want = min(chunk, size - offset)
            response = cmd.raw_command(
                netfn=0x0A, command=0x11, data=[0, offset & 0xFF, offset >> 8, want]
            )
            if response.get("code") == 0xCA and chunk > 8:
                chunk //= 2  # too many bytes for this BMC: ask for fewer
                continue
            if "error" in response:
                raise IpmiException(response["error"], response.get("code", 0))
            data = bytes(response["data"])
            (count,) = struct.unpack_from("B", data)
            if count == 0:
                break
            raw += data[1 : 1 + count]
        return bytes(raw)
