"""One RMCP+ session on an emulated BMC, on top of pyghmi's server session.

pyghmi's ``ServerSession`` frames, encrypts and authenticates IPMI 2.0
packets well, and :class:`LabSession` keeps all of that. It replaces the parts
that break real clients (pyghmi 1.6.19, each measured against pyghmi's own
client and ipmitool 1.8.19):

==========================================  =========================================
pyghmi server behaviour                     what LabSession does instead
==========================================  =========================================
answers every Open Session Request with     negotiates: suite 17 (HMAC-SHA256) or 3
cipher suite 3, even to a suite-17          (HMAC-SHA1), else RMCP+ status 0x11 so the
proposal: pyghmi's client then dies in      client can fall back
RAKP2 on ``struct.error``
ignores RAKP1 for an unknown user: the      answers RAKP2 with status 0x0D
client retries forever                      (unauthorized name)
ignores a RAKP3 with a bad auth code        answers RAKP4 with status 0x0F
raises ``AttributeError`` on Set Session    answers the present level, as the spec says
Privilege Level 0 (``clientpriv`` unset)
registers itself in a process-global        is owned by its :class:`~bmaas.hwlab.ipmi.bmc.LabBmc`
table and never leaves it                   and dropped on Close Session or idle expiry
==========================================  =========================================

Login faults are decided once, at the Open Session Request (the ``login``
operation), and carried out at the step where a real BMC would fail: see
:class:`LoginFaults`.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import hmac
import logging
import os
import socket
import struct
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from pyghmi.ipmi.private import constants
from pyghmi.ipmi.private import serversession as _pyghmi_server

from bmaas.fakes.effects import Effect
from bmaas.hwlab.answers import IPMI_LOGIN_ANSWERS

__all__ = [
    "CIPHER_SUITES",
    "CipherSuite",
    "EventLoop",
    "LabSession",
    "LoginFaults",
    "RequestContext",
    "SessionHost",
]

LOG = logging.getLogger(__name__)

ADMINISTRATOR = 4

# RMCP+ / RAKP status codes (IPMI 2.0 table 13-15)
RMCP_INSUFFICIENT_RESOURCES = 0x01
RMCP_INVALID_SESSION_ID = 0x02
RMCP_UNAUTHORIZED_ROLE = 0x09
RMCP_INVALID_NAME_LENGTH = 0x0C
RMCP_UNAUTHORIZED_NAME = 0x0D
RMCP_INVALID_INTEGRITY_VALUE = 0x0F
RMCP_NO_CIPHER_SUITE_MATCH = 0x11
RMCP_ILLEGAL_PARAMETER = 0x12


@dataclasses.dataclass(frozen=True)
class CipherSuite:
    """One RMCP+ cipher suite: algorithm numbers and the hash behind them."""

    number: int
    auth: int  # table 13-17: 1 HMAC-SHA1, 3 HMAC-SHA256
    integrity: int  # table 13-18: 1 HMAC-SHA1-96, 4 HMAC-SHA256-128
    confidentiality: int  # table 13-19: 1 AES-CBC-128
    digest: Callable[..., Any]
    icv_length: int  # bytes of the integrity check value on the wire

    def record(self) -> bytes:
        """This suite as a Get Channel Cipher Suites record (table 22-19)."""
        return bytes([0xC0, self.number, self.auth, 0x40 | self.integrity, 0x80 | 1])


#: what the lab BMC offers, strongest first (suite 17 is what pyghmi proposes first)
CIPHER_SUITES: dict[int, CipherSuite] = {
    17: CipherSuite(
        17, auth=3, integrity=4, confidentiality=1, digest=hashlib.sha256, icv_length=16
    ),
    3: CipherSuite(3, auth=1, integrity=1, confidentiality=1, digest=hashlib.sha1, icv_length=12),
}


def negotiate(request: bytes, offered: tuple[int, ...]) -> CipherSuite | None:
    """The suite matching an Open Session Request's proposal, or ``None``.

    Each of the three algorithm payloads (table 13-9) names one algorithm, or
    is empty (length 0), which lets the BMC choose.
    """
    wanted: list[int | None] = []
    for start in (8, 16, 24):
        payload = request[start : start + 8]
        if len(payload) < 4 or payload[3] == 0:
            wanted.append(None)
        elif len(payload) < 5:
            return None
        else:
            wanted.append(payload[4] & 0x3F)
    for number in offered:
        suite = CIPHER_SUITES[number]
        actual = (suite.auth, suite.integrity, suite.confidentiality)
        if all(w is None or w == a for w, a in zip(wanted, actual, strict=True)):
            return suite
    return None


@dataclasses.dataclass
class LoginFaults:
    """BMC-layer effects that fired on ``login``, and the step that carries each out.

    * ``busy``: Open Session answered with status 0x01 (no session slot)
    * ``unsupported``: Open Session answered with status 0x11 (no cipher suite)
    * ``auth_fail``: RAKP2 with status 0x0D (unauthorized name), the
      credentials rejected (:data:`bmaas.hwlab.answers.IPMI_LOGIN_ANSWERS`)
    * ``malformed``: RAKP2 cut short (a truncated key-exchange auth code)
    """

    auth_fail: bool = False
    malformed: bool = False


@dataclasses.dataclass(frozen=True)
class RequestContext:
    """What a response needs from its request, captured so that a delayed
    answer still goes to the right sequence number after later requests."""

    netfn: int
    command: int
    seqlun: int
    rqaddr: int
    rqlun: int


class EventLoop(Protocol):
    """What a lab BMC and its sessions need of the loop that serves them
    (:class:`bmaas.hwlab.ipmi.server.IPMIServer`): its clock, its timers, its sends.
    Said here, where both sides meet, so neither imports the other."""

    def now(self) -> float: ...

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any, **kw: Any) -> None: ...

    def sendto(self, sock: socket.socket, packet: bytes, addr: Any) -> None: ...


class SessionHost(Protocol):
    """What a :class:`LabSession` needs of its BMC
    (:class:`bmaas.hwlab.ipmi.bmc.LabBmc`): who it is, its socket and loop, its
    one user, and where requests and dropped sessions go."""

    name: str
    socket: socket.socket
    uuid: uuid.UUID
    server: EventLoop

    def knows_user(self, name: bytes) -> bool: ...

    def user_key(self) -> bytes: ...

    def send(self, packet: bytes, addr: Any) -> None: ...

    def drop_session(self, session: LabSession) -> None: ...

    def handle_request(self, session: LabSession, ctx: RequestContext, data: bytes) -> None: ...


class LabSession(_pyghmi_server.ServerSession):
    """The BMC end of one RMCP+ session with one client address."""

    def __new__(cls, *args: Any, **kwargs: Any) -> LabSession:
        # pyghmi's Session.__new__ shares sessions between callers; a server
        # session is always its own object.
        return object.__new__(cls)

    def __init__(
        self,
        bmc: SessionHost,
        clientaddr: Any,
        request: bytes,
        suite: CipherSuite,
        faults: LoginFaults,
    ) -> None:
        # Deliberately not calling ServerSession.__init__: it registers the
        # session in pyghmi's process-global handler table and answers at once.
        self.bmc = bmc
        self.faults = faults
        self.suite = suite
        self.sockaddr = clientaddr
        self.socket = bmc.socket
        self.uuid = bmc.uuid
        self.servermode = True
        self.ipmiversion = 2.0
        self.authtype = 6
        self.integrityalgo: int | str = 0  # pyghmi's names once the session is up
        self.confalgo: int | str = 0
        self.sequencenumber = 0
        self.sessionid = 0
        self.rqaddr = constants.IPMI_BMC_ADDRESS
        self.rqlun = 0
        self.currhashlib = suite.digest
        self.currhashlen = suite.icv_length
        self.k1: bytes | None = None
        self.lastpayload = None
        self.broken = False
        self.closed = False
        self.established = False
        self.pendingpayloads: collections.deque[Any] = collections.deque()
        self.pktqueue: collections.deque[Any] = collections.deque()
        self.clienttag = request[0]
        self.maxpriv = (request[1] & 0x0F) or ADMINISTRATOR
        self.clientpriv = 0
        self.clientsessionid = bytes(request[4:8])
        self.managedsessionid = os.urandom(4)
        self.localsid = struct.unpack("<I", self.managedsessionid)[0]
        self.last_seen = bmc.server.now()
        self._send_open_session_response()

    def __repr__(self) -> str:
        return f"<LabSession {self.bmc.name} client={self.sockaddr} suite={self.suite.number}>"

    # -- packets in ----------------------------------------------------------

    def receive(self, data: bytearray) -> None:
        """One RMCP+ packet from this session's client address."""
        self.last_seen = self.bmc.server.now()
        self._handle_ipmi2_packet(data)

    def _got_rmcp_openrequest(self, data: bytearray) -> None:
        # LabBmc handles Open Session Requests (each one is a new login).
        return

    # -- RAKP (IPMI 2.0 section 13.20) ----------------------------------------

    def _send_open_session_response(self) -> None:
        s = self.suite
        payload = (
            bytes([self.clienttag, 0, ADMINISTRATOR, 0])
            + self.clientsessionid
            + self.managedsessionid
            + bytes([0, 0, 0, 8, s.auth, 0, 0, 0])
            + bytes([1, 0, 0, 8, s.integrity, 0, 0, 0])
            + bytes([2, 0, 0, 8, s.confidentiality, 0, 0, 0])
        )
        self._send_rmcp(payload, "rmcpplusopenresponse")

    def _rakp_error(self, kind: str, tag: int, status: int) -> None:
        self._send_rmcp(bytes([tag, status, 0, 0]) + self.clientsessionid, kind)
        self.bmc.drop_session(self)

    def _got_rakp1(self, data: bytearray) -> None:
        if len(data) < 28:
            return  # too short to answer: a real BMC drops it too
        tag = data[0]
        if bytes(data[4:8]) != self.managedsessionid:
            self._rakp_error("rakp2", tag, RMCP_INVALID_SESSION_ID)
            return
        self.Rm = bytes(data[8:24])
        self.rolem = data[24]
        namelen = data[27]
        self.username = bytes(data[28 : 28 + namelen])
        if namelen > 16 or len(self.username) != namelen:
            self._rakp_error("rakp2", tag, RMCP_INVALID_NAME_LENGTH)
            return
        if self.faults.auth_fail:
            self._rakp_error("rakp2", tag, IPMI_LOGIN_ANSWERS[Effect.AUTH_FAIL].code)
            return
        if not self.bmc.knows_user(self.username):
            LOG.debug("%s: RAKP1 for an unknown user: status 0x0D", self.bmc.name)
            self._rakp_error("rakp2", tag, RMCP_UNAUTHORIZED_NAME)
            return
        if (self.rolem & 0x0F) > ADMINISTRATOR:
            self._rakp_error("rakp2", tag, RMCP_UNAUTHORIZED_ROLE)
            return
        self.maxpriv = min(self.maxpriv, (self.rolem & 0x0F) or ADMINISTRATOR)
        self.Rc = os.urandom(16)
        self.kuid = self.bmc.user_key()
        self.kg = self.kuid  # no BMC key (Kg) configured: Kuid stands in, per the spec
        signed = (
            self.clientsessionid
            + self.managedsessionid
            + self.Rm
            + self.Rc
            + self.uuid.bytes
            + bytes([self.rolem, namelen])
            + self.username
        )
        authcode = hmac.new(self.kuid, signed, self.suite.digest).digest()
        if self.faults.malformed:
            authcode = authcode[: len(authcode) // 2]
        reply = bytes([tag, 0, 0, 0]) + self.clientsessionid + self.Rc + self.uuid.bytes + authcode
        self._send_rmcp(reply, "rakp2")

    def _got_rakp3(self, data: bytearray) -> None:
        if len(data) < 8 or not hasattr(self, "Rc"):
            return
        tag = data[0]
        if data[1] != 0:
            self.bmc.drop_session(self)  # the client did not like our RAKP2
            return
        namelen = bytes([self.rolem, len(self.username)])
        expected = hmac.new(
            self.kuid, self.Rc + self.clientsessionid + namelen + self.username, self.suite.digest
        ).digest()
        if not hmac.compare_digest(bytes(data[8:]), expected):
            self._rakp_error("rakp4", tag, RMCP_INVALID_INTEGRITY_VALUE)
            return
        digest = self.suite.digest
        self.sik = hmac.new(self.kg, self.Rm + self.Rc + namelen + self.username, digest).digest()
        self.k1 = hmac.new(self.sik, b"\x01" * 20, digest).digest()
        self.k2 = hmac.new(self.sik, b"\x02" * 20, digest).digest()
        self.aeskey = self.k2[:16]
        icv = hmac.new(self.sik, self.Rm + self.managedsessionid + self.uuid.bytes, digest)
        reply = bytes([tag, 0, 0, 0]) + self.clientsessionid + icv.digest()[: self.suite.icv_length]
        self._send_rmcp(reply, "rakp4")
        # From here on every packet is encrypted and signed with this session's keys.
        self.confalgo = "aes"
        self.integrityalgo = self.suite.integrity
        self.sequencenumber = 1
        self.sessionid = struct.unpack("<I", self.clientsessionid)[0]
        self.ipmicallback = self._got_request
        self.established = True

    # -- IPMI requests inside the session ------------------------------------

    def _got_request(self, request: dict[str, Any]) -> None:
        ctx = RequestContext(
            netfn=request["netfn"],
            command=request["command"],
            seqlun=self.seqlun,
            rqaddr=self.clientaddr,
            rqlun=self.rqlun,
        )
        data = bytes(request["data"])
        if ctx.netfn == 6 and ctx.command == 0x3B:  # Set Session Privilege Level
            self._set_privilege(ctx, data)
        elif ctx.netfn == 6 and ctx.command == 0x3C:  # Close Session
            self.respond(ctx)
            self.bmc.drop_session(self)
        else:
            self.bmc.handle_request(self, ctx, data)

    def _set_privilege(self, ctx: RequestContext, data: bytes) -> None:
        wanted = data[0] & 0x0F if data else 0
        if wanted == 0:  # "present level": what the session runs at now
            self.respond(ctx, data=[self.clientpriv or min(self.maxpriv, 2)])
        elif wanted == 1 or wanted > self.maxpriv:
            self.respond(ctx, 0x81)  # level not allowed for this user on this channel
        else:
            self.clientpriv = wanted
            self.respond(ctx, data=[wanted])

    # -- packets out -----------------------------------------------------------

    def respond(
        self,
        ctx: RequestContext,
        code: int = 0,
        data: Any = (),
        *,
        malformed: bool = False,
    ) -> None:
        """Answer one request. ``malformed`` sends a response message without
        its completion code byte: 7 bytes, which a client must reject."""
        if self.closed:
            return
        self.seqlun = ctx.seqlun
        self.clientaddr = ctx.rqaddr
        self.rqlun = ctx.rqlun
        self.clientnetfn = ctx.netfn + 1
        self.clientcommand = ctx.command
        if malformed:
            payload = self._make_ipmi_payload(ctx.netfn + 1, ctx.command, None, bytearray())
            self.send_payload(payload, constants.payload_types["ipmi"], retry=False)
        else:
            self._send_ipmi_net_payload(code=code, data=data)

    def _send_rmcp(self, payload: bytes, kind: str) -> None:
        self.send_payload(bytearray(payload), constants.payload_types[kind], retry=False)

    def _xmit_packet(self, retry: bool = True, delay_xmit: Any = None, timeout: Any = None) -> None:
        if self.sequencenumber:
            self.sequencenumber += 1
        self.bmc.send(bytes(self.netpacket), self.sockaddr)

    # -- pyghmi hooks that must do nothing on a server ---------------------

    def _timedout(self) -> None:
        return

    def logout(self, sessionok: bool = True) -> dict[str, bool]:
        return {"success": True}
