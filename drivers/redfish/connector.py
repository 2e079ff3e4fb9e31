"""sushy's connector, tamed: one request is one attempt, bounded by the call's deadline.

sushy's ``Connector._op`` retries on its own, under any retry the caller adds
(measured against hwlab with sushy 5.14):

* connection errors and timeouts, for every method: ``server_side_retries or 3``
  tries, so ``server_side_retries=0`` still means 3 and a POST reset can be
  sent twice; ``server_side_retries=1`` is one try;
* HTTP 5xx on GET: ``server_side_retries`` more tries, ``server_side_retries_delay``
  apart (defaults 10 x 3 s); with ``server_side_retries=1`` a 500 is still
  sent twice;
* iDRAC SYS518 / iLO InvalidOperationForSystemState on 400 and 5xx: the same.

So we build the connector with ``server_side_retries=1`` (one transport try),
pass ``server_side_retries_left=0`` on every request (no 5xx or vendor retry),
and send every request through :class:`~bmaas.drivers.redfish.transport.DeadlineAdapter`
with the call's :class:`~bmaas.deadline.Deadline` as its ``timeout``: the
whole exchange, every byte of the body included, ends by it. The hot read
(:meth:`BoundedConnector.read_fields`, the power state) skips requests for
its own HTTP on a kept socket (:mod:`bmaas.drivers.redfish.lean`,
:mod:`bmaas.drivers.redfish.wire`) with the same deadline, body cap and gate.

sushy's resources (``System.refresh``, ``reset_system``) call the connector
with no way to pass a deadline, so the driver hands its call's ``Deadline``
to the connector for the duration of the call (:meth:`BoundedConnector.within`)
through a :class:`contextvars.ContextVar`, not an attribute: the value is the
calling thread's (context's) own, so a connector shared by two threads (the
nodes behind one Redfish service share one connector) or a call that forgets
to reset it can never lend one call's deadline to another. It is the value
itself, never a number of seconds re-created here. Each request first waits
for its turn at the BMC's gate (``pace``, :mod:`bmaas.gate`). What sushy
still does on its own, on purpose: one re-login and one re-send when a
session has expired (401 with a session), and a re-send without
``Accept-Encoding: identity`` on a 406.

Every GET carries ``X-Bmaas-Operation`` naming the read it serves
(``power.get``, ``boot.get``, ...). Real BMCs ignore unknown headers; hwlab's
emulator uses it to tell apart reads of the one ComputerSystem resource.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import threading
from collections.abc import Callable, Iterator
from typing import Any

import requests
import sushy.exceptions as sushy_exc
from sushy.connector import Connector

from bmaas import clock as _clock
from bmaas.deadline import Deadline
from bmaas.driver import Operation
from bmaas.driver_info import DEFAULT_MAX_BODY_BYTES
from bmaas.drivers.redfish.faults import DeadlineExceeded, NotSent
from bmaas.drivers.redfish.lean import LeanReader
from bmaas.drivers.redfish.transport import DeadlineAdapter, ExchangeDeadline
from bmaas.tlspolicy import TLSPolicy, client_context

__all__ = ["OPERATION_HEADER", "BoundedConnector"]

OPERATION_HEADER = "X-Bmaas-Operation"


@dataclasses.dataclass(frozen=True)
class _Call:
    """The driver call in progress on this thread: whose connector, its
    deadline, the read its GETs serve, its turn at the BMC's gate (``pace``)
    and who counts its logins (``on_login``)."""

    connector: int
    deadline: Deadline
    read: Operation | None
    pace: Callable[[Deadline], None] | None = None
    on_login: Callable[[], None] | None = None
    #: whether a request of the call went out (shared by every view of the
    #: call :meth:`BoundedConnector.reading` makes)
    sent: list[bool] = dataclasses.field(default_factory=lambda: [False])

    @contextlib.contextmanager
    def sending(self) -> Iterator[None]:
        """One request of the call: it went out unless it raised ``NotSent``."""
        try:
            yield
        except NotSent:
            raise
        except BaseException:
            self.sent[0] = True
            raise
        self.sent[0] = True


#: the driver call in progress in this context (None between calls)
_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
    "bmaas_redfish_call", default=None
)


class BoundedConnector(Connector):
    """A sushy ``Connector`` whose requests each make one bounded attempt."""

    def __init__(
        self,
        url: str,
        *,
        verify: bool | str,
        bmc_timeout: float,
        clock: _clock.ClockFn,
        on_login: Callable[[], None] | None = None,
        keep_alive: bool = False,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        tls: TLSPolicy | None = None,
    ) -> None:
        # The last response seen by each thread (nodes behind one service
        # share this connector, each call on its own thread).
        self._local = threading.local()
        # No default_request_timeout (sushy >= 5.4) or connect_timeout (>= 5.10):
        # those are requests' per-socket-operation timeouts, which bound no
        # exchange; every request here gets the call's ExchangeDeadline (_op).
        super().__init__(
            url,
            verify=verify,
            response_callback=self._remember,
            server_side_retries=1,
            server_side_retries_delay=0,
        )
        self._clock = clock
        self._bmc_timeout = bmc_timeout
        tls = tls or TLSPolicy()
        adapter = DeadlineAdapter(max_body=max_body_bytes, tls=client_context(verify, tls))
        for scheme in ("https://", "http://"):
            self._session.mount(scheme, adapter)
        #: called for every session login POST (the first and sushy's re-logins)
        self._on_login = on_login
        # Proxies from the environment are for the operator's web traffic, not
        # for BMCs on a management network; looking them up on every request
        # (requests walks os.environ) was a third of a pooled read's CPU.
        self._session.trust_env = False
        if keep_alive:
            # sushy asks for "Connection: close" because some BMCs choke on
            # long-lived connections. Off by default here too, for another
            # reason: a pooled sweep would then hold one socket per Redfish
            # node, and pyghmi's select() breaks on descriptors past 1024 in
            # a process that also speaks IPMI.
            self._session.headers.pop("Connection", None)
        #: the hot read's lean path (see :mod:`bmaas.drivers.redfish.lean`)
        self.lean = LeanReader(
            self._session,
            url,
            verify=verify,
            after_denial=self._after_denial,
            max_body=max_body_bytes,
            tls=tls,
        )

    def close(self) -> None:
        """Close the lean read's kept connections and sushy's session."""
        self.lean.close()
        super().close()

    def _remember(self, response: requests.Response) -> None:
        self._local.last = response

    @property
    def _last(self) -> requests.Response | None:
        return getattr(self._local, "last", None)

    def _current(self) -> _Call | None:
        call = _CALL.get()
        return call if call is not None and call.connector == id(self) else None

    @contextlib.contextmanager
    def within(
        self,
        deadline: Deadline,
        read: Operation,
        *,
        pace: Callable[[Deadline], None] | None = None,
        on_login: Callable[[], None] | None = None,
    ) -> Iterator[None]:
        """Every request inside ends by ``deadline`` (the driver call's);
        ``pace`` is called before each one (the BMC's gate spacing),
        ``on_login`` for each login POST (besides the connector's own)."""
        call = _Call(id(self), deadline, read, pace, on_login)
        token = _CALL.set(call)
        try:
            yield
        except NotSent as exc:
            if call.sent[0]:  # an earlier request of the call went out: as any other
                raise DeadlineExceeded(str(exc)) from exc
            raise  # nothing of the call went out: the driver says "nothing sent"
        finally:
            _CALL.reset(token)

    @contextlib.contextmanager
    def reading(self, read: Operation) -> Iterator[None]:
        """Name a different read for the GETs inside (same deadline)."""
        call = self._current()
        if call is None:
            raise RuntimeError("reading() is only for use inside within()")
        token = _CALL.set(dataclasses.replace(call, read=read))
        try:
            yield
        finally:
            _CALL.reset(token)

    def read_fields(self, path: str, fields: tuple[str, ...]) -> dict[str, Any]:
        """The ``fields`` of the resource at ``path`` through the lean read,
        inside :meth:`within` (its deadline, read name and gate)."""
        call = self._current()
        if call is None:
            raise RuntimeError("read_fields() is only for use inside within()")
        if call.deadline.expired:
            raise NotSent(f"deadline passed before GET {path}")
        headers = {OPERATION_HEADER: str(call.read)} if call.read is not None else {}
        with call.sending():
            return self.lean.read(path, fields, call.deadline, headers=headers, pace=call.pace)

    def _after_denial(self, path: str, error: sushy_exc.AccessError) -> requests.Response:
        """What sushy's ``_op`` does when a GET is refused 401/403: with a
        session, log in again and send the GET once more (no further
        re-login); with basic auth or no auth, the refusal is final."""
        auth = self._auth
        if auth is None or self._session.auth is not None:
            raise error
        if auth.can_refresh_session():
            auth.refresh_session()
        else:
            auth.authenticate()
        return self._op("GET", path, allow_reauth=False)

    def _op(
        self,
        method: str,
        path: str = "",
        data: Any = None,
        headers: dict[str, str] | None = None,
        blocking: bool = False,
        timeout: Any = None,
        server_side_retries_left: int | None = None,
        allow_reauth: bool = True,
        **kwargs: Any,
    ) -> requests.Response:
        # Outside a driver call (sushy logging out at garbage collection: no
        # caller to hand a budget) the driver's per-call bound applies.
        call = self._current()
        if call is None:
            call = _Call(id(self), Deadline.after(self._bmc_timeout, clock=self._clock), None)
        deadline, read = call.deadline, call.read
        if deadline.expired:
            raise NotSent(f"deadline passed before {method} {path}")
        headers = dict(headers or {})
        if method == "POST" and isinstance(data, dict) and "UserName" in data:
            # SessionService.create_session: a login, counted when tried
            for count in (self._on_login, call.on_login):
                if count is not None:
                    count()
        if call.pace is not None:
            call.pace(deadline)  # SlotTimeout (a bmaas error) when no turn comes in time
        if method == "GET" and read is not None:
            headers[OPERATION_HEADER] = str(read)
        try:
            with call.sending():
                return super()._op(
                    method,
                    path,
                    data=data,
                    headers=headers,
                    blocking=blocking,
                    timeout=ExchangeDeadline(deadline),
                    server_side_retries_left=0,
                    allow_reauth=allow_reauth,
                    **kwargs,
                )
        except sushy_exc.HTTPError as exc:
            # sushy's HTTPError keeps status and body but drops the response;
            # keep it for its headers (Retry-After). The innermost request wins.
            if getattr(exc, "response", None) is None:
                exc.response = self._last
            raise
