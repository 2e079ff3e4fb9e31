"""The state of one emulated Redfish BMC: its machine, credentials, sessions.

A :class:`Bmc` is what one endpoint (one port) serves. The HTTP layer
(:mod:`bmaas.hwlab.redfish.server`) authenticates requests against it and counts
them; the sushy-tools backends (:mod:`bmaas.hwlab.redfish.app`) read and change the
machine behind it.
"""

from __future__ import annotations

import collections
import dataclasses
import hmac
import itertools
import secrets
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from bmaas.driver import BootDevice, BootSetting, PowerAction
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.hwlab.limits import SSE_KEEPALIVE
from bmaas.secrets import Secret

if TYPE_CHECKING:
    from bmaas.hwlab.redfish.shapes.state import ShapeState

__all__ = [
    "BOOT_MODES",
    "BOOT_TARGETS",
    "HTTP_TARGET",
    "RESET_ACTIONS",
    "Bmc",
    "Rendered",
    "RequestRecord",
    "Session",
]

#: a rendered answer: status, headers, body (see :meth:`Bmc.rendered`)
Rendered = tuple[int, list[tuple[str, str]], bytes]

#: Redfish ResetType -> what the machine does
RESET_ACTIONS: dict[str, PowerAction] = {
    "On": PowerAction.ON,
    "ForceOn": PowerAction.ON,
    "ForceOff": PowerAction.OFF,
    "GracefulShutdown": PowerAction.SOFT_OFF,
    "ForceRestart": PowerAction.REBOOT,
    "PowerCycle": PowerAction.REBOOT,
    "GracefulRestart": PowerAction.SOFT_REBOOT,
}
#: the reset types a BMC offers unless told otherwise
DEFAULT_RESET_TYPES = ("On", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart")

#: Redfish BootSourceOverrideTarget <-> the machine's boot devices
BOOT_TARGETS: dict[str, BootDevice] = {
    "Pxe": BootDevice.PXE,
    "Hdd": BootDevice.DISK,
    "Cd": BootDevice.CDROM,
    "BiosSetup": BootDevice.BIOS,
}
BOOT_NAMES = {device: name for name, device in BOOT_TARGETS.items()}
#: UEFI HTTP boot (``BootSourceOverrideTarget`` ``UefiHttp``, the image at
#: ``HttpBootUri``): the machine holds it as a network boot (pxe), and the BMC
#: shows ``UefiHttp`` while the machine still holds exactly what it set
HTTP_TARGET = "UefiHttp"
#: Redfish BootSourceOverrideMode values a lab system takes (UEFI first: its default)
BOOT_MODES = ("UEFI", "Legacy")

# Sessions a BMC keeps before it forgets the oldest (real BMCs refuse instead;
# forgetting keeps long lab runs with careless clients from wedging).
MAX_SESSIONS = 64
# Request records kept per BMC for tests and `hwlab status`; the count is exact.
RECORDS_KEPT = 64


@dataclasses.dataclass(frozen=True)
class Session:
    id: str
    username: str
    token: Secret = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True)
class RequestRecord:
    """One HTTP request as the BMC saw it (``status`` None: no answer sent)."""

    method: str
    path: str
    operation: str
    status: int | None
    effects: tuple[str, ...] = ()


class Bmc:
    """One Redfish BMC serving one system (``system_id``) of one machine."""

    def __init__(
        self,
        machine: FakeMachine,
        *,
        username: str,
        password: str | Secret,
        system_id: str | None = None,
        reset_types: Sequence[str] | None = None,
    ) -> None:
        self.machine = machine
        self.username = username
        self.password = Secret(password)
        self.system_id = system_id or machine.name
        self.uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"hwlab-redfish:{machine.name}"))
        #: the system's BMC (its Manager resource, ``/redfish/v1/Managers/<system_id>``)
        self.manager_uuid = str(
            uuid.uuid5(uuid.NAMESPACE_URL, f"hwlab-redfish-manager:{machine.name}")
        )
        types = tuple(reset_types) if reset_types is not None else DEFAULT_RESET_TYPES
        unknown = [t for t in types if t not in RESET_ACTIONS]
        if unknown:
            raise ValueError(f"unknown Redfish reset types: {', '.join(unknown)}")
        self.reset_types = types
        self.boot_targets = (*BOOT_TARGETS, HTTP_TARGET)
        #: ``Boot/HttpBootUri``: the image UEFI HTTP boot fetches (None: DHCP's)
        self.http_boot_uri: str | None = None
        # the machine's boot setting a UefiHttp override left (see http_boot)
        self._http: BootSetting | None = None
        #: BootSourceOverrideMode: the machine boots either way; kept for read-back
        self.boot_mode = BOOT_MODES[0]
        self.boot_modes = BOOT_MODES
        # The boot setting an override was cleared to (Enabled "Disabled"):
        # reads show no override while the machine still holds exactly it.
        self._cleared: BootSetting | None = None
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}  # by token
        #: sessions opened so far, and the most held at once (clients that pool
        #: sessions are checked against these: hwlab status "sessions")
        self.logins = 0
        self.peak_sessions = 0
        self._ids = itertools.count(1)
        self._requests = 0
        self._records: collections.deque[RequestRecord] = collections.deque(maxlen=RECORDS_KEPT)
        #: state of the second virtual media slot (the machine models only the CD)
        self.floppy: str | None = None
        #: every system of the Redfish service this BMC belongs to, itself
        #: first (:meth:`RedfishServer.add_service`: one service, many systems)
        self.peers: list[Bmc] = [self]
        #: requests being answered now (the event loop's thread only): the
        #: ``overload`` effect's concurrency
        self.in_flight = 0
        #: the system resource's path (its one ``@odata.id``; a request by
        #: UUID is redirected here): the answer kept rendered, see :meth:`rendered`
        self.system_path = f"/redfish/v1/Systems/{self.system_id}"
        self._rendered: dict[str, tuple[tuple[object, ...], Rendered]] = {}
        #: a vendor shape this BMC serves (None: hwlab's own service), see
        #: :mod:`bmaas.hwlab.redfish.shapes`
        self.shape: ShapeState | None = None
        #: seconds between ``: keepalive`` comments on an idle SSE stream of
        #: this BMC's EventService (None: none at all, as OpenBMC's bmcweb);
        #: a shared service's streams use its first system's (the keeper's)
        self.sse_keepalive: float | None = SSE_KEEPALIVE

    def __repr__(self) -> str:
        return f"<Bmc {self.machine.name} system={self.system_id}>"

    # -- what the system template reads --------------------------------------

    @property
    def hardware(self) -> Hardware:
        return self.machine.hardware

    @property
    def boot_target_values(self) -> tuple[str, ...]:
        """BootSourceOverrideTarget values: ``None`` (no override) and the targets."""
        return ("None", *self.boot_targets)

    @property
    def service_uuid(self) -> str:
        """The UUID of the service root this system is served under."""
        return self.peers[0].uuid

    @property
    def override_cleared(self) -> bool:
        """No boot override is set: it was cleared and the machine still
        holds what clearing left (a later set, by Redfish or IPMI, shows)."""
        return self._cleared is not None and self.machine.boot_device() == self._cleared

    def clear_boot_override(self) -> None:
        """``BootSourceOverrideEnabled: Disabled`` (or target ``None``): the
        machine follows its own boot order, the disk."""
        self._cleared = self.machine.boot_device()

    def boot_override_set(self, *, http: bool = False) -> None:
        """A boot override was set: reads show it again. ``http``: it was
        ``UefiHttp`` (the machine holds a network boot; reads show
        ``UefiHttp`` while it holds exactly that)."""
        self._cleared = None
        self._http = self.machine.boot_device() if http else None

    @property
    def http_boot(self) -> bool:
        """The override reads ``UefiHttp``: it was set so and the machine
        still holds what that set (a set by IPMI, the boot that used a
        one-time override, or a clear show instead)."""
        return (
            self._http is not None
            and not self.override_cleared
            and self.machine.boot_device() == self._http
        )

    @property
    def boot_enabled(self) -> str:
        if self.override_cleared:
            return "Disabled"
        return "Continuous" if self.machine.boot_device().persistent else "Once"

    @property
    def boot_progress(self) -> str:
        return self.machine.boot_progress()

    # -- the system resource, kept rendered ----------------------------------

    def state_key(self) -> tuple[object, ...]:
        """Everything the system resource shows that can change: the answer
        to ``GET /redfish/v1/Systems/<id>`` is a function of this and the
        path (hardware, names, reset types and boot targets are fixed)."""
        machine = self.machine
        boot = machine.boot_device()
        return (
            machine.power_state(),
            machine.health,
            boot.device,
            boot.persistent,
            machine.boot_progress(),
            self.boot_mode,
            self.override_cleared,
            self.http_boot,
            self.http_boot_uri,
        )

    def rendered(self, target: str, render: Callable[[], Rendered]) -> Rendered:
        """The system resource's answer at ``target``, rendered by ``render``
        (sushy-tools' Flask view and its Jinja template: most of a lab
        BMC's CPU per answer) only when the machine's :meth:`state_key`
        changed since the last one. A power sync reads the same unchanged
        document from every BMC every pass. An answer rendered while the
        state moved (a transition landed) is not kept."""
        key = self.state_key()
        kept = self._rendered.get(target)
        if kept is not None and kept[0] == key:
            return kept[1]
        answer = render()
        if answer[0] == 200 and self.state_key() == key:
            self._rendered[target] = (key, answer)
        return answer

    # -- credentials and sessions ----------------------------------------------

    def check_password(self, username: str, password: str) -> bool:
        """Constant-time comparison, as a BMC should do."""
        same_user = hmac.compare_digest(username.encode(), self.username.encode())
        same_pass = hmac.compare_digest(password.encode(), self.password.reveal_bytes())
        return same_user and same_pass

    def open_session(self, username: str) -> Session:
        session = Session(
            id=f"{next(self._ids)}", username=username, token=Secret(secrets.token_urlsafe(24))
        )
        with self._lock:
            self._sessions[session.token.reveal()] = session
            self.logins += 1
            self.peak_sessions = max(self.peak_sessions, len(self._sessions))
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.pop(next(iter(self._sessions)))
        return session

    def session_for(self, token: str) -> Session | None:
        with self._lock:
            return self._sessions.get(token)

    def session_by_id(self, session_id: str) -> Session | None:
        with self._lock:
            return next((s for s in self._sessions.values() if s.id == session_id), None)

    def close_session(self, session_id: str) -> bool:
        with self._lock:
            for token, session in list(self._sessions.items()):
                if session.id == session_id:
                    del self._sessions[token]
                    return True
        return False

    def sessions(self) -> list[Session]:
        with self._lock:
            return list(self._sessions.values())

    def forget_sessions(self) -> None:
        """Every session expires at once (session expiry, or the BMC rebooted)."""
        with self._lock:
            self._sessions.clear()

    # -- bookkeeping -----------------------------------------------------------

    def count_request(self) -> None:
        with self._lock:
            self._requests += 1

    def record(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)

    @property
    def request_count(self) -> int:
        with self._lock:
            return self._requests

    def records(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)
