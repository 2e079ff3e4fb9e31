"""Ironic's API through openstacksdk: the connection, the one mapping point
for openstacksdk/keystoneauth exceptions, and a count of API calls.

Connecting works as for every OpenStack client: ``connect(cloud="lab")``
reads ``clouds.yaml`` (``OS_CLIENT_CONFIG_FILE``, ``~/.config/openstack``,
``/etc/openstack``), ``OS_CLOUD`` or the ``OS_*`` variables. A standalone
Ironic (no Keystone) is::

    clouds:
      lab:
        auth_type: none
        auth:
          endpoint: http://127.0.0.1:6385

Every call the backend makes goes through :meth:`Api.call`, which maps a
foreign exception once (``raise X(...) from exc``) and counts the call, so a
benchmark can say how many API calls a strategy cost.

Every call is bounded (:mod:`.transport`): each HTTP exchange ends by the
call's ``deadline``, never after the connection's overall bound (the CLI's
``--deadline``) nor :data:`EXCHANGE_TIMEOUT` seconds after it starts, and
is one attempt (keystoneauth's and openstacksdk's own retries are off). A
silent API is :class:`IronicTimeout` (or :class:`IronicUnreachable` when the
connection never completed) by the deadline.
"""

from __future__ import annotations

import collections
import collections.abc
import contextlib
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import openstack
import openstack.connection
from keystoneauth1 import exceptions as ks_exc
from openstack import exceptions as sdk_exc

from bmaas.deadline import Deadline
from bmaas.drivers.ironic_backend import clouds, transport
from bmaas.drivers.ironic_backend.transport import (
    IronicConnectionFailed,
    IronicDeadlineExceeded,
    call_deadline,
)
from bmaas.faults import BmaasError, BMCBusy, InputError, NodeUnavailable
from bmaas.retry import RetryLimits, retrying

__all__ = [
    "BUSY",
    "EXCHANGE_TIMEOUT",
    "Api",
    "IronicBusy",
    "IronicTimeout",
    "IronicUnavailable",
    "IronicUnreachable",
    "connect",
    "map_errors",
]

T = TypeVar("T")

#: the API version node history needs (GET /v1/nodes/{node}/history)
HISTORY_VERSION = "1.78"
#: the API version whose ``abort`` ends a deploy waiting for its agent
#: (``wait call-back`` -> ``deploy failed``: the deploy interface's clean-up,
#: no tear-down, no cleaning): Ironic 35.0 (2026.1) and later
DEPLOYWAIT_ABORT_VERSION = "1.110"
#: seconds one HTTP exchange with Ironic may take when no call deadline is shorter
EXCHANGE_TIMEOUT = 60.0
#: how long and how often an API call is retried while Ironic says "later"
BUSY = RetryLimits(total=30.0, max_attempts=10, busy_initial=0.5, busy_max=4.0)


class IronicUnavailable(BmaasError):
    """Ironic's API did not answer, or answered with an error that is not about
    one node (5xx, bad auth to Ironic itself). Not a node's fault: the request
    stops (the policy table's ``BmaasError`` row) rather than burn candidates."""

    code = "ironic_unavailable"
    summary = "Ironic API unavailable"

    def __str__(self) -> str:
        return f"{self.summary}: {self.message}" if self.message else self.summary


class IronicUnreachable(IronicUnavailable):
    """No connection to Ironic's API: refused, no route, DNS, or the connect
    (TCP, TLS) not done by the deadline. Nothing was sent. Like
    ``BMCUnreachable`` in meaning, but not a node's fault: it stops the
    request (the policy table's ``BmaasError`` row), never counts for health."""

    code = "ironic_unreachable"
    summary = "Ironic API unreachable"


class IronicTimeout(IronicUnavailable):
    """Ironic's API took the request and did not answer by the deadline, or
    closed the connection without an answer: the outcome is unknown
    (``BMCTimeout``'s meaning, at the API edge). Stops the request; a later
    read (``instance list``, the next ``deploy``) shows what Ironic did."""

    code = "ironic_timeout"
    summary = "Ironic API timeout"


class IronicBusy(BMCBusy):
    """Ironic said "later" about a node: 409 (the conductor holds the node's
    lock), a reservation that lost a race for the lock, or Ironic's own
    database being busy (SQLite's "database is locked", 503). Retried on the
    spot with :mod:`bmaas.retry`'s busy backoff, within the caller's deadline."""

    summary = "Ironic busy"


#: 5xx answers that mean "later", not "broken"
_BUSY_5XX = ("database is locked", "ServiceUnavailable", "Service Unavailable")

#: an allocation's ``last_error`` that says "later" about Ironic itself, not
#: "no" about the node: a periodic task held the node's lock at reservation,
#: or SQLite was locked when the conductor saved the allocation (Ironic 39
#: retries most SQLite writes on "database is locked", not ``update_allocation``)
BUSY_ALLOCATION = ("filtered out during reservation", "database is locked")


def connect(
    cloud: str | None = None,
    *,
    deadline: Deadline | None = None,
    exchange_timeout: float = EXCHANGE_TIMEOUT,
    **options: Any,
) -> openstack.connection.Connection:
    """A connection as every OpenStack client makes it (``cloud`` from
    clouds.yaml, else ``OS_CLOUD``/``OS_*``); ``options`` override (tests pass
    ``auth_type="none", endpoint=...``). Every HTTP exchange on it ends by
    ``deadline`` (the command's budget; None: no overall bound) and within
    ``exchange_timeout`` seconds, one attempt each (:mod:`.transport`)."""
    if "endpoint" in options and options.get("auth_type") == "none":
        options["baremetal_endpoint_override"] = options.pop("endpoint")
    options = {**options, **transport.NO_HIDDEN_RETRIES}
    with warnings.catch_warnings():
        # openstacksdk's notes about its own deprecations (metrics backends
        # nobody configured) are not the operator's to act on. Its
        # RemovedInSDK<N>Warning classes are PendingDeprecationWarnings (their
        # base, _RemovedInSDKWarning, is private and new in 4.1); only
        # openstack.connect's work runs in here.
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        # openstack.connect, with clouds.yaml read as every file bmaas reads
        # (a regular file, size-capped) and each configuration problem one
        # InputError naming file, line and key (.clouds)
        conn = clouds.connect(cloud, **options)
    transport.mount(conn.session.session, deadline, exchange_timeout=exchange_timeout)
    return conn


def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    return int(code) if isinstance(code, int) else None


@contextlib.contextmanager
def map_errors(what: str, *, node: str | None = None) -> Iterator[None]:
    """Map openstacksdk/keystoneauth exceptions raised by ``what`` (one API
    call) to bmaas faults:

    ====================  ==========================  ===========================================
    Ironic said           fault                       why
    ====================  ==========================  ===========================================
    409 (node locked)     ``IronicBusy`` "409"        the conductor holds the node's lock: later
    503, db locked        ``IronicBusy``              Ironic's database is busy: later
    404                   ``NodeUnavailable``         the node/allocation went away under us
    400                   ``InputError``              our request was wrong (bad trait, state)
    other 4xx/5xx         ``IronicUnavailable``       Ironic itself is in trouble: stop
    not connected         ``IronicUnreachable``       refused, no route, connect not done in time
    no answer in time     ``IronicTimeout``           sent; the outcome is unknown
    closed, no answer     ``IronicTimeout``           sent; the outcome is unknown
    ====================  ==========================  ===========================================
    """
    try:
        yield
    except BmaasError:
        raise
    except IronicDeadlineExceeded as exc:
        if exc.connected:
            raise IronicTimeout(f"{what}: {exc}") from exc
        raise IronicUnreachable(f"{what}: {exc}") from exc
    except IronicConnectionFailed as exc:
        if exc.sent:
            raise IronicTimeout(f"{what}: closed without an answer: {exc}") from exc
        raise IronicUnreachable(f"{what}: {exc}") from exc
    except (ks_exc.ConnectFailure, ks_exc.ConnectTimeout) as exc:
        raise IronicUnreachable(f"{what}: {type(exc).__name__}: {exc}") from exc
    except sdk_exc.ConflictException as exc:
        raise IronicBusy(f"Ironic: {exc}", node=node, operation=what, status="409") from exc
    except sdk_exc.NotFoundException as exc:
        raise NodeUnavailable(f"{what}: not found: {exc}") from exc
    except sdk_exc.BadRequestException as exc:
        raise InputError(f"Ironic refused {what}: {exc}") from exc
    except sdk_exc.HttpException as exc:
        if _status(exc) == 503 or any(m in str(exc) for m in _BUSY_5XX):
            raise IronicBusy(
                f"Ironic: {exc}", node=node, operation=what, status=str(_status(exc))
            ) from exc
        raise IronicUnavailable(f"{what}: HTTP {_status(exc)}: {exc}") from exc
    except (sdk_exc.SDKException, ks_exc.ClientException) as exc:
        raise IronicUnavailable(f"{what}: {type(exc).__name__}: {exc}") from exc


class Api:
    """The baremetal proxy with every call mapped, counted, and retried while
    Ironic says "later" (:class:`IronicBusy`) through :mod:`bmaas.retry`, within
    the caller's deadline (else ``busy`` 's own)."""

    def __init__(
        self, conn: openstack.connection.Connection, *, busy: RetryLimits | None = None
    ) -> None:
        self.conn = conn
        with map_errors("connect"):  # the proxy discovers Ironic's API versions here
            self.bm = conn.baremetal
        self.busy = busy or BUSY
        self._lock = threading.Lock()
        self.calls: collections.Counter[str] = collections.Counter()

    def call(
        self,
        what: str,
        fn: Callable[..., T],
        *args: Any,
        node: str | None = None,
        deadline: Deadline | None = None,
        **kwargs: Any,
    ) -> T:
        """``fn(*args, **kwargs)`` as one mapped API call, counted per try. A
        call that returns a generator (``nodes()``) is drained here, so the
        count and the mapping cover the HTTP requests. Every HTTP exchange of
        the call ends by ``deadline`` (and the connection's own bound)."""
        # A call no step hands a deadline to (a read for a report) gets
        # ``busy.total``; steps pass theirs (the Ironic API edge's own bounds
        # belong to that edge).
        if deadline is None:
            deadline = Deadline.after(self.busy.total, clock=self.busy.clock)
        for attempt in retrying(self.busy, idempotent=True, deadline=deadline):
            with attempt, call_deadline(deadline):
                result = self._once(what, fn, args, kwargs, node)
        return result

    def _once(self, what: str, fn: Callable[..., T], args: Any, kwargs: Any, node: str | None) -> T:
        with self._lock:
            self.calls[what] += 1
        with map_errors(what, node=node):
            result = fn(*args, **kwargs)
            if isinstance(result, collections.abc.Generator):
                return list(result)  # type: ignore[return-value]
            return result

    def history(self, node_id: str) -> list[dict[str, Any]]:
        """The node's history (API 1.78): oldest first, each with
        ``created_at``, ``severity`` and ``event``. Ironic keeps it after the
        power sync has cleared ``last_error``."""

        def get() -> list[dict[str, Any]]:
            response = self.bm.get(f"/nodes/{node_id}/history", microversion=HISTORY_VERSION)
            sdk_exc.raise_from_response(response)
            return list(response.json().get("history", []))

        return self.call("node.history", get, node=node_id)

    def abort_deploy(self, node_id: str, *, node: str, deadline: Deadline) -> bool:
        """Abort a deploy in ``wait call-back`` (API 1.110): True when Ironic
        took it, False when this Ironic is older (406: the version or the
        abort from that state unknown to it). Retried while the node is
        locked, until ``deadline``. openstacksdk asks for ``abort`` at 1.13,
        where Ironic refuses it from ``wait call-back``: sent by hand."""

        def put() -> bool:
            response = self.bm.put(
                f"/nodes/{node_id}/states/provision",
                json={"target": "abort"},
                microversion=DEPLOYWAIT_ABORT_VERSION,
            )
            if response.status_code == 406:
                return False
            sdk_exc.raise_from_response(response)
            return True

        return self.call("node.abort", put, node=node, deadline=deadline)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.calls.values())
