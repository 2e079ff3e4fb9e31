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
and give each request the time left until the call's deadline as its
connect and read timeout. What sushy still does on its own, on purpose: one
re-login and one re-send when a session has expired (401 with a session), and
a re-send without ``Accept-Encoding: identity`` on a 406.

Every GET carries ``X-Bmaas-Operation`` naming the read it serves
(``power.get``, ``boot.get``, ...). Real BMCs ignore unknown headers; hwlab's
emulator uses it to tell apart reads of the one ComputerSystem resource.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import requests
import sushy.exceptions as sushy_exc
from sushy.connector import Connector

from bmaas import clock as _clock
from bmaas.driver import Operation
from drivers.redfish.faults import DeadlineExceeded

__all__ = ["OPERATION_HEADER", "BoundedConnector"]

OPERATION_HEADER = "X-Bmaas-Operation"


class BoundedConnector(Connector):
    """A sushy ``Connector`` whose requests each make one bounded attempt."""

    def __init__(
        self,
        url: str,
        *,
        verify: bool | str,
        timeout: float,
        clock: _clock.ClockFn,
        on_login: Callable[[], None] | None = None,
        keep_alive: bool = False,
    ) -> None:
        super().__init__(
            url,
            verify=verify,
            server_side_retries=1,
            server_side_retries_delay=0,
            default_request_timeout=timeout,
        )
        self._clock = clock
        self._timeout = timeout
        self._until: float | None = None
        #: the read every GET in the current call serves (sent in OPERATION_HEADER)
        self.read_operation: Operation | None = None
        self._last: requests.Response | None = None
        self._response_callback = self._remember
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

    def _remember(self, response: requests.Response) -> None:
        self._last = response

    @contextlib.contextmanager
    def bounded(self, seconds: float, read: Operation) -> Iterator[None]:
        """Every request inside shares one deadline, ``seconds`` from now."""
        previous = self._until, self.read_operation
        self._until, self.read_operation = self._clock() + seconds, read
        try:
            yield
        finally:
            self._until, self.read_operation = previous

    @contextlib.contextmanager
    def reading(self, read: Operation) -> Iterator[None]:
        """Name a different read for the GETs inside (same deadline)."""
        previous, self.read_operation = self.read_operation, read
        try:
            yield
        finally:
            self.read_operation = previous

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
        # Outside a driver call (sushy logging out at garbage collection) the
        # driver's default deadline bounds the request.
        until = self._until if self._until is not None else self._clock() + self._timeout
        remaining = until - self._clock()
        if remaining <= 0:
            raise DeadlineExceeded(f"deadline passed before {method} {path}")
        headers = dict(headers or {})
        if (
            method == "POST"
            and self._on_login is not None
            and isinstance(data, dict)
            and "UserName" in data
        ):
            self._on_login()  # SessionService.create_session: a login, counted when tried
        if method == "GET" and self.read_operation is not None:
            headers[OPERATION_HEADER] = str(self.read_operation)
        try:
            return super()._op(
                method,
                path,
                data=data,
                headers=headers,
                blocking=blocking,
                timeout=(remaining, remaining),
                server_side_retries_left=0,
                allow_reauth=allow_reauth,
                **kwargs,
            )
        except sushy_exc.HTTPError as exc:
            # sushy's HTTPError keeps status and body but drops the response;
            # keep it for its headers (Retry-After). The innermost request wins.
            if getattr(exc, "response", None) is None:
                exc.response = self._last  # type: ignore[attr-defined]
            raise
