"""How one emulated BMC answers one HTTP request.

In order: count it, evaluate the machine's fault plan for its operation
(:func:`bmaas.fakes.effects.decide`), carry out the wire and BMC effects on the
socket with :func:`bmaas.hwlab.answers.carry_out` (the fault proxy's executor too),
check credentials, and only then hand the request, with any hardware effects,
to the one Redfish engine (the lifecycle resources first, then the shape's:
:mod:`bmaas.hwlab.redfish.shapes.engine`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import urllib.parse
from collections.abc import Callable

from bmaas.driver import Operation
from bmaas.fakes.effects import decide
from bmaas.fakes.faults import Firing
from bmaas.hwlab import answers
from bmaas.hwlab.http import Request, Response, redfish_error
from bmaas.hwlab.operations import OPERATION_HEADER, redfish_operation
from bmaas.hwlab.redfish import event_requests
from bmaas.hwlab.redfish.bmc import Bmc, RequestRecord
from bmaas.hwlab.redfish.lifecycle import serve as serve_lifecycle
from bmaas.hwlab.redfish.shapes.engine import serve as serve_shape
from bmaas.hwlab.redfish.standard import PUBLIC, canonical, odata_version_refused

__all__ = ["answer"]


async def answer(
    bmc: Bmc,
    request: Request,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    reboot: Callable[[], None],
    service: Bmc | None = None,
) -> bool:
    """Answer ``request``; False when the connection must close.

    ``reboot`` takes the BMC's endpoint down (the ``bmc_reboot`` effect).
    ``service``: the BMC that keeps the sessions when ``bmc`` is one system
    of a shared Redfish service (credentials and sessions are the service's).
    """
    keeper = service or bmc
    if event_requests.serves(request.path):  # the EventService: its requests and streams
        auth = functools.partial(_authenticate, keeper)
        return await event_requests.answer(keeper, request, reader, writer, authenticate=auth)
    bmc.count_request()
    named = request.header(OPERATION_HEADER)
    operation = redfish_operation(request.method, request.path, named) or Operation.PROBE
    # A login (a session POST; not a logout) is judged with the sessions the
    # service holds now (session_limit).
    opening = operation is Operation.LOGIN and request.method == "POST"
    sessions = len(keeper.sessions()) if opening else None
    firings = bmc.machine.plan.evaluate(
        str(operation), protocol="redfish", sessions=sessions, in_flight=keeper.in_flight
    )
    fired = tuple(str(f.effect) for f in firings)

    def record(status: int | None) -> None:
        bmc.record(RequestRecord(request.method, request.path, operation, status, fired))

    action = decide(firings)

    def drop() -> None:
        if action.reboot is not None:
            bmc.machine.reboot_bmc(action.reboot)
            reboot()

    async def serve(copies: int) -> tuple[Response, bool]:
        refused = _authenticate(keeper, request)
        if refused is not None:
            return refused, False
        # A duplicated request is served every time it arrives (a middlebox
        # resent it); the client reads one answer.
        for _ in range(copies):
            _dispatch(bmc, request, action.hardware)
        last = _dispatch(bmc, request, action.hardware)
        return last, True

    def answered(response: Response | None) -> None:
        record(None if response is None else response.status)

    return await answers.carry_out(
        action,
        request,
        reader,
        writer,
        forge=lambda firing: _bmc_answer(keeper, request, firing),
        serve=serve,
        drop=drop,
        answered=answered,
    )


def _bmc_answer(bmc: Bmc, request: Request, firing: Firing) -> Response | None:
    """The answer a BMC-layer effect gives (None: serve the request anyway)."""
    if answers.expires_sessions(firing):
        bmc.forget_sessions()  # every token dies, a fresh login works
    return answers.redfish_forged(firing, request)


def _authenticate(bmc: Bmc, request: Request) -> Response | None:
    """None when the request may be served; else the 401 to send."""
    if (request.method, urllib.parse.unquote(request.path).rstrip("/") or "/") in PUBLIC:
        return None
    token = request.header("x-auth-token")
    if token is not None:
        if bmc.session_for(token) is not None:
            return None
        return _unauthorized("Base.1.8.NoValidSession", "no valid session")
    scheme, _, encoded = (request.header("authorization") or "").partition(" ")
    if scheme.lower() == "basic":
        try:
            user, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            user = password = ""
        if bmc.check_password(user, password):
            return None
    return _unauthorized("Base.1.8.ResourceAtUriUnauthorized", "authentication required")


def _unauthorized(message_id: str, message: str) -> Response:
    realm = [("WWW-Authenticate", 'Basic realm="hwlab BMC"')]
    return redfish_error(401, message_id, message, headers=realm)


def _dispatch(bmc: Bmc, request: Request, hardware: list[Firing]) -> Response:
    """Serve the request through the engine; hardware effects go to the
    machine. A request naming the system by UUID is redirected to its one
    id; one asking for another OData version is refused (412)."""
    refused = odata_version_refused(request)
    if refused is not None:
        return Response(*refused)
    moved = canonical(bmc, request.target)
    if moved is not None:
        return Response(308, [("Location", moved), ("OData-Version", "4.0")])
    served = serve_lifecycle(bmc, request, hardware)  # Bios, firmware, parts: every shape
    if served is None:
        served = serve_shape(bmc, bmc.shape, request, hardware)
    return Response(*served)
