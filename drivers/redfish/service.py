"""One Redfish session per service, shared by every system behind it.

A Redfish service root can serve many systems: sushy-tools (devstack, bifrost,
metal3-dev-env), chassis and enclosure managers (Dell MX, HPE Synergy, blade
and multi-node chassis) and OpenBMC multi-host tell them apart by
``redfish_system_id``. A session belongs to the *service*, not to a node:
with one session per node, eight nodes on one chassis manager hold eight of
its few session slots (iDRAC refuses the next with ``RAC0218``), and a
client that keeps one session per address logs the old node's session out
whenever it switches nodes.

So every :class:`~bmaas.drivers.redfish.driver.RedfishDriver` in a process whose
service is the same -- service root URL, credentials and TLS settings (a
different password or CA bundle is a different client) -- shares one
:class:`RedfishService`: one connector (one ``requests`` session), one
service-root read, one login. Drivers take a reference when they first
connect and give it back on ``close()``; the last one logs out. Requests of
different nodes run concurrently on it, up to the BMC's gate
(:mod:`bmaas.gate`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
import secrets
import threading
from collections.abc import Callable

import sushy

from bmaas.deadline import Deadline
from bmaas.driver import Operation
from bmaas.driver_info import DriverInfo
from bmaas.drivers.redfish.connector import BoundedConnector
from bmaas.secrets import Secret

__all__ = ["SERVICES", "RedfishService", "ServiceKey", "ServiceRegistry"]

LOG = logging.getLogger(__name__)

_SALT = secrets.token_bytes(16)


@dataclasses.dataclass(frozen=True)
class ServiceKey:
    """Which shared client serves a node: the service root, and a keyed digest
    of everything that makes a different client (credentials, TLS, auth
    type, the body cap). The digest is salted per process: never comparable across
    processes or logs, never reversible."""

    address: str
    digest: str = dataclasses.field(repr=False)

    @classmethod
    def of(cls, info: DriverInfo) -> ServiceKey:
        address = str(info.redfish_address).rstrip("/")
        parts = (
            address,
            info.redfish_username or "",
            Secret(info.redfish_password).reveal(),
            repr(info.redfish_verify_ca),
            info.redfish_auth_type,
            str(info.redfish_max_body_bytes),
            str(info.redfish_tls_min_version),
            str(info.redfish_tls_ciphers),
        )
        digest = hmac.new(_SALT, "\0".join(parts).encode(), hashlib.sha256).hexdigest()
        return cls(address, digest)


class RedfishService:
    """The shared client of one Redfish service: connector, root, login."""

    def __init__(self, key: ServiceKey, conn: BoundedConnector) -> None:
        self.key = key
        self.conn = conn
        #: the logged-in service root (None until the first call connects)
        self.root: sushy.Sushy | None = None
        #: held while logging in, so concurrent first calls log in once
        self.login_lock = threading.Lock()
        self.refs = 0
        #: logins made on this service (first and sushy's re-logins)
        self.logins = 0

    def close(self, deadline: Deadline) -> None:
        """Log out (one bounded request) and drop the connection."""
        root, self.root = self.root, None
        # Detach sushy's auth first: Sushy.__del__ would otherwise log out
        # again at garbage collection, whenever that happens.
        auth = root._auth if root is not None else None
        if root is not None:
            root._auth = None
        try:
            if auth is not None:
                with self.conn.within(deadline, Operation.LOGIN):
                    auth.close()
        except Exception as exc:  # logging out is a courtesy; the session expires anyway
            LOG.info(
                "%s: could not close the Redfish session: %s", self.key.address, type(exc).__name__
            )
        finally:
            self.conn.close()


class ServiceRegistry:
    """The process's shared Redfish clients, by :class:`ServiceKey`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._services: dict[ServiceKey, RedfishService] = {}

    def acquire(self, key: ServiceKey, make: Callable[[], BoundedConnector]) -> RedfishService:
        """A reference to ``key``'s service, made by ``make`` (not yet
        connected) on first use."""
        with self._lock:
            service = self._services.get(key)
            if service is None:
                service = self._services[key] = RedfishService(key, make())
            service.refs += 1
            return service

    def release(self, service: RedfishService, deadline: Deadline) -> None:
        """Give a reference back; the last one logs the session out."""
        with self._lock:
            service.refs -= 1
            if service.refs > 0:
                return
            if self._services.get(service.key) is service:
                del self._services[service.key]
        service.close(deadline)

    def open_services(self) -> int:
        with self._lock:
            return len(self._services)


#: every Redfish driver of this process shares its service's client from here
SERVICES = ServiceRegistry()
