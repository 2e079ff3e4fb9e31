"""What each effect puts on the wire, one table per protocol.

The effects themselves (and what a server does about them) are defined in
:mod:`bmaas.fakes.effects`; this module says only what the client receives. Both
the emulators (``hwlab/ipmi``, ``hwlab/redfish``) and the fault proxies
(``hwlab/proxy``) answer from these tables, so an emulated BMC and a proxied
real one fail the same way.

IPMI, in-session requests (:data:`IPMI_CODES`):

=================  ==========================================================
busy               completion code 0xC0 (node busy)
internal_error     completion code 0xFF (unspecified error)
unsupported        completion code 0xC1 (invalid command)
auth_fail          completion code 0xD4 (insufficient privilege)
incident           the incident's completion code; served as usual when the
                   incident has no IPMI answer
malformed_reply    completion code 0 and nothing after it
trickle            the datagram is held until its last byte would have come
power_stuck        a proxy's only: completion code 0 (:data:`IPMI_ACCEPTED`)
                   to Chassis Control, which is never relayed
=================  ==========================================================

IPMI, the login (:data:`IPMI_LOGIN_ANSWERS`; one evaluation per login):

=================  ==========================================================
internal_error     Get Channel Authentication Capabilities: completion 0xFF
busy               Open Session Response: RMCP+ status 0x01 (no resources)
session_limit      Open Session Response: RMCP+ status 0x01
unsupported        Open Session Response: RMCP+ status 0x11 (no cipher suite)
incident           Open Session Response: the incident's RMCP+ status
auth_fail          RAKP2: RMCP+ status 0x0D (unauthorized name)
malformed_reply    the BMC's RAKP2 cut short
=================  ==========================================================

Redfish:

=================  ==========================================================
busy               503 + ``Retry-After`` when ``retry_after`` is set
session_limit      503 naming ``message_id`` (SessionLimitExceeded; iDRAC
                   ``IDRAC.2.8.RAC0218``) on a login beyond ``sessions``
internal_error     500 with ``@Message.ExtendedInfo`` naming ``message_id``
auth_fail          401 with ``WWW-Authenticate`` (scope=session: NoValidSession,
                   to a request with a session token; every token dies, and
                   Basic auth, which has no session to lose, is served)
unsupported        405 (+ ``Allow``) for changes, 501 for reads
incident           the vendor's status, headers and body (bmaas.fakes.incidents);
                   served as usual when the incident has no Redfish answer;
                   carried out first when the incident ``executes``
malformed_reply    a read's JSON body cut in half; any other answer replaced
                   by a reply that is not HTTP at all
power_stuck        a proxy's only: 204 to the Reset, which is never relayed
                   (an emulated node accepts it and its machine never moves)
task_hang,         a proxy's: 202 to SimpleUpdate and a task it serves itself
update_rejected,   (``hwlab/proxy/updates.py``: stateful, so not here); an
version_unchanged, emulated node's machine takes the update (its task, the
update_reboot      same document: ``hwlab/redfish/tasks.py``)
trickle            the answer, head and body, ``bytes`` at a time every
                   ``every`` seconds
hang               nothing: the connection held open until the client goes
drop, bmc_reboot,  nothing: the connection reset (a TCP RST, not a FIN),
overload           and bmc_reboot's port closed for its window
=================  ==========================================================
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import socket
import struct
from collections.abc import Awaitable, Callable
from enum import StrEnum

from bmaas.fakes.effects import Action, Effect, incident_of, trickle_seconds
from bmaas.fakes.faults import Firing
from bmaas.fakes.incidents import INCIDENTS, Incident
from bmaas.hwlab.http import Request, Response, redfish_error

__all__ = [
    "GARBLED_REPLY",
    "IPMI_ACCEPTED",
    "IPMI_CODES",
    "IPMI_LOGIN_ANSWERS",
    "IPMI_OVERHEAD",
    "LoginAnswer",
    "LoginPhase",
    "carry_out",
    "corrupt",
    "executes",
    "expires_sessions",
    "ipmi_code",
    "ipmi_login_answer",
    "ipmi_login_status",
    "ipmi_trickle_delay",
    "redfish_answer",
    "redfish_forged",
    "reset",
    "send",
]

#: completion code each BMC-layer effect answers an in-session IPMI request with
IPMI_CODES: dict[Effect, int] = {
    Effect.BUSY: 0xC0,
    Effect.INTERNAL_ERROR: 0xFF,
    Effect.UNSUPPORTED: 0xC1,
    Effect.AUTH_FAIL: 0xD4,
}

#: the completion code of a request taken: what an IPMI proxy answers a
#: Chassis Control it never relays (``power_stuck``, :data:`ACKNOWLEDGED
#: <bmaas.hwlab.proxy.effects.ACKNOWLEDGED>`)
IPMI_ACCEPTED = 0x00

#: bytes an RMCP+ answer carries besides its data (headers, pad, integrity)
IPMI_OVERHEAD = 40


def ipmi_trickle_delay(data_bytes: int, trickle: tuple[int, float]) -> float:
    """How long a trickling BMC holds an IPMI answer of ``data_bytes``: one
    datagram cannot arrive in pieces, so it comes whole when its last byte would."""
    return trickle_seconds(IPMI_OVERHEAD + data_bytes, trickle)


def ipmi_code(firing: Firing) -> int | None:
    """The completion code a BMC-layer effect answers an in-session IPMI
    request with; None: an incident with no IPMI answer (serve as usual)."""
    incident = incident_of(firing)
    if incident is not None:
        return incident.ipmi_code
    if firing.effect is Effect.POWER_STUCK:
        return IPMI_ACCEPTED  # a proxy's: accepted in the BMC's place, never relayed
    return IPMI_CODES[firing.effect]


#: RMCP+ "insufficient resources to create a session" (IPMI 2.0 table 13-15)
RMCP_BUSY = 0x01
#: RMCP+ "no cipher suite match with proposed security algorithms"
RMCP_NO_CIPHER_SUITE = 0x11
#: RMCP+ "unauthorized name": what a BMC answers RAKP1 for credentials it rejects
RMCP_UNAUTHORIZED_NAME = 0x0D


class LoginPhase(StrEnum):
    """The step of an RMCP+ login a BMC-layer effect shows at: the first
    answer of the login that can show it to a client with no session key."""

    #: Get Channel Authentication Capabilities: a completion code
    CHANNEL_AUTH = "channel_auth"
    #: Open Session Response: an RMCP+ status
    OPEN_SESSION = "open_session"
    #: RAKP message 2: an RMCP+ status
    RAKP2 = "rakp2"


@dataclasses.dataclass(frozen=True)
class LoginAnswer:
    """What a login gets: at ``phase``, ``code`` (a completion code at
    CHANNEL_AUTH, else an RMCP+ status), the login ending there."""

    phase: LoginPhase
    code: int


#: the one table of what each BMC-layer effect answers an IPMI login with,
#: used by the emulator (hwlab/ipmi) and the proxy (hwlab/proxy) alike; each
#: is what real BMCs answer, and what the bmaas IPMI driver classifies to the
#: effect's fault (drivers/ipmi/classify.py)
IPMI_LOGIN_ANSWERS: dict[Effect, LoginAnswer] = {
    # no session slot now (a BMC at its session limit answers the same)
    Effect.BUSY: LoginAnswer(LoginPhase.OPEN_SESSION, RMCP_BUSY),
    Effect.SESSION_LIMIT: LoginAnswer(LoginPhase.OPEN_SESSION, RMCP_BUSY),
    # a BMC without the proposed cipher suite (suite 3 or 17 turned off)
    Effect.UNSUPPORTED: LoginAnswer(LoginPhase.OPEN_SESSION, RMCP_NO_CIPHER_SUITE),
    # the user name / credentials rejected at RAKP1
    Effect.AUTH_FAIL: LoginAnswer(LoginPhase.RAKP2, RMCP_UNAUTHORIZED_NAME),
    # the BMC's IPMI stack failing the login's first request
    Effect.INTERNAL_ERROR: LoginAnswer(LoginPhase.CHANNEL_AUTH, 0xFF),
}


def ipmi_login_answer(firing: Firing) -> LoginAnswer | None:
    """What a BMC-layer effect answers an IPMI login with; None: not a login
    answer (an incident with no RMCP+ status; malformed_reply, which cuts the
    BMC's own RAKP2 short)."""
    incident = incident_of(firing)
    if incident is not None:
        status = incident.rmcp_status
        return None if status is None else LoginAnswer(LoginPhase.OPEN_SESSION, status)
    return IPMI_LOGIN_ANSWERS.get(firing.effect)


def ipmi_login_status(firing: Firing) -> int | None:
    """The RMCP+ Open Session status a BMC-layer effect refuses a login with,
    when it answers there (busy, session_limit, unsupported, an incident)."""
    answer = ipmi_login_answer(firing)
    return answer.code if answer is not None and answer.phase is LoginPhase.OPEN_SESSION else None


def executes(firing: Firing | None) -> bool:
    """Whether the BMC carries the request out before answering (an incident
    such as "already on", the answer a resent copy gets)."""
    incident = incident_of(firing) if firing is not None else None
    return incident is not None and incident.executes


def _session_limit_incident(firing: Firing) -> Incident | None:
    """A ``session_limit`` naming a vendor's MessageId (iDRAC's RAC0218) is
    answered with that vendor's whole documented body (bmaas.fakes.incidents), not
    a generic one: the count is the trigger, the incident the answer."""
    if firing.effect is not Effect.SESSION_LIMIT:
        return None
    wanted = str(firing.params.get("message_id", ""))
    for incident in INCIDENTS.values():
        reply = incident.redfish
        if (
            reply is not None
            and incident.trigger.operation == "login"
            and wanted in reply.message_ids
        ):
            return incident
    return None


def expires_sessions(firing: Firing) -> bool:
    """``auth_fail`` with ``scope=session``: every session token the BMC
    issued dies (the server forgets them), a fresh login works."""
    return firing.effect is Effect.AUTH_FAIL and firing.params.get("scope") == "session"


def redfish_forged(firing: Firing, request: Request) -> Response | None:
    """The answer a BMC-layer effect gives ``request`` in the BMC's place;
    None: serve it as usual. An expired session is a 401 only to a request
    that carries a session token: Basic auth has no session to lose."""
    if expires_sessions(firing) and request.header("x-auth-token") is None:
        return None
    return redfish_answer(firing, request.method)


def redfish_answer(firing: Firing, method: str) -> Response | None:
    """The error a BMC-layer effect answers a Redfish request with; None: an
    incident with no Redfish answer (serve the request as usual)."""
    effect, params = firing.effect, firing.params
    incident = incident_of(firing) or _session_limit_incident(firing)
    if incident is not None:
        reply = incident.redfish
        if reply is None:
            return None
        headers = [("Content-Type", "application/json"), ("OData-Version", "4.0")]
        return Response(reply.status, [*headers, *reply.headers], json.dumps(reply.body).encode())
    if effect is Effect.BUSY:
        retry = params.get("retry_after")
        extra = [("Retry-After", str(math.ceil(retry)))] if retry is not None else []
        return redfish_error(
            503, "Base.1.8.ServiceTemporarilyUnavailable", "the BMC is busy", headers=extra
        )
    if effect is Effect.INTERNAL_ERROR:
        return redfish_error(500, str(params["message_id"]), "the BMC failed the request")
    if effect is Effect.SESSION_LIMIT:
        return redfish_error(
            503,
            str(params["message_id"]),
            "the maximum number of user sessions is reached",
        )
    if effect is Effect.AUTH_FAIL:
        realm = [("WWW-Authenticate", 'Basic realm="hwlab BMC"')]
        if params.get("scope") == "session":
            return redfish_error(401, "Base.1.8.NoValidSession", "session expired", headers=realm)
        return redfish_error(
            401, "Base.1.8.ResourceAtUriUnauthorized", "credentials rejected", headers=realm
        )
    if effect is Effect.UNSUPPORTED:
        if method == "GET":
            return redfish_error(501, "Base.1.8.ActionNotSupported", "not implemented")
        return redfish_error(
            405,
            "Base.1.8.ActionNotSupported",
            f"{method} is not allowed here",
            headers=[("Allow", "GET")],
        )
    if effect is Effect.POWER_STUCK:
        # a proxy's: the Reset accepted as hwlab's emulator and sushy-tools
        # accept it (204), and never relayed, so the power never moves
        return Response(204, [("OData-Version", "4.0")])
    raise ValueError(f"{effect} is not answered in the BMC's place")


#: a reply that is not HTTP at all (the status code is not a number)
GARBLED_REPLY = b'HTTP/1.1 2OO Ok\r\nContent-Type: application/json\r\n\r\n{"PowerSt'


def corrupt(response: Response, method: str, *, keep_alive: bool) -> tuple[bytes, bool]:
    """The bytes of a malformed answer, and whether the connection stays open.

    A read with a body gets its JSON cut in half (a BMC that crashed
    mid-reply); anything else has nothing to cut short and is answered in
    something that is not HTTP, then closed.
    """
    if method != "GET" or not response.body:
        return GARBLED_REPLY, False
    cut = Response(response.status, response.headers, response.body[: len(response.body) // 2])
    return cut.encode(keep_alive=keep_alive), keep_alive


async def carry_out(
    action: Action,
    request: Request,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    forge: Callable[[Firing], Response | None],
    serve: Callable[[int], Awaitable[tuple[Response, bool]]],
    drop: Callable[[], None],
    answered: Callable[[Response | None], None] | None = None,
) -> bool:
    """Carry out one HTTP request's :class:`~bmaas.fakes.effects.Action`, the one
    executor of the Redfish emulator and the Redfish proxy; False when the
    connection must close.

    Silent: ``hang`` holds the connection until the client goes, anything
    else resets it (:func:`reset`), then ``drop()`` (the server forgets
    it; ``bmc_reboot`` takes the BMC down). Then the
    delay; then the BMC answer ``forge`` gives in the server's place, or
    ``serve(copies)`` (the request served 1 + ``copies`` times, the last
    answer kept; its flag False when it was refused before being served,
    such as a 401), with an executing answer (an incident's "already on")
    given after serving. ``answered`` sees the response (None when silent)
    before it is sent, corrupted or trickled as the action says.
    """
    if action.silent is not None:
        if answered is not None:
            answered(None)
        if action.hangs:
            while await reader.read(65536):
                pass  # accept, never answer: wait for the client to give up
        else:
            reset(writer)
            drop()
        return False
    if action.delay:
        await asyncio.sleep(action.delay)
    forged = forge(action.answer) if action.answer is not None else None
    if forged is not None and not executes(action.answer):
        response = forged
    else:
        response, served = await serve(action.copies)
        if forged is not None and served:
            response = forged  # carried out, then answered as a resent copy would be
    if answered is not None:
        answered(response)
    keep = request.keep_alive
    if action.corrupt:
        data, keep = corrupt(response, request.method, keep_alive=keep)
    else:
        data = response.encode(keep_alive=keep)
    await send(writer, data, action.trickle)
    return keep


def reset(writer: asyncio.StreamWriter) -> None:
    """Abort a connection with a TCP reset, as a crashing BMC's stack does:
    the client reads ECONNRESET, never a clean end of the answer (a FIN)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def send(
    writer: asyncio.StreamWriter, data: bytes, trickle: tuple[int, float] | None = None
) -> None:
    """Write an answer; trickled, ``bytes`` at a time every ``every`` seconds."""
    if trickle is None:
        writer.write(data)
        await writer.drain()
        return
    size, every = trickle
    for start in range(0, len(data), size):
        if writer.is_closing():
            return  # the client gave up
        writer.write(data[start : start + size])
        await writer.drain()
        if start + size < len(data):
            await asyncio.sleep(every)
