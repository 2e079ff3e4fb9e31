"""``RedfishDriver``: the driver contract over sushy.

One driver holds one sushy client (and, with session auth, one Redfish session)
per node, created on first use and reused; :meth:`close` logs out. Every call
runs under one deadline shared by all the HTTP requests it makes, each request
is one attempt (see :mod:`drivers.redfish.connector`), and every failure
leaves through :func:`drivers.redfish.faults.map_exception`.

Requests per call, once connected (the lab tests count them at the server):
``get_power_state``/``get_boot_device``/``get_inventory``/``get_boot_progress``/
``probe``: 1 GET. ``set_power_state``: 1 GET (state and allowed resets) + 1 POST,
no POST when an idempotent action finds the node already there.
``set_boot_device``: 1 GET (sushy reads the ETag) + 1 PATCH + 1 GET read-back.
Virtual media: 1 GET of the CD slot + the POST(s) needed. The first call also
reads the service root, logs in (session auth) and finds the system.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import sushy
import sushy.auth as sushy_auth
from sushy.resources.manager.virtual_media import VirtualMedia
from sushy.resources.system.system import System

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
from bmaas.driver_info import FIELDS, DriverInfo
from bmaas.faults import (
    BmaasError,
    BMCBusy,
    BMCFault,
    BootFailure,
    InputError,
    UnclassifiedFault,
)
from bmaas.secrets import Secret
from drivers.redfish.connector import BoundedConnector
from drivers.redfish.faults import map_exception

__all__ = ["RedfishDriver"]

LOG = logging.getLogger(__name__)
T = TypeVar("T")

#: Redfish ResetType values for each action, in order of preference
RESET_TYPES: dict[PowerAction, tuple[sushy.ResetType, ...]] = {
    PowerAction.ON: (sushy.ResetType.ON, sushy.ResetType.FORCE_ON),
    PowerAction.OFF: (sushy.ResetType.FORCE_OFF,),
    PowerAction.SOFT_OFF: (sushy.ResetType.GRACEFUL_SHUTDOWN,),
    PowerAction.REBOOT: (sushy.ResetType.FORCE_RESTART, sushy.ResetType.POWER_CYCLE),
    PowerAction.SOFT_REBOOT: (sushy.ResetType.GRACEFUL_RESTART,),
}
POWER_STATES: dict[Any, PowerState] = {
    sushy.PowerState.ON: PowerState.ON,
    sushy.PowerState.OFF: PowerState.OFF,
    sushy.PowerState.POWERING_ON: PowerState.POWERING_ON,
    sushy.PowerState.POWERING_OFF: PowerState.POWERING_OFF,
}
BOOT_SOURCES: dict[BootDevice, sushy.BootSource] = {
    BootDevice.PXE: sushy.BootSource.PXE,
    BootDevice.DISK: sushy.BootSource.HDD,
    BootDevice.CDROM: sushy.BootSource.CD,
    BootDevice.BIOS: sushy.BootSource.BIOS_SETUP,
}
BOOT_DEVICES: dict[Any, BootDevice] = {
    **{source: device for device, source in BOOT_SOURCES.items()},
    # sushy asks SuperMicro X11/X12 for UsbCd when told Cd (virtual media only
    # boots from the "USB CD"), so the BMC reads back UsbCd.
    sushy.BootSource.USB_CD: BootDevice.CDROM,
}
_AUTH: dict[str, Callable[..., sushy_auth.AuthBase]] = {
    "basic": sushy_auth.BasicAuth,
    "session": sushy_auth.SessionAuth,
    "auto": sushy_auth.SessionOrBasicAuth,
}


class RedfishDriver(BMCDriver):
    """A node's BMC over Redfish (sushy), configured from Ironic's ``redfish_*`` keys."""

    name = "redfish"
    capabilities = frozenset(Capability)
    required_info: ClassVar[tuple[str, ...]] = (
        "redfish_address",
        "redfish_username",
        "redfish_password",
    )
    accepted_info = frozenset(k for k in FIELDS if k.startswith("redfish_"))
    #: Redfish sessions time out after SessionService.SessionTimeout (30 s at
    #: least by the standard, 30 min on common BMCs); sushy logs in again on a 401
    session_idle = 300.0

    def __init__(
        self,
        node: str,
        info: DriverInfo,
        *,
        bmc_timeout: float = DEFAULT_BMC_TIMEOUT,
        clock: Any = None,
        sleep: Any = None,
    ) -> None:
        super().__init__(node, info, bmc_timeout=bmc_timeout, clock=clock, sleep=sleep)
        for key in self.required_info:
            if not getattr(info, key):
                raise InputError("is required", field=f"driver_info.{key}", node=node)
        verify = info.redfish_verify_ca
        if isinstance(verify, str) and not os.path.exists(verify):
            raise InputError(
                f"CA bundle {verify!r} does not exist",
                field="driver_info.redfish_verify_ca",
                node=node,
            )
        if verify is False:
            LOG.warning(
                "%s: TLS certificate verification is off for %s (redfish_verify_ca=false): "
                "anyone on the path can impersonate this BMC",
                node,
                self.address,
            )
        self._lock = threading.Lock()
        self._conn: BoundedConnector | None = None
        self._root: sushy.Sushy | None = None
        self._system: System | None = None
        self._vmedia_path: str | None = None
        self._fetched = False  # the system was read moments ago, by _connect

    @property
    def address(self) -> str:
        return str(self.info.redfish_address)

    # -- the one place calls run ------------------------------------------------

    def _call(
        self,
        operation: Operation,
        deadline: Deadline,
        act: Callable[[], T],
        *,
        read: Operation,
    ) -> T:
        bound = self._deadline(deadline)
        start = self._clock()
        if bound.expired:
            raise self.too_late(operation, start)
        build = functools.partial(self.fault, operation=operation)

        def elapsed() -> float:
            return self._clock() - start

        if not self._lock.acquire(timeout=bound.left()):
            raise build(BMCBusy, "another call to this BMC is still running", elapsed=elapsed())
        try:
            conn = self._connector()
            with conn.within(bound, read):
                if self._system is None:
                    self._connect(conn)
                return act()
        except BMCFault as fault:  # raised by act() itself (BootFailure, unsupported)
            fault.elapsed = elapsed()
            raise
        except BmaasError:
            raise
        except Exception as exc:  # the driver edge: everything leaves as a bmaas fault
            mapped = map_exception(
                exc,
                functools.partial(build, elapsed=elapsed()),
                node=self.node,
                system=self._system_path(),
            )
            if isinstance(mapped, UnclassifiedFault):
                LOG.warning("%s: unclassified Redfish failure: %s", self.node, mapped)
            else:
                LOG.debug("%s: %s", self.node, mapped)
            raise mapped from exc
        finally:
            self._fetched = False  # "just read" holds within one call only
            self._lock.release()

    def _connector(self) -> BoundedConnector:
        if self._conn is None:
            self._conn = BoundedConnector(
                self.address,
                verify=self.info.redfish_verify_ca,
                bmc_timeout=self.bmc_timeout,
                clock=self._clock,
                on_login=self._count_login,
            )
        return self._conn

    def _count_login(self) -> None:
        self.logins += 1

    def session_alive(self) -> bool:
        return self._root is not None

    def _connect(self, conn: BoundedConnector) -> None:
        """Read the service root and log in (once), then find the system.

        The logged-in client is kept even when finding the system fails, so a
        misconfigured node does not open a session per call: BMCs allow few.
        """
        if self._root is None:
            # Secret() again: a DriverInfo built by hand (not parsed) may hold a str.
            password = Secret(self.info.redfish_password).reveal()
            auth = _AUTH[self.info.redfish_auth_type](
                username=self.info.redfish_username, password=password
            )
            if self.info.redfish_auth_type == "basic":
                self._count_login()  # no session POST: the credentials ride on each request
            with conn.reading(Operation.PROBE):
                self._root = sushy.Sushy(self.address, auth=auth, connector=conn)
        root = self._root
        path = self._system_path(root)
        if path is None:  # exactly one system, or InputError
            with conn.reading(Operation.PROBE):
                members = root.get_system_collection().members_identities
            if len(members) != 1:
                raise sushy.exceptions.UnknownDefaultError(
                    entity="ComputerSystem", error=f"{len(members)} systems"
                )
            path = members[0]
        # This GET serves the call's own read (power.get, boot.get, ...).
        self._system = System(conn, path, redfish_version=root.redfish_version, root=root)
        self._fetched = True

    def _system_path(self, root: sushy.Sushy | None = None) -> str | None:
        if self._system is not None:
            return str(self._system.path)
        wanted = self.info.redfish_system_id
        if wanted is None or wanted.startswith("/"):
            return wanted
        # A bare id ("1", "System.Embedded.1") lives in the systems collection.
        systems = (root.json.get("Systems") or {}) if root is not None else {}
        base = systems.get("@odata.id") or "/redfish/v1/Systems"
        return f"{base.rstrip('/')}/{wanted}"

    def _fresh_system(self) -> System:
        """The system as the BMC has it now: one GET (none right after connecting)."""
        assert self._system is not None
        if self._fetched:
            self._fetched = False
        else:
            # refresh(force=True) would also re-read every cached sub-resource
            # (managers, virtual media: five more GETs); stale-marking is enough.
            self._system.invalidate()
            self._system.refresh(force=False)
        return self._system

    # -- required core ------------------------------------------------------------

    def probe(self, *, deadline: Deadline) -> BMCInfo:
        def act() -> BMCInfo:
            system = self._fresh_system()
            assert self._root is not None
            return BMCInfo(
                power_state=POWER_STATES.get(system.power_state, PowerState.UNKNOWN),
                manufacturer=system.manufacturer,
                extra={"redfish_version": self._root.redfish_version, "system": system.path},
            )

        return self._call(Operation.PROBE, deadline, act, read=Operation.PROBE)

    def get_power_state(self, *, deadline: Deadline) -> PowerState:
        def act() -> PowerState:
            system, conn = self._system, self._conn
            assert system is not None
            assert conn is not None
            if self._fetched:  # read moments ago by _connect
                return POWER_STATES.get(system.power_state, PowerState.UNKNOWN)
            # One GET and one field: a power sync reads every node every pass,
            # and sushy's full re-parse of the system was half of such a read.
            # The cached System is marked stale, so other calls re-read it.
            system.invalidate()
            body = conn.get(system.path).json()  # not JSON: BMCProtocolError at the edge
            try:
                state = sushy.PowerState(body.get("PowerState") if isinstance(body, dict) else None)
            except ValueError:  # absent or not a Redfish power state: cannot tell
                return PowerState.UNKNOWN
            return POWER_STATES.get(state, PowerState.UNKNOWN)

        return self._call(Operation.POWER_GET, deadline, act, read=Operation.POWER_GET)

    def request_power(self, action: PowerAction, *, deadline: Deadline) -> None:
        def act() -> None:
            system = self._fresh_system()
            state = POWER_STATES.get(system.power_state, PowerState.UNKNOWN)
            heading = {
                PowerState.POWERING_ON: PowerState.ON,
                PowerState.POWERING_OFF: PowerState.OFF,
            }
            if action.idempotent and heading.get(state, state) == action.target:
                LOG.debug("%s: already %s, not sending %s", self.node, state, action)
                return
            allowed = system.get_allowed_reset_system_values()
            choice = next((t for t in RESET_TYPES[action] if t in allowed), None)
            if choice is None:
                wanted = " or ".join(t.value for t in RESET_TYPES[action])
                offered = ", ".join(sorted(t.value for t in allowed)) or "none"
                raise self.unsupported(
                    Operation.POWER_SET,
                    f"{action} needs ResetType {wanted}; the system allows {offered}",
                )
            system.reset_system(choice)

        self._call(Operation.POWER_SET, deadline, act, read=Operation.POWER_GET)

    def get_boot_device(self, *, deadline: Deadline) -> BootSetting:
        return self._call(
            Operation.BOOT_GET,
            deadline,
            lambda: self._boot_setting(self._fresh_system()),
            read=Operation.BOOT_GET,
        )

    def _boot_setting(self, system: System) -> BootSetting:
        boot = system.boot
        enabled = getattr(boot, "enabled", None)
        target = getattr(boot, "target", None)
        if enabled in (None, sushy.BootSourceOverrideEnabled.DISABLED) or target in (
            None,
            sushy.BootSource.NONE,
        ):
            # No override: the node follows its own boot order, i.e. its disk.
            return BootSetting(BootDevice.DISK, persistent=True)
        device = BOOT_DEVICES.get(target)
        if device is None:
            raise self.unsupported(
                Operation.BOOT_GET, f"boot override {target.value!r} has no bmaas equivalent"
            )
        return BootSetting(device, persistent=enabled is sushy.BootSourceOverrideEnabled.CONTINUOUS)

    def set_boot_device(
        self, device: BootDevice, *, persistent: bool = False, deadline: Deadline
    ) -> None:
        wanted = BootSetting(device, persistent)

        def act() -> None:
            assert self._system is not None
            enabled = (
                sushy.BootSourceOverrideEnabled.CONTINUOUS
                if persistent
                else sushy.BootSourceOverrideEnabled.ONCE
            )
            self._system.set_system_boot_options(BOOT_SOURCES[device], enabled=enabled)
            self._fetched = False
            applied = self._boot_setting(self._fresh_system())
            if applied != wanted:
                raise self.fault(
                    BootFailure,
                    f"asked for {device} (persistent={persistent}), BMC reads back "
                    f"{applied.device} (persistent={applied.persistent})",
                    operation=Operation.BOOT_SET,
                )

        self._call(Operation.BOOT_SET, deadline, act, read=Operation.BOOT_GET)

    # -- optional capabilities ------------------------------------------------------

    def _cd_slot(self) -> VirtualMedia:
        """The CD/DVD slot of the system's manager (or of the system itself)."""
        assert self._system is not None
        assert self._conn is not None
        if self._vmedia_path is None:
            with self._conn.reading(Operation.INVENTORY_GET):
                self._vmedia_path = _find_cd(self._system)
            if self._vmedia_path is None:
                raise self.unsupported(
                    Operation.VMEDIA_INSERT, "the BMC has no CD/DVD virtual media slot"
                )
        return VirtualMedia(self._conn, self._vmedia_path, root=self._root)

    def insert_virtual_media(self, url: str, *, deadline: Deadline) -> None:
        def act() -> None:
            slot = self._cd_slot()
            if slot.inserted and slot.image == url:
                return
            if slot.inserted:
                slot.eject_media()
            slot.insert_media(url, inserted=True, write_protected=True)

        self._call(Operation.VMEDIA_INSERT, deadline, act, read=Operation.INVENTORY_GET)

    def eject_virtual_media(self, *, deadline: Deadline) -> None:
        def act() -> None:
            slot = self._cd_slot()
            if slot.inserted:
                slot.eject_media()

        self._call(Operation.VMEDIA_EJECT, deadline, act, read=Operation.INVENTORY_GET)

    def get_inventory(self, *, deadline: Deadline) -> Inventory:
        def act() -> Inventory:
            system = self._fresh_system()
            cpus = (system.json.get("ProcessorSummary") or {}).get("Count")
            gib = system.memory_summary.size_gib if system.memory_summary else None
            return Inventory(
                manufacturer=system.manufacturer,
                model=system.model,
                serial=system.serial_number or None,
                cpus=cpus if isinstance(cpus, int) else None,
                memory_mb=int(gib * 1024) if gib is not None else None,
                extra={"uuid": system.uuid, "system": system.path},
            )

        return self._call(Operation.INVENTORY_GET, deadline, act, read=Operation.INVENTORY_GET)

    def get_boot_progress(self, *, deadline: Deadline) -> str | None:
        def act() -> str | None:
            progress = self._fresh_system().json.get("BootProgress") or {}
            state = progress.get("LastState")
            if state == "OEM":
                return progress.get("OemLastState") or state
            return state if isinstance(state, str) else None

        return self._call(
            Operation.BOOT_PROGRESS_GET, deadline, act, read=Operation.BOOT_PROGRESS_GET
        )

    def close(self) -> None:
        """Log out (one bounded request) and drop the connection. Safe twice."""
        with self._lock:
            root, conn = self._root, self._conn
            self._root = self._system = self._vmedia_path = self._conn = None
        if conn is None:
            return
        # Detach sushy's auth first: Sushy.__del__ would otherwise log out
        # again at garbage collection, whenever that happens.
        auth = root._auth if root is not None else None
        if root is not None:
            root._auth = None
        try:
            if auth is not None:
                with conn.within(
                    Deadline.after(self.bmc_timeout, clock=self._clock), Operation.LOGIN
                ):
                    auth.close()
        except Exception as exc:  # logging out is a courtesy; the session expires anyway
            LOG.info("%s: could not close the Redfish session: %s", self.node, type(exc).__name__)
        finally:
            conn.close()


def _find_cd(system: System) -> str | None:
    wanted = {sushy.VirtualMediaType.CD, sushy.VirtualMediaType.DVD}
    collections = [manager.virtual_media for manager in system.managers]
    if not collections and system.json.get("VirtualMedia"):
        collections = [system.virtual_media]
    for collection in collections:
        for slot in collection.get_members():
            if wanted & set(slot.media_types or ()):
                return str(slot.path)
    return None
