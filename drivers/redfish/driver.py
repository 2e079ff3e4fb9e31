"""``RedfishDriver``: the driver contract over sushy.

One driver per node; the drivers of the nodes behind one Redfish service
(same root URL, credentials and TLS settings) share one sushy client and so
one session (:mod:`bmaas.drivers.redfish.service`), created on first use and
reused; the last :meth:`close` logs out. Every call passes the BMC's gate
(:mod:`bmaas.gate`: at most ``max_requests`` in flight per service, every
HTTP request ``min_interval`` after the previous one). Every call
runs under one deadline shared by all the HTTP requests it makes, each request
is one attempt (see :mod:`bmaas.drivers.redfish.connector`), and every failure
leaves through :func:`bmaas.drivers.redfish.faults.map_exception`.

Requests per call, once connected (the lab tests count them at the server):
``get_power_state``/``get_boot_device``/``get_inventory``/``get_boot_progress``/
``probe``: 1 GET (``get_power_state`` through the lean read of
:mod:`bmaas.drivers.redfish.lean`; 2 once per service if it advertises ``$select``
and then refuses it). ``set_power_state``: 1 GET (state and allowed resets,
:mod:`bmaas.drivers.redfish.power`) + 1 POST, no POST when an idempotent action
finds the node already there, 1 more GET when the BMC refuses an idempotent
action with 400/409 (it may be there), 1 GET of the reset's ActionInfo once per
driver where only it lists the types (one it cannot read: every type may be
sent, the BMC decides), 1 PATCH before a power-on or reboot where
a persistent override is re-sent (no ``Continuous``); a reboot where the system
offers only an off and an on: 2 POSTs and 1 lean GET or more between them
(until the node reads off).
``set_boot_device`` and ``set_http_boot`` (UEFI HTTP boot,
:mod:`bmaas.drivers.redfish.boot`): 1 GET (allowed values and
ETag) + 1 PATCH + 1 GET read-back; a 412/428 adds 1 GET + 1 PATCH
(:mod:`bmaas.drivers.redfish.preconditions`); ``check_http_boot``: 1 GET.
Virtual media (:mod:`bmaas.drivers.redfish.vmedia`): the first call finds the CD
slots (each Manager, collection and slot read once); insert: 1 GET of the slot,
an eject (1 request + 1 GET) if it holds media, the insert, and 1 GET read-back
or more until the image shows; eject: 1 GET per CD slot + 1 request per slot
holding media that bmaas inserted (or the caller names). The first call also
reads the service root, logs in (session auth) and finds the system.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

import sushy
import sushy.auth as sushy_auth
import sushy.exceptions as sushy_exc
from sushy.resources.system.system import System

from bmaas import lateness
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
)
from bmaas.driver_info import FIELDS, DriverInfo
from bmaas.drivers.redfish import boot as boot_rules
from bmaas.drivers.redfish import lifecycle
from bmaas.drivers.redfish import power as power_rules
from bmaas.drivers.redfish import update as update_rules
from bmaas.drivers.redfish.connector import BoundedConnector
from bmaas.drivers.redfish.descriptors import keepable_services
from bmaas.drivers.redfish.faults import (
    NotSent,
    answer_text,
    map_exception,
    map_task,
    may_be_already_there,
    rule_for,
)
from bmaas.drivers.redfish.preconditions import Resource, patch, read
from bmaas.drivers.redfish.service import SERVICES, RedfishService, ServiceKey
from bmaas.drivers.redfish.vmedia import (
    Insertion,
    Slot,
    VirtualMediaSlots,
    find_cd_slots,
    managers_of,
)
from bmaas.faults import (
    BmaasError,
    BMCBusy,
    BMCFault,
    BootFailure,
    InputError,
    PowerFailure,
    PowerPending,
    Resume,
    SettingsNotApplied,
    UnclassifiedFault,
    UnsupportedOperation,
)
from bmaas.hardware import (
    APPLY_TIMES,
    AttributeInfo,
    BiosSettings,
    FirmwareComponent,
    TaskStatus,
    UpdateTask,
    check_bios_changes,
)
from bmaas.secrets import Secret
from bmaas.tlspolicy import TLSPolicy, transport_warning

__all__ = ["RedfishDriver"]

LOG = logging.getLogger(__name__)
T = TypeVar("T")

POWER_STATES: dict[Any, PowerState] = {
    sushy.PowerState.ON: PowerState.ON,
    sushy.PowerState.OFF: PowerState.OFF,
    sushy.PowerState.POWERING_ON: PowerState.POWERING_ON,
    sushy.PowerState.POWERING_OFF: PowerState.POWERING_OFF,
}
#: what the power read asks for: the state, and the status whose Health
#: Ironic's health monitoring reads on the same sync pass (one GET for both)
_LEAN_FIELDS = ("PowerState", "Status")
#: seconds a wait keeps for the request after it (its turn at the gate, its answer)
_RESERVE = 0.25
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
    accepted_info = frozenset(k for k in FIELDS if k.startswith("redfish_")) | {"boot_mode"}
    #: Redfish sessions time out after SessionService.SessionTimeout (30 s at
    #: least by the standard, 30 min on common BMCs); sushy logs in again on a 401
    session_idle = 300.0
    #: requests in flight to one Redfish service (every system behind it)
    max_requests = 4
    #: seconds between HTTP request starts on one service
    min_interval = 0.05
    #: the power read keeps its HTTP connection open while the process holds
    #: at most this many services (one socket each). Connections live on
    #: descriptors above 1024, where pyghmi's select() never looks, so the
    #: cap is the room the descriptor limit leaves there (18,700 at a limit
    #: of 20,000); 256 where nothing can move (bmaas.drivers.redfish.descriptors)
    keep_alive_services = keepable_services()
    #: the process's shared service clients (tests inject their own)
    services = SERVICES
    #: seconds between read-backs of a virtual media insert that does not
    #: show yet (iDRAC10 reads empty for seconds after a 204)
    vmedia_poll_interval = 0.5
    #: seconds between power reads of a reboot made of an off and an on
    power_poll_interval = 0.5

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
        #: the TLS the BMC must meet (driver_info over BMAAS_REDFISH_TLS_* over TLS 1.2)
        self.tls = TLSPolicy.of(
            min_version=info.redfish_tls_min_version, ciphers=info.redfish_tls_ciphers
        )
        warning = transport_warning(self.address, verify)
        if warning:
            LOG.warning("%s: %s", node, warning)
        self._lock = threading.Lock()
        self._svc: RedfishService | None = None
        self._system: System | None = None
        self._vmedia_paths: list[str] | None = None
        #: the image URLs this driver inserted (and did not eject since)
        self._inserted: set[str] = set()
        #: a persistent boot device this BMC cannot keep: sent once again
        #: before every power-on or reboot (Quirk.BOOT_NO_CONTINUOUS)
        self._boot_again: BootDevice | boot_rules.HttpBoot | None = None
        #: the ResetTypes the reset's ActionInfo lists (read once)
        self._action_info: list[str] | None = None
        self._fetched = False  # the system was read moments ago, by _connect
        #: the BIOS attribute registry (name, attributes; None: not published), found once
        self._bios_registry: tuple[str, dict[str, AttributeInfo] | None] | None = None
        #: the system's Status.Health as the last power read saw it, and when
        #: (this driver's clock): :meth:`get_health` answers from it while fresh
        self._health: tuple[str | None, float] | None = None

    @property
    def address(self) -> str:
        return str(self.info.redfish_address)

    @property
    def bmc_label(self) -> str:
        """The service root: every system behind it is one BMC to the gate."""
        return f"redfish:{self.address.rstrip('/')}"

    @property
    def _conn(self) -> BoundedConnector | None:
        return self._svc.conn if self._svc is not None else None

    @property
    def _root(self) -> sushy.Sushy | None:
        return self._svc.root if self._svc is not None else None

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
        since, given = lateness.mark(), bound.left()  # the client's own lateness
        build = functools.partial(self.fault, operation=operation)

        def elapsed() -> float:
            return self._clock() - start

        gate = self.gate  # before the lock: a bad BMAAS_BMC_* setting holds nothing
        if not self._lock.acquire(timeout=bound.left()):
            raise self.node_busy(operation, start)

        def pace(deadline: Deadline) -> None:
            gate.pace(
                deadline,
                node=self.node,
                operation=str(operation),
                too_late=lambda: self.too_late(operation, start),
            )

        try:
            # pace=False: the connector paces every HTTP request of the call
            with gate.hold(bound, node=self.node, operation=str(operation), pace=False):
                service = self._service()
                conn = service.conn
                with conn.within(bound, read, pace=pace, on_login=self._count_login):
                    if self._system is None:
                        self._connect(service, bound)
                    return act()
        except BMCFault as fault:  # raised by act() itself (BootFailure, unsupported)
            fault.elapsed = elapsed()
            lateness.judge(fault, since, given, elapsed=fault.elapsed)
            raise
        except BmaasError:
            raise
        except NotSent as exc:  # no request of this call went out (BoundedConnector.within)
            raise self.too_late(operation, start) from exc
        except Exception as exc:  # the driver edge: everything leaves as a bmaas fault
            mapped = map_exception(
                exc,
                functools.partial(build, elapsed=elapsed()),
                node=self.node,
                system=self._system_path(),
            )
            lateness.judge(mapped, since, given, elapsed=getattr(mapped, "elapsed", None))
            retry_after = getattr(mapped, "retry_after", None)
            if retry_after:
                gate.defer(retry_after)  # every system of the service waits, not only this one
            if isinstance(mapped, UnclassifiedFault):
                LOG.warning("%s: unclassified Redfish failure: %s", self.node, mapped)
            else:
                LOG.debug("%s: %s", self.node, mapped)
            raise mapped from exc
        finally:
            self._fetched = False  # "just read" holds within one call only
            self._lock.release()

    def _service(self) -> RedfishService:
        """This node's share of its service's client (taken on first use)."""
        if self._svc is None:
            self._svc = self.services.acquire(
                ServiceKey.of(self.info),
                lambda: BoundedConnector(
                    self.address,
                    verify=self.info.redfish_verify_ca,
                    bmc_timeout=self.bmc_timeout,
                    clock=self._clock,
                    max_body_bytes=self.info.redfish_max_body_bytes,
                    tls=self.tls,
                ),
            )
        return self._svc

    def _count_login(self) -> None:
        self.logins += 1
        if self._svc is not None:
            self._svc.logins += 1

    def session_alive(self) -> bool:
        return self._root is not None

    def _connect(self, service: RedfishService, bound: Deadline) -> None:
        """Read the service root and log in (once per service, whichever
        node's call comes first), then find this node's system.

        The logged-in client is kept even when finding the system fails, so a
        misconfigured node does not open a session per call: BMCs allow few.
        """
        conn = service.conn
        if service.root is None:
            if not service.login_lock.acquire(timeout=bound.left()):
                raise self.slot_timeout(
                    "another node's call is still logging in to this service", Operation.LOGIN, None
                )
            try:
                if service.root is None:
                    # Secret() again: a DriverInfo built by hand may hold a str.
                    password = Secret(self.info.redfish_password).reveal()
                    auth = _AUTH[self.info.redfish_auth_type](
                        username=self.info.redfish_username, password=password
                    )
                    if self.info.redfish_auth_type == "basic":
                        self._count_login()  # no session POST: credentials ride on each request
                    with conn.reading(Operation.PROBE):
                        service.root = sushy.Sushy(self.address, auth=auth, connector=conn)
                    features = service.root.json.get("ProtocolFeaturesSupported") or {}
                    conn.lean.select = features.get("SelectQuery") is True
            finally:
                service.login_lock.release()
        root = service.root
        assert root is not None
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
                self._note_health(system.json.get("Status"))
                return POWER_STATES.get(system.power_state, PowerState.UNKNOWN)
            body = self._lean_system(system, conn)
            try:
                state = sushy.PowerState(body.get("PowerState"))
            except ValueError:  # absent or not a Redfish power state: cannot tell
                return PowerState.UNKNOWN
            return POWER_STATES.get(state, PowerState.UNKNOWN)

        return self._call(Operation.POWER_GET, deadline, act, read=Operation.POWER_GET)

    def _lean_system(self, system: System, conn: BoundedConnector) -> dict[str, Any]:
        """One lean GET of the system's power state and status
        (bmaas.drivers.redfish.lean: a power sync reads every node every
        pass); the health it carries is kept for :meth:`get_health`. The
        cached System is marked stale, so other calls re-read it."""
        system.invalidate()
        conn.lean.keep_alive = self.services.open_services() <= self.keep_alive_services
        body = conn.read_fields(system.path, _LEAN_FIELDS)
        self._note_health(body.get("Status"))
        return body

    def _note_health(self, status: Any) -> None:
        health = status.get("Health") if isinstance(status, dict) else None
        self._health = (health if isinstance(health, str) else None, self._clock())

    def get_health(self, *, deadline: Deadline, max_age: float = 0.0) -> str | None:
        """The system's ``Status.Health`` (``OK``, ``Warning``, ``Critical``;
        None when the system does not say). Within ``max_age`` seconds of a
        power read it is that read's (the same GET: no request); else one
        lean GET, the power read's. Idempotent."""
        known = self._health
        if known is not None and self._clock() - known[1] <= max_age:
            return known[0]

        def act() -> str | None:
            system, conn = self._system, self._conn
            assert system is not None
            assert conn is not None
            if self._fetched:
                self._note_health(system.json.get("Status"))
            else:
                self._lean_system(system, conn)
            assert self._health is not None
            return self._health[0]

        # the same GET as a power read, named as one (hwlab, the fault rules)
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
            reset = (system.json.get("Actions") or {}).get("#ComputerSystem.Reset")
            if not isinstance(reset, dict) or not reset.get("target"):
                raise self.unsupported(
                    Operation.POWER_SET, "the system has no ComputerSystem.Reset"
                )
            offer = power_rules.offered(self._reset_values(reset))
            choice = power_rules.choose(action, offer)
            if choice == power_rules.PUSH_BUTTON and state is not PowerState.ON:
                choice = None  # a press on a node that is not on may power it on
            steps = power_rules.composed(action, offer) if choice is None else None
            if choice is None and steps is None:
                wanted = " or ".join(power_rules.RESET_TYPES[action])
                shown = ", ".join(sorted(offer)) or "none"
                raise self.unsupported(
                    Operation.POWER_SET,
                    f"{action} needs ResetType {wanted}; the system allows {shown}"
                    + (f" (power reads {state})" if power_rules.PUSH_BUTTON in offer else ""),
                )
            if self._boot_again is not None and action.target is PowerState.ON:
                # no persistent override on this BMC: once again before this boot
                assert self._conn is not None
                etag = system.json.get("@odata.etag")
                resource = Resource(
                    system.path, system.json, etag if isinstance(etag, str) else None
                )
                self._send_boot(resource, self._boot_again, persistent=True)
            if steps is not None:
                self._reset_in_two(system, reset["target"], steps, state, deadline)
                return
            try:
                assert self._conn is not None
                self._conn.post(reset["target"], data={"ResetType": choice})
            except sushy.exceptions.HTTPError as exc:
                if not (action.idempotent and may_be_already_there(exc)):
                    raise
                # iDRAC's 409 PSU501, iLO's 400 InvalidOperationForSystemState:
                # the node may already be there (a resent On whose first copy
                # landed). One GET decides; anything else is the answer's fault.
                try:
                    now = POWER_STATES.get(self._fresh_system().power_state, PowerState.UNKNOWN)
                except Exception:
                    raise exc from None
                if heading.get(now, now) != action.target:
                    raise
                LOG.info(
                    "%s: BMC refused %s with HTTP %s but the node is already %s: done",
                    self.node,
                    action,
                    exc.status_code,
                    now,
                )

        self._call(Operation.POWER_SET, deadline, act, read=Operation.POWER_GET)

    def _reset_in_two(
        self,
        system: System,
        target: str,
        steps: tuple[str, str],
        state: PowerState,
        deadline: Deadline,
    ) -> None:
        """A reboot where the system offers only an off and an on
        (:data:`power.COMPOSED`): the off (unless the node reads off), a
        wait until the node reads off, then the on -- all under ``deadline``.

        The node still reading on when the hardware's window (three BMC
        timeouts, as :meth:`wait_for_power`) is over is a ``PowerFailure``;
        the deadline ending first is ``PowerPending`` (the off was taken, the
        on not sent yet: the caller re-reads before a retry), never counted."""
        off, on = steps
        conn = self._conn
        assert conn is not None
        if state is not PowerState.OFF:
            start = self._clock()
            conn.post(target, data={"ResetType": off})
            window_end = start + 3 * self.bmc_timeout
            reads = 0
            while True:
                reads += 1
                now = self._lean_system(system, conn).get("PowerState")
                if now == sushy.PowerState.OFF.value:
                    break
                if self._clock() >= window_end:
                    raise self.fault(
                        PowerFailure,
                        f"reboot as {off} then {on}: power still reads {now}, not off, "
                        f"{self._clock() - start:.2f}s after {off}; {on} not sent",
                        operation=Operation.POWER_SET,
                    )
                if deadline.left() <= self.power_poll_interval + _RESERVE:
                    raise PowerPending(
                        f"reboot as {off} then {on}: the BMC took {off} "
                        f"{self._clock() - start:.2f}s ago and the node still read {now} "
                        f"after {reads} read(s) when the deadline came; {on} not sent",
                        node=self.node,
                        driver=self.name,
                        operation=str(Operation.POWER_SET),
                        address=self.bmc_label,
                        waited=self._clock() - start,
                    )
                self._sleep(self.power_poll_interval)
        conn.post(target, data={"ResetType": on})

    def _reset_values(self, reset: dict[str, Any]) -> list[str] | None:
        """The ResetTypes the action lists, else its ActionInfo (Supermicro;
        read once per driver), else None (sushy's rule: then every one, and
        the BMC's answer decides). An ActionInfo that cannot be read (404,
        not JSON: :data:`power.UNREADABLE`) says nothing: None, remembered."""
        values = power_rules.listed(reset)
        info = reset.get("@Redfish.ActionInfo")
        if values is not None or not isinstance(info, str):
            return values
        if self._action_info is None:
            assert self._conn is not None
            try:
                body = read(self._conn, info).body
            except power_rules.UNREADABLE as exc:
                LOG.info(
                    "%s: the reset's ActionInfo %s cannot be read (%s): every reset type "
                    "is asked for, the BMC's answer decides",
                    self.node,
                    info,
                    getattr(exc, "status_code", None) or type(exc).__name__,
                )
                body = {}
            self._action_info = power_rules.from_action_info(body) or []
        return self._action_info or None

    def get_boot_device(self, *, deadline: Deadline) -> BootSetting:
        return self._call(
            Operation.BOOT_GET,
            deadline,
            lambda: self._boot_setting(self._fresh_system()),
            read=Operation.BOOT_GET,
        )

    def _boot_setting(self, system: System) -> BootSetting:
        return boot_rules.setting_of(system.json.get("Boot") or {})

    def set_boot_device(
        self, device: BootDevice, *, persistent: bool = False, deadline: Deadline
    ) -> None:
        """Set the override as the service allows it (:mod:`bmaas.drivers.redfish.boot`):
        a persistent one where ``Continuous`` is not allowed is sent as once,
        and again before every power-on or reboot this driver makes."""
        self._set_override(device, persistent, deadline)

    def set_http_boot(
        self, uri: str | None, *, persistent: bool = False, deadline: Deadline
    ) -> None:
        """UEFI HTTP boot from ``uri`` (None: the URI DHCP hands out):
        ``BootSourceOverrideTarget`` ``UefiHttp`` with ``HttpBootUri``, as
        :meth:`set_boot_device` sets an override (the same requests, the
        same once-for-persistent rule). ``UnsupportedOperation`` before
        anything is sent when the system does not list ``UefiHttp``;
        ``BootFailure`` when the read-back shows another target or URI."""
        self._set_override(boot_rules.HttpBoot(uri), persistent, deadline)

    def check_http_boot(self, *, deadline: Deadline) -> None:
        """Whether the system takes UEFI HTTP boot as :meth:`set_http_boot`
        sends it (a boot override, ``UefiHttp`` among its allowed targets,
        the node's boot mode allowed): ``UnsupportedOperation`` saying what
        it offers instead. What Ironic's ``redfish-https`` checks in its
        ``validate``. Writes nothing; idempotent; 1 GET."""

        def act() -> None:
            self._override_body(self._fresh_system().json, boot_rules.HttpBoot(None), False)

        self._call(Operation.BOOT_GET, deadline, act, read=Operation.BOOT_GET)

    def _set_override(
        self, device: BootDevice | boot_rules.HttpBoot, persistent: bool, deadline: Deadline
    ) -> None:
        def act() -> None:
            system, conn = self._system, self._conn
            assert system is not None
            assert conn is not None
            # the override's allowed values and the system's ETag
            target, enabled = self._send_boot(read(conn, system.path), device, persistent)
            self._boot_again = device if persistent and enabled == boot_rules.ONCE else None
            if self._boot_again is not None:
                self._learn(
                    Quirk.BOOT_NO_CONTINUOUS,
                    "no persistent boot override: sent once, "
                    "and again before every power-on or reboot",
                )
            system.invalidate()
            self._fetched = False
            boot = read(conn, system.path).body.get("Boot") or {}
            applied = boot_rules.setting_of(boot, just_sent=target)
            if (
                boot.get("BootSourceOverrideEnabled") == boot_rules.DISABLED
                and boot.get("BootSourceOverrideTarget") == target
            ):
                self._learn(
                    Quirk.BOOT_ONCE_READS_DISABLED,
                    f"reads back {target} with the override Disabled: taken once, not a fault",
                )
            shown = device.device if isinstance(device, boot_rules.HttpBoot) else device
            sent = BootSetting(shown, persistent=enabled == boot_rules.CONTINUOUS)
            self.check_boot_readback(sent, applied)
            if isinstance(device, boot_rules.HttpBoot) and device.uri is not None:
                self._check_http_uri(device.uri, boot)

        self._call(Operation.BOOT_SET, deadline, act, read=Operation.BOOT_GET)

    def _check_http_uri(self, uri: str, boot: dict[str, Any]) -> None:
        """The read-back's ``HttpBootUri`` is the one sent (a service that
        does not show the property is taken at its 2xx)."""
        if boot_rules.HTTP_URI not in boot or boot[boot_rules.HTTP_URI] == uri:
            return
        raise self.fault(
            BootFailure,
            "asked for UEFI HTTP boot from the image sent, the BMC reads back "
            f"{'no' if not boot[boot_rules.HTTP_URI] else 'another'} HttpBootUri",
            operation=Operation.BOOT_SET,
        )

    def _send_boot(
        self, system: Resource, device: BootDevice | boot_rules.HttpBoot, persistent: bool
    ) -> tuple[str, str]:
        """PATCH the override onto ``system`` (as just read): its target and frequency."""
        assert self._conn is not None
        body = self._override_body(system.body, device, persistent)
        try:
            patch(self._conn, system, {"Boot": body})
        except sushy_exc.HTTPError as exc:
            if isinstance(device, boot_rules.HttpBoot) and exc.status_code == 400:
                self._refused_http_boot(exc)
            raise
        return body["BootSourceOverrideTarget"], body["BootSourceOverrideEnabled"]

    def _override_body(
        self, system: dict[str, Any], device: BootDevice | boot_rules.HttpBoot, persistent: bool
    ) -> dict[str, str]:
        """The Boot object to send; ``UnsupportedOperation`` before anything
        is sent when the system's allowed values rule it out."""
        try:
            return boot_rules.override(system, device, persistent, self.info.boot_mode)
        except boot_rules.NotAllowed as exc:
            raise self.unsupported(Operation.BOOT_SET, str(exc)) from None

    def _refused_http_boot(self, exc: sushy_exc.HTTPError) -> None:
        """A 400 to a UEFI HTTP boot override the system's own allowed values
        admit: an answer :data:`~bmaas.drivers.redfish.faults.MESSAGE_RULES`
        names is typed there (the edge's mapping); any other says the
        service will not boot this node so -- HTTP boot off in its firmware,
        a URI it cannot keep -- a capability it lacks here, never the node's
        hardware nor an unclassified fault (issue 48: sushy-tools' 400 counted
        toward fencing). Asking again never helps; another node may boot so."""
        if rule_for(exc) is None:
            raise self.fault(
                UnsupportedOperation,
                f"the service refused UEFI HTTP boot: {answer_text(exc)}",
                operation=Operation.BOOT_SET,
                status="400",
            ) from exc

    def get_boot_mode(self, *, deadline: Deadline) -> str | None:
        """The firmware boot mode the system reads (``uefi``/``bios``, Ironic's
        names), None when it does not say. Idempotent; 1 GET."""
        return self._call(
            Operation.BOOT_GET,
            deadline,
            lambda: boot_rules.mode_of(self._fresh_system().json.get("Boot") or {}),
            read=Operation.BOOT_GET,
        )

    def _learn(self, quirk: Quirk, what: str) -> None:
        if quirk not in self.quirks:
            LOG.warning("%s: %s (%s)", self.node, what, quirk)
        self.quirks.add(quirk)

    # -- optional capabilities ------------------------------------------------------

    def _cd_slots(
        self, operation: Operation, found: dict[str, Resource] | None = None
    ) -> VirtualMediaSlots:
        """The CD/DVD slots of the system, wherever the service keeps them
        (:mod:`bmaas.drivers.redfish.vmedia`; found once per driver).
        ``found``: the links this operation read so far (``find_cd_slots``'
        ``answered``)."""
        system, conn = self._system, self._conn
        assert system is not None
        assert conn is not None
        if self._vmedia_paths is None:
            with conn.reading(Operation.INVENTORY_GET):
                root = self._root.json if self._root is not None else None
                self._vmedia_paths = find_cd_slots(conn, system.json, root, answered=found)
        if not self._vmedia_paths:
            raise self.unsupported(
                operation, "no CD/DVD slot: the BMC has no CD/DVD virtual media slot"
            )

        def fault(cls: type[BMCFault], message: str) -> BMCFault:
            return self.fault(cls, message, operation=operation)

        return VirtualMediaSlots(
            conn,
            list(self._vmedia_paths),
            fault,
            self._sleep,
            poll_interval=self.vmedia_poll_interval,
        )

    def _on_cd_slots(
        self,
        operation: Operation,
        use: Callable[[VirtualMediaSlots], T],
        found: dict[str, Resource] | None = None,
    ) -> T:
        """``use`` the CD slots. Slots found by an earlier call that answer
        404 now are stale links (a Manager reset, a slot gone): found afresh
        once, and ``use`` runs again on what the service links now. A 404 on
        links read in this very call is the service's answer
        (``UnsupportedOperation``, :mod:`bmaas.drivers.redfish.faults`)."""
        cached = self._vmedia_paths is not None
        try:
            return use(self._cd_slots(operation, found))
        except sushy_exc.HTTPError as exc:
            if not cached or exc.status_code != 404:
                raise
            LOG.info("%s: a virtual media link answered 404; reading the links again", self.node)
            self._vmedia_paths = None
            if found is not None:
                found.clear()  # read afresh: what was answered before is stale
        return use(self._cd_slots(operation, found))

    def insert_virtual_media(self, url: str, *, deadline: Deadline) -> None:
        """Eject whatever the slot holds, insert ``url``, and read the slot
        back until the image shows (bounded by ``deadline``). A ``BMCBusy``
        part way carries ``resume``: the insert from the refused request."""
        self._insert(Insertion(url), deadline=deadline)

    def _insert(self, progress: Insertion, *, deadline: Deadline) -> None:
        url = progress.url

        def insert(slots: VirtualMediaSlots) -> None:
            with slots.conn.reading(Operation.INVENTORY_GET):
                used = slots.insert(url, deadline, progress)  # the call's own bound
            self._inserted.add(url)  # what an eject takes out again
            if self._vmedia_paths and used != self._vmedia_paths[0]:
                # the slot that took it first next time (405/in use: skip the others)
                self._vmedia_paths.remove(used)
                self._vmedia_paths.insert(0, used)

        def act() -> None:
            self._on_cd_slots(Operation.VMEDIA_INSERT, insert, progress.found)

        try:
            self._call(Operation.VMEDIA_INSERT, deadline, act, read=Operation.INVENTORY_GET)
        except BMCBusy as fault:  # "later": that request was not carried out
            fault.resume = Resume(functools.partial(self._insert, progress), at=progress.answered)
            raise

    def eject_virtual_media(
        self, *, deadline: Deadline, url: str | None = None, force: bool = False
    ) -> None:
        """Eject what bmaas inserted: a slot holding an image this driver
        inserted (wherever the slot is now), or ``url`` where the caller names
        it; ``force``: every CD slot's media. Media bmaas did not insert (an
        Applet's, an upload, another tool's URL) is left and logged. A
        ``BMCBusy`` carries ``resume``: the search for the slots goes on from
        the refused read (the eject after it, idempotent, runs whole)."""
        self._eject(url, force, {}, deadline=deadline)

    def _eject(
        self, url: str | None, force: bool, found: dict[str, Resource], *, deadline: Deadline
    ) -> None:
        mine = {url} if url is not None else set(self._inserted)

        def wanted(slot: Slot) -> bool:
            return force or any(slot.holds(image) for image in mine)

        def act() -> None:
            _, left = self._on_cd_slots(
                Operation.VMEDIA_EJECT, lambda slots: slots.eject(wanted), found
            )
            # every image asked for is out now: none held anywhere
            self._inserted.difference_update(mine)
            for slot in left:
                LOG.info(
                    "%s: %s holds media bmaas did not insert (%s): left; "
                    "name its URL or force to eject it",
                    self.node,
                    slot.path,
                    slot.body.get("ConnectedVia") or "connected",
                )

        try:
            self._call(Operation.VMEDIA_EJECT, deadline, act, read=Operation.INVENTORY_GET)
        except BMCBusy as fault:  # "later": that request was not carried out
            rest = functools.partial(self._eject, url, force, found)
            fault.resume = Resume(rest, at=len(found))
            raise

    def get_virtual_media(self, *, deadline: Deadline) -> list[dict[str, Any]]:
        """The CD slots as they read now (:meth:`VirtualMediaSlots.describe`).
        Idempotent; 1 GET a slot once the slots are found."""

        def act() -> list[dict[str, Any]]:
            return self._on_cd_slots(Operation.INVENTORY_GET, VirtualMediaSlots.describe)

        return self._call(Operation.INVENTORY_GET, deadline, act, read=Operation.INVENTORY_GET)

    def get_inventory(self, *, deadline: Deadline, detail: bool = False) -> Inventory:
        """The system's summary (1 GET); with ``detail`` also its processors,
        DIMMs, NICs, disks (each linked collection and member: 1 GET each)
        and the firmware inventory where the service has one
        (:mod:`bmaas.drivers.redfish.lifecycle`)."""

        def act() -> Inventory:
            system = self._fresh_system()
            cpus = (system.json.get("ProcessorSummary") or {}).get("Count")
            gib = system.memory_summary.size_gib if system.memory_summary else None
            extra = {"uuid": system.uuid, "system": system.path}
            parts: dict[str, Any] = {}
            if detail:
                parts = lifecycle.parts(self._reader(), system.json)
                try:
                    parts["firmware"] = tuple(lifecycle.firmware(self._reader(), self._root_json()))
                except lifecycle.Missing:
                    parts["firmware"] = ()
                if isinstance(system.json.get("BiosVersion"), str):
                    extra["bios_version"] = system.json["BiosVersion"]
            return Inventory(
                manufacturer=system.manufacturer,
                model=system.model,
                serial=system.serial_number or None,
                cpus=cpus if isinstance(cpus, int) else None,
                memory_mb=int(gib * 1024) if gib is not None else None,
                extra=extra,
                **parts,
            )

        return self._call(Operation.INVENTORY_GET, deadline, act, read=Operation.INVENTORY_GET)

    # -- BIOS and firmware (bmaas.drivers.redfish.lifecycle) ----------------------------

    def _reader(self) -> Callable[[str], Resource]:
        conn = self._conn
        assert conn is not None
        return lambda path: read(conn, path)

    def _system_read(self) -> Resource:
        """The System as it reads now (one GET), for a service that names
        its firmware by it (lifecycle.system_bios)."""
        system = self._fresh_system()
        return Resource(str(system.path), dict(system.json), None)

    def _root_json(self) -> dict[str, Any]:
        return dict(self._root.json) if self._root is not None else {}

    def _missing(self, operation: Operation, exc: lifecycle.Missing) -> BMCFault:
        return self.unsupported(operation, str(exc))

    def get_firmware_inventory(self, *, deadline: Deadline) -> list[FirmwareComponent]:
        def act() -> list[FirmwareComponent]:
            try:
                return lifecycle.firmware(self._reader(), self._root_json(), self._system_read)
            except lifecycle.Missing as exc:
                raise self._missing(Operation.FIRMWARE_GET, exc) from None

        return self._call(Operation.FIRMWARE_GET, deadline, act, read=Operation.FIRMWARE_GET)

    def _read_bios(self, operation: Operation) -> tuple[BiosSettings, Resource, str | None]:
        """The BIOS now, with its registry (found once per driver)."""
        system = self._fresh_system()
        try:
            settings, bios, target = lifecycle.read_bios(self._reader(), system.json, None)
        except lifecycle.Missing as exc:
            raise self._missing(operation, exc) from None
        name = bios.body.get("AttributeRegistry")
        name = name if isinstance(name, str) else ""
        if self._bios_registry is None or self._bios_registry[0] != name:
            where = lifecycle.registry_location(self._reader(), self._root_json(), name)
            if where is None:
                LOG.info(
                    "%s: no attribute registry %r published: changes go unchecked",
                    self.node,
                    name,
                )
            found = lifecycle.parse_registry(self._reader()(where).body) if where else None
            self._bios_registry = (name, found)
        registry = self._bios_registry[1]
        return dataclasses.replace(settings, registry=registry), bios, target

    def get_bios(self, *, deadline: Deadline) -> BiosSettings:
        return self._call(
            Operation.BIOS_GET,
            deadline,
            lambda: self._read_bios(Operation.BIOS_GET)[0],
            read=Operation.BIOS_GET,
        )

    def set_bios(
        self, changes: Mapping[str, Any], *, deadline: Deadline, apply_time: str = "OnReset"
    ) -> dict[str, Any]:
        """Checked against the registry (nothing sent on a problem), PATCHed
        onto the settings object with its ETag (``@Redfish.SettingsApplyTime``
        when the service lists ``SupportedApplyTimes``), read back: every
        change must show pending (or current, ``Immediate``), else
        ``SettingsNotApplied``."""
        if apply_time not in APPLY_TIMES:
            raise InputError(
                f"{apply_time!r} is not one of {', '.join(APPLY_TIMES)}",
                field="apply_time",
                node=self.node,
            )

        def act() -> dict[str, Any]:
            settings, bios, target = self._read_bios(Operation.BIOS_SET)
            check_bios_changes(changes, settings.registry, node=self.node)
            offered = settings.apply_times
            if (offered and apply_time not in offered) or (not offered and apply_time != "OnReset"):
                raise self.unsupported(
                    Operation.BIOS_SET,
                    f"apply time {apply_time} not offered (the BIOS takes "
                    f"{', '.join(offered) or 'OnReset only'})",
                )
            body: dict[str, Any] = {"Attributes": dict(changes)}
            if offered:
                body["@Redfish.SettingsApplyTime"] = {"ApplyTime": apply_time}
            assert self._conn is not None
            where = read(self._conn, target) if target is not None else bios
            patch(self._conn, where, body)
            after, _, _ = lifecycle.read_bios(self._reader(), self._fresh_system().json, None)
            lost = {
                name: value
                for name, value in changes.items()
                if after.pending.get(name) != value and after.current.get(name) != value
            }
            if lost:
                raise self.fault(
                    SettingsNotApplied,
                    "the BMC took the change, and its settings read back without "
                    + ", ".join(f"{k}={v!r}" for k, v in lost.items()),
                    operation=Operation.BIOS_SET,
                    attributes={
                        k: {"wanted": v, "current": after.current.get(k), "pending": False}
                        for k, v in lost.items()
                    },
                )
            return after.pending

        return self._call(Operation.BIOS_SET, deadline, act, read=Operation.BIOS_GET)

    # -- firmware update and the BMC's reset (bmaas.drivers.redfish.update) -------------

    def start_firmware_update(
        self, image_uri: str, *, targets: tuple[str, ...] = (), deadline: Deadline
    ) -> UpdateTask:
        """SimpleUpdate, else a multipart push (:mod:`~bmaas.drivers.redfish.
        update`): 1 GET (+1 with targets) and 1 POST. Not idempotent."""

        def act() -> UpdateTask:
            try:
                request = update_rules.request_for(
                    self._reader(), self._root_json(), image_uri, targets, self._system_read
                )
            except update_rules.Missing as exc:
                raise self._missing(Operation.FIRMWARE_UPDATE, exc) from None
            except InputError as exc:
                exc.node = self.node
                raise
            assert self._conn is not None
            return update_rules.task_of(request.send(self._conn.post), targets)

        return self._call(Operation.FIRMWARE_UPDATE, deadline, act, read=Operation.FIRMWARE_GET)

    def get_update_task(self, task: UpdateTask, *, deadline: Deadline) -> TaskStatus:
        """1 GET; a task or job that ended badly is typed by
        :func:`~bmaas.drivers.redfish.faults.map_task`."""

        def act() -> TaskStatus:
            assert self._conn is not None
            assert task.path is not None
            status, bad = update_rules.task_status(self._conn.get(task.path))
            if bad:
                raise map_task(
                    status.state,
                    list(status.messages),
                    functools.partial(self.fault, operation=Operation.FIRMWARE_UPDATE),
                )
            return status

        return self._call(Operation.FIRMWARE_UPDATE, deadline, act, read=Operation.FIRMWARE_GET)

    def request_bmc_reset(self, *, deadline: Deadline) -> None:
        """The system's Manager's ``Manager.Reset`` (1 GET + 1 POST)."""

        def act() -> None:
            assert self._conn is not None
            managers = managers_of(self._conn, self._fresh_system().json, self._root_json())
            if not managers:
                raise self.unsupported(Operation.BMC_RESET, "no Manager found for the system")
            try:
                target, body = update_rules.manager_reset(self._reader()(managers[0]).body)
            except update_rules.Missing as exc:
                raise self._missing(Operation.BMC_RESET, exc) from None
            self._conn.post(target, data=body)

        self._call(Operation.BMC_RESET, deadline, act, read=Operation.PROBE)

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
        """Give this node's share of the service client back (the last node
        of a service logs the session out: one bounded request). Safe twice."""
        with self._lock:
            service, self._svc = self._svc, None
            self._system = None
            self._vmedia_paths = None
            self._boot_again = None
        if service is not None:
            self.services.release(service, Deadline.after(self.bmc_timeout, clock=self._clock))
