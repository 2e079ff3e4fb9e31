"""Ironic's API, bounded: every HTTP exchange ends by a Deadline, one attempt each.

openstacksdk and keystoneauth give a silent Ironic (a port that accepts and
never answers) all the time in the world, and retry on their own under any
retry bmaas adds. Measured against a silent port before this module
(openstacksdk 4.x, keystoneauth 5.x): ``bmaas status check --cloud X
--deadline 5`` still running after 400 s, ``deploy --deadline 20`` after
460 s. The reasons, and what is done about each:

* keystoneauth's ``Session`` has no timeout unless ``api_timeout`` is
  configured, and then it is per socket receive, not per exchange. Here the
  requests session under keystoneauth gets :class:`IronicAdapter`, the Redfish
  edge's :class:`~bmaas.drivers.redfish.transport.DeadlineAdapter` (connect, send,
  status line, headers and every byte of the body end by the deadline; a
  watchdog shuts a socket that is still waiting at the deadline), with the
  deadline taken from the API call in progress;
* keystoneauth retries a failed connect ``connect_retries`` times with
  exponential sleeps (``time.sleep``: deaf to the deadline and to signals),
  and openstacksdk configures the baremetal service with
  ``baremetal_status_code_retries: 5`` on 409 and 503 (another 0.5 s-doubling
  series of sleeps). :data:`NO_HIDDEN_RETRIES` sets both to zero: one call is
  one attempt; Ironic's "later" (409, 503) is retried by
  :class:`~bmaas.drivers.ironic_backend.api.Api` through :mod:`bmaas.retry`, within
  the caller's deadline, interruptible. openstacksdk 4.1 to 4.14 give each
  request ``connect_retries=1`` of their own, over the connection's zero
  (measured at the floor, 4.1.0: a closed connection sent twice, a 0.5 s
  ``time.sleep`` between), so the adapter also raises a failed connection
  as :class:`IronicConnectionFailed`, which keystoneauth's retry loop does
  not catch (it retries what ``requests`` raises).

Which deadline: the one the :class:`~bmaas.drivers.ironic_backend.api.Api` call in
progress gives (:func:`call_deadline`, a ``ContextVar``: the HTTP requests of
one call run in the caller's thread), never later than the API's overall
bound (the command's ``--deadline``), which also covers the requests
openstacksdk makes on its own (version discovery when the connection is
first used).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import requests
from keystoneauth1 import exceptions as ks_exc
from urllib3.exceptions import ConnectTimeoutError

from bmaas.deadline import Deadline
from bmaas.drivers.redfish.faults import DeadlineExceeded, NotSent
from bmaas.drivers.redfish.transport import DeadlineAdapter, ExchangeDeadline

__all__ = [
    "NO_HIDDEN_RETRIES",
    "IronicAdapter",
    "IronicConnectionFailed",
    "IronicDeadlineExceeded",
    "call_deadline",
    "earliest",
    "mount",
]

#: openstacksdk options (``openstack.connect(**options)``, over clouds.yaml)
#: that leave each API call one attempt: retries are :mod:`bmaas.retry`'s
NO_HIDDEN_RETRIES: dict[str, int] = {
    "connect_retries": 0,
    "baremetal_connect_retries": 0,
    "status_code_retries": 0,
    "baremetal_status_code_retries": 0,
}

_CALL: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "bmaas_ironic_call_deadline", default=None
)


class IronicDeadlineExceeded(DeadlineExceeded):
    """An exchange with Ironic's API was not over by its deadline.
    ``connected`` says whether the request reached the API (then the outcome
    is unknown) or the connection itself never completed."""

    def __init__(self, message: str, *, connected: bool) -> None:
        super().__init__(message)
        self.connected = connected


class IronicConnectionFailed(ks_exc.ConnectionError):
    """The connection to Ironic's API failed: ``sent`` says whether the
    request went out first (a kept connection closed or reset unanswered:
    the outcome is unknown) or not (refused, no route, connect timed out).
    A keystoneauth ``ConnectionError`` that is not retriable, so no hidden
    retry resends it."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


def _sent(exc: requests.exceptions.ConnectionError) -> bool:
    """Whether the request had gone out when the connection failed: not when
    the connection itself was never made (requests' ``ConnectTimeout``, or
    urllib3's reason a ``ConnectTimeoutError``, of which ``NewConnectionError``
    -- refused, no route, no name -- is one)."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return False
    raised = exc.args[0] if exc.args else None
    return not isinstance(getattr(raised, "reason", raised), ConnectTimeoutError)


def earliest(*deadlines: Deadline | None) -> Deadline | None:
    """The deadline that ends first among those given (None when none is)."""
    given = [d for d in deadlines if d is not None]
    return min(given, key=lambda d: d.left()) if given else None


@contextlib.contextmanager
def call_deadline(deadline: Deadline | None) -> Iterator[None]:
    """Run the block's HTTP exchanges with Ironic by ``deadline`` (and by the
    adapter's own bound)."""
    token = _CALL.set(earliest(deadline, _CALL.get()))
    try:
        yield
    finally:
        _CALL.reset(token)


class IronicAdapter(DeadlineAdapter):
    """A requests transport for keystoneauth's session: each exchange ends by
    the current API call's deadline, never after ``bound`` (the command's
    budget) nor ``exchange_timeout`` seconds after it starts, and is one attempt."""

    def __init__(self, bound: Deadline | None, *, exchange_timeout: float) -> None:
        super().__init__()
        self.bound = bound
        self.exchange_timeout = exchange_timeout

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: Any = None,
        verify: bool | str = True,
        cert: Any = None,
        proxies: Any = None,
    ) -> requests.Response:
        # keystoneauth hands in its own (per-receive) timeout or None: replaced
        own = Deadline.after(self.exchange_timeout)
        deadline = earliest(_CALL.get(), self.bound, own) or own
        what = f"{request.method} {request.path_url}"
        try:
            return super().send(request, stream, ExchangeDeadline(deadline), verify, cert, proxies)
        except DeadlineExceeded as exc:
            if isinstance(exc, NotSent):  # DeadlineAdapter sent nothing
                raise IronicDeadlineExceeded(
                    f"{what}: not sent, the deadline had passed", connected=False
                ) from exc
            if isinstance(exc.__cause__, requests.exceptions.ConnectTimeout):
                raise IronicDeadlineExceeded(
                    f"{what}: no connection to Ironic's API by the deadline", connected=False
                ) from exc
            raise IronicDeadlineExceeded(
                f"{what}: no answer from Ironic's API by the deadline", connected=True
            ) from exc
        except requests.exceptions.SSLError:
            raise  # keystoneauth's SSLError: not retried, mapped as Ironic's trouble
        except requests.exceptions.ConnectionError as exc:
            raise IronicConnectionFailed(f"{what}: {exc}", sent=_sent(exc)) from exc


def mount(
    session: requests.Session, bound: Deadline | None, *, exchange_timeout: float
) -> IronicAdapter:
    """Put an :class:`IronicAdapter` under ``session`` (keystoneauth's
    ``Session.session``) for http and https."""
    adapter = IronicAdapter(bound, exchange_timeout=exchange_timeout)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return adapter
