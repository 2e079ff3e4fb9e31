"""What the IPMI relay learns by watching RMCP+ logins go past.

:class:`Login` follows one login exchange (Get Channel Auth Capabilities,
Open Session, RAKP 1-4) of one client, records what key derivation needs,
and checks the proxy's credentials against the BMC's own proofs: the RAKP2
key-exchange code (the password) and the RAKP4 integrity check value (the
SIK). Only when both match does the session get :class:`~bmaas.hwlab.proxy.rmcp.SessionKeys`;
otherwise it stays opaque and the relay forwards it untouched.

:class:`Session` is an established session as the relay sees it, including
the sequence-number offset: each packet the proxy sends in the BMC's name
takes the next outbound sequence number, so every later BMC packet is
renumbered (and re-signed) to keep the client's view strictly increasing, as
pyghmi's client (which drops lower numbers) and the spec's window require.
"""

from __future__ import annotations

import dataclasses
import hmac
import logging
import struct

from bmaas.fakes.effects import Action
from bmaas.fakes.faults import Effect, Firing
from bmaas.hwlab.proxy import rmcp
from bmaas.hwlab.proxy.rmcp import Algorithms, Message, PayloadType, SessionKeys
from bmaas.secrets import Secret

__all__ = ["Login", "Session", "Verdict"]

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class Verdict:
    """What the relay does with one request and its retransmissions: the
    action carried out on each (:func:`bmaas.hwlab.ipmi_action.carry_out`)."""

    action: Action
    data: bytes = b""
    expiry: float = 0.0


@dataclasses.dataclass
class Login:
    """One client's login exchange, from its first packet to RAKP4 (or failure)."""

    started: float
    last: float
    #: BMC effects fired for this login, waiting for the stage that shows them
    pending: dict[Effect, Firing] = dataclasses.field(default_factory=dict)
    #: what was done with each client packet, replayed for retransmissions
    actions: dict[bytes, tuple[str, bytes]] = dataclasses.field(default_factory=dict)
    dropped: bool = False
    done: bool = False
    #: the login's first packet (its bytes), and the wire effects on it and
    #: on each retransmission of it (the same verdict, as in a session)
    opening: bytes = b""
    delay: float = 0.0
    copies: int = 0
    #: (bytes, every): every answer of this login trickles
    trickle: tuple[int, float] | None = None
    saw_gcac: bool = False
    saw_open: bool = False
    tag: int = 0
    console_sid: int = 0
    bmc_sid: int = 0
    algorithms: Algorithms | None = None
    rm: bytes = b""
    rc: bytes = b""
    guid: bytes = b""
    role: int = 0
    username: bytes = b""
    password_ok: bool = False

    # -- what the client sends ---------------------------------------------------

    def open_request(self, payload: bytes) -> None:
        self.saw_open = True
        self.tag = payload[0]
        self.console_sid = struct.unpack_from("<I", payload, 4)[0]

    def rakp1(self, payload: bytes) -> None:
        self.tag = payload[0]
        self.rm = bytes(payload[8:24])
        self.role = payload[24]
        self.username = bytes(payload[28 : 28 + payload[27]])

    # -- what the BMC answers ----------------------------------------------------

    def open_response(self, payload: bytes) -> bool:
        """Record the BMC's choice; False when it refused the session."""
        if len(payload) < 2 or payload[1] != 0:
            return False
        self.bmc_sid = struct.unpack_from("<I", payload, 8)[0]
        self.algorithms = Algorithms.from_open_session(payload, 12)
        return True

    def rakp2(self, payload: bytes, username: str | None, password: Secret, node: str) -> bool:
        """Record Rc and the BMC GUID and check our password against the BMC's
        key-exchange code. False when the BMC refused the login."""
        if len(payload) < 2 or payload[1] != 0:
            return False
        self.rc = bytes(payload[8:24])
        self.guid = bytes(payload[24:40])
        algs = self.algorithms
        if algs is None or not password or algs.auth == 0 or not algs.supported:
            return True
        if username is not None and self.username != username.encode():
            LOG.info(
                "%s: login as %r, not the proxy's user %r: session stays opaque",
                node,
                self.username.decode(errors="replace"),
                username,
            )
            return True
        expected = rmcp.rakp2_authcode(
            algs.auth,
            password.reveal_bytes(),
            console_sid=self.console_sid,
            bmc_sid=self.bmc_sid,
            rm=self.rm,
            rc=self.rc,
            guid=self.guid,
            role=self.role,
            username=self.username,
        )
        self.password_ok = hmac.compare_digest(expected, bytes(payload[40 : 40 + len(expected)]))
        if not self.password_ok:
            LOG.warning(
                "%s: the password configured on the proxy for user %r does not match the "
                "BMC's (RAKP2 check failed): this session stays opaque, BMC effects on it "
                "cannot be carried out",
                node,
                self.username.decode(errors="replace"),
            )
        return True

    def session(self, payload: bytes, password: Secret, kg: Secret, node: str) -> Session | None:
        """The session RAKP4 opens, with keys when the SIK checks out."""
        if len(payload) < 2 or payload[1] != 0 or self.algorithms is None:
            return None
        algs = self.algorithms
        keys: SessionKeys | None = None
        if not algs.supported:
            LOG.info("%s: session uses unsupported algorithms %s: opaque", node, algs)
        elif not algs.protected:
            keys = SessionKeys(algs, None)  # cipher suite 0: readable by anyone
        elif self.password_ok:
            sik = rmcp.session_integrity_key(
                algs.auth,
                (kg or password).reveal_bytes(),
                rm=self.rm,
                rc=self.rc,
                role=self.role,
                username=self.username,
            )
            icv = rmcp.rakp4_icv(algs.auth, sik, rm=self.rm, bmc_sid=self.bmc_sid, guid=self.guid)
            if hmac.compare_digest(icv, bytes(payload[8 : 8 + len(icv)])):
                keys = SessionKeys(algs, sik)
            else:
                LOG.warning(
                    "%s: RAKP4 check failed: the BMC uses a BMC key (Kg) the proxy does "
                    "not have; this session stays opaque",
                    node,
                )
        return Session(console_sid=self.console_sid, bmc_sid=self.bmc_sid, keys=keys)


@dataclasses.dataclass
class Session:
    """An established RMCP+ session between one client and the BMC."""

    console_sid: int
    bmc_sid: int
    keys: SessionKeys | None
    epoch: int = 0
    #: added to every BMC sequence number on the way to the client
    offset: int = 0
    #: the highest sequence number the client has seen from "the BMC"
    last_out: int = 0
    #: requests decided, by (netfn, cmd, rq_seq): retransmissions reuse the verdict
    recent: dict[tuple[int, int, int], Verdict] = dataclasses.field(default_factory=dict)
    #: answers to strip, by (cmd, rq_seq)
    corrupt: set[tuple[int, int]] = dataclasses.field(default_factory=set)

    def forge(self, request: Message, code: int) -> bytes:
        """A response to ``request`` with completion ``code``, as the BMC
        would send it: next sequence number, signed and encrypted."""
        assert self.keys is not None
        self.last_out += 1
        self.offset += 1
        payload = rmcp.response_message(request, code)
        return self.keys.wrap(PayloadType.IPMI, self.console_sid, self.last_out, payload)

    def outbound(self, packet: rmcp.Packet) -> bytes:
        """A BMC packet on its way to the client: renumbered after forged
        packets, its answer stripped if a malformed_reply asked for it."""
        if self.keys is None:
            return packet.raw
        payload = self.keys.unwrap(packet)
        changed = False
        if packet.payload_type == PayloadType.IPMI and len(payload) >= 7:
            reply = Message.parse(payload)
            self.recent.pop((reply.netfn - 1, reply.cmd, reply.rq_seq), None)
            if (reply.cmd, reply.rq_seq) in self.corrupt:
                self.corrupt.discard((reply.cmd, reply.rq_seq))
                payload = payload[:6] + b"\x00"  # completion code "OK", no data
                payload += bytes([rmcp.checksum(payload[3:])])
                changed = True
        seq = packet.seq + self.offset
        self.last_out = max(self.last_out, seq)
        if not changed and not self.offset:
            return packet.raw
        return self.keys.wrap(packet.payload_type, packet.session_id, seq, payload)
