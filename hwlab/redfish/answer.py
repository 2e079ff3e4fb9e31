"""How one emulated BMC answers one HTTP request.

In order: count it, evaluate the machine's fault plan for its operation, carry
out the wire effects (hang, drop, delay) and BMC effects (reboot, busy,
internal error, auth failure, unsupported, malformed reply) on the socket,
check credentials, and only then hand the request, with any hardware effects,
to sushy-tools' application.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Any

from fakes.faults import Effect, Firing, Layer
from hwlab.redfish import effects, minihttp
from hwlab.redfish.app import RequestContext, call_app
from hwlab.redfish.bmc import Bmc, RequestRecord

__all__ = ["answer"]


async def answer(
    bmc: Bmc,
    request: minihttp.Request,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    server: tuple[str, int],
    scheme: str,
    reboot: Callable[[], None],
) -> bool:
    """Answer ``request``; False when the connection must close.

    ``reboot`` takes the BMC's endpoint down (the ``bmc_reboot`` effect).
    """
    bmc.count_request()
    operation = effects.operation_for(
        request.method, request.path, request.headers.get(effects.OPERATION_HEADER)
    )
    firings = bmc.machine.plan.evaluate(str(operation), protocol="redfish")
    fired = tuple(str(f.effect) for f in firings)

    def record(status: int | None) -> None:
        bmc.record(RequestRecord(request.method, request.path, operation, status, fired))

    response: minihttp.Response | None = None
    garble = False
    copies = 0
    hardware: list[Firing] = []
    for firing in firings:
        effect, params = firing.effect, firing.params
        if effect is Effect.HANG:
            record(None)
            while await reader.read(65536):
                pass  # accept, never answer: wait for the client to give up
            return False
        if effect is Effect.DROP:
            record(None)
            return False  # closed without a response
        if effect is Effect.DELAY:
            await asyncio.sleep(float(params["seconds"]))
        elif effect is Effect.BMC_REBOOT:
            record(None)
            bmc.machine.reboot_bmc(float(params["duration"]))
            reboot()
            return False
        elif effect is Effect.MALFORMED_REPLY:
            garble = True
        elif effect is Effect.DUPLICATE:
            copies += int(params["copies"])
        elif firing.layer is Layer.HARDWARE:
            hardware.append(firing)
        elif response is None:
            response = _bmc_effect(bmc, request, effect, params)
    if response is None:
        response = _authenticate(bmc, request)
    if response is None:
        peer = writer.get_extra_info("peername")
        # A duplicated request is served every time it arrives (a middlebox
        # resent it); the client reads one answer.
        for _ in range(copies):
            _dispatch(bmc, request, hardware, server=server, scheme=scheme, peer=peer)
        response = _dispatch(bmc, request, hardware, server=server, scheme=scheme, peer=peer)
    record(response.status)
    if garble and (request.method != "GET" or not response.body):
        writer.write(effects.GARBLED_REPLY)  # nothing to cut short: answer in non-HTTP
        await writer.drain()
        return False
    if garble:
        response = effects.truncated(response)
    await minihttp.write_response(writer, response, keep_alive=request.keep_alive)
    return request.keep_alive


def _bmc_effect(
    bmc: Bmc, request: minihttp.Request, effect: Effect, params: Mapping[str, Any]
) -> minihttp.Response | None:
    """The answer a BMC-layer effect gives (None: serve the request anyway)."""
    if effect is Effect.BUSY:
        return effects.busy(params.get("retry_after"))
    if effect is Effect.INTERNAL_ERROR:
        return effects.internal_error(str(params["message_id"]))
    if effect is Effect.UNSUPPORTED:
        return effects.unsupported(request.method)
    if effect is Effect.AUTH_FAIL:
        if params.get("scope") == "session":
            # The session expired: every token dies, a fresh login works.
            # Basic auth has no session to lose, so it is served as usual.
            bmc.forget_sessions()
            if "x-auth-token" not in request.headers:
                return None
            return effects.unauthorized("Base.1.8.NoValidSession", "session expired")
        return effects.unauthorized("Base.1.8.ResourceAtUriUnauthorized", "credentials rejected")
    return None


def _authenticate(bmc: Bmc, request: minihttp.Request) -> minihttp.Response | None:
    """None when the request may be served; else the 401 to send."""
    if (request.method, request.path.rstrip("/") or "/") in effects.PUBLIC:
        return None
    token = request.headers.get("x-auth-token")
    if token is not None:
        if bmc.session_for(token) is not None:
            return None
        return effects.unauthorized("Base.1.8.NoValidSession", "no valid session")
    scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "basic":
        try:
            user, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            user = password = ""
        if bmc.check_password(user, password):
            return None
    return effects.unauthorized("Base.1.8.ResourceAtUriUnauthorized", "authentication required")


def _dispatch(
    bmc: Bmc,
    request: minihttp.Request,
    hardware: list[Firing],
    *,
    server: tuple[str, int],
    scheme: str,
    peer: Any,
) -> minihttp.Response:
    """Serve the request through sushy-tools' app; hardware effects go to the machine."""
    context = RequestContext(bmc, hardware)
    if request.method == "GET" and hardware:
        bmc.machine.apply(context.take_firings())  # power_lost, seen by this very read
    env = minihttp.environ(request, server=server, scheme=scheme, peer=peer)
    status, headers, body = call_app(context, env)
    if hardware and not context.consumed:
        bmc.machine.apply(context.take_firings())
    code = int(status.split(" ", 1)[0])
    return minihttp.Response(code, [*headers, ("OData-Version", "4.0")], body)
