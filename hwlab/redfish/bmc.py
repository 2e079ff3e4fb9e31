"""The state of one emulated Redfish BMC: its machine, credentials, sessions.

A :class:`Bmc` is what one endpoint (one port) serves. The HTTP layer
(:mod:`bmaas.hwlab.redfish.server`) authenticates requests against it and counts
them; the engine (:mod:`bmaas.hwlab.redfish.shapes.engine`) reads and changes
the machine behind it through its shape's state (:attr:`Bmc.shape`).
"""

from __future__ import annotations

import collections
import dataclasses
import hmac
import itertools
import secrets
import threading
import uuid
from collections.abc import Sequence

from bmaas.driver import PowerAction
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.hwlab.limits import SSE_KEEPALIVE
from bmaas.hwlab.redfish.shapes.hwlab import RESET_TYPES, named
from bmaas.hwlab.redfish.shapes.state import ShapeState
from bmaas.secrets import Secret

__all__ = ["RESET_ACTIONS", "Bmc", "Rendered", "RequestRecord", "Session"]

#: a rendered answer: status, headers, body
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
        types = tuple(reset_types) if reset_types is not None else RESET_TYPES
        unknown = [t for t in types if t not in RESET_ACTIONS]
        if unknown:
            raise ValueError(f"unknown Redfish reset types: {', '.join(unknown)}")
        #: the shape this BMC serves and the state it shows (hwlab's own
        #: unless :meth:`RedfishServer.add` names a vendor's)
        self.shape = ShapeState(named(self.system_id, types), machine)
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}  # by token
        #: sessions opened so far, and the most held at once (clients that pool
        #: sessions are checked against these: hwlab status "sessions")
        self.logins = 0
        self.peak_sessions = 0
        self._ids = itertools.count(1)
        self._requests = 0
        self._records: collections.deque[RequestRecord] = collections.deque(maxlen=RECORDS_KEPT)
        #: every system of the Redfish service this BMC belongs to, itself
        #: first (:meth:`RedfishServer.add_service`: one service, many systems)
        self.peers: list[Bmc] = [self]
        #: requests being answered now (the event loop's thread only): the
        #: ``overload`` effect's concurrency
        self.in_flight = 0
        #: the system resource's path (its one ``@odata.id``; a request by
        #: UUID is redirected here)
        self.system_path = f"/redfish/v1/Systems/{self.system_id}"
        #: seconds between ``: keepalive`` comments on an idle SSE stream of
        #: this BMC's EventService (None: none at all, as OpenBMC's bmcweb);
        #: a shared service's streams use its first system's (the keeper's)
        self.sse_keepalive: float | None = SSE_KEEPALIVE

    def __repr__(self) -> str:
        return f"<Bmc {self.machine.name} system={self.system_id}>"

    # -- identity ----------------------------------------------------------------

    @property
    def hardware(self) -> Hardware:
        return self.machine.hardware

    @property
    def service_uuid(self) -> str:
        """The UUID of the service root this system is served under."""
        return self.peers[0].uuid

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
