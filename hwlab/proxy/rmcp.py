"""RMCP / RMCP+ packets as far as a fault-injecting relay needs them.

The IPMI proxy must read which command a packet carries and, for a BMC
effect, answer in the BMC's place with a packet the client accepts. IPMI 2.0
("lanplus") sessions are integrity-protected and usually encrypted, so this
module also derives the session keys from the RAKP exchange that passes
through the relay (IPMI 2.0 spec, sections 13.28-13.32):

* SIK = HMAC_Kg(Rm | Rc | RoleM | ULengthM | UNameM), Kg = the user's
  password (Kuid) unless the BMC has a BMC key;
* K1 = HMAC_SIK(0x01 * 20) keys the integrity HMAC, K2 = HMAC_SIK(0x02 * 20)
  and its first 16 bytes key AES-CBC-128.

Both checks a client makes are made here too, before any key is trusted: the
key-exchange code in RAKP message 2 proves the password (HMAC_Kuid over both
session ids, both randoms, the BMC GUID, role and name) and the integrity
check value in RAKP message 4 proves the SIK.

Supported algorithms: authentication RAKP-none / HMAC-SHA1 / HMAC-SHA256,
integrity none / HMAC-SHA1-96 / HMAC-SHA256-128, confidentiality none /
AES-CBC-128: cipher suites 0-3 and 15-17, which is every suite ipmitool,
pyghmi, virtualbmc and current BMCs speak. MD5 and xRC4 suites stay opaque.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
import struct
from collections.abc import Callable
from enum import IntEnum
from typing import Any

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

__all__ = [
    "AUTH_RMCPPLUS",
    "Algorithms",
    "Message",
    "Packet",
    "PayloadType",
    "RmcpError",
    "SessionKeys",
    "build_sessionless",
    "channel_auth_request",
    "checksum",
    "parse",
    "rakp2_authcode",
    "rakp4_icv",
    "request_message",
    "response_message",
    "session_integrity_key",
    "sessionless",
]

RMCP_HEADER = b"\x06\x00\xff\x07"  # version 6, reserved, seq 0xff (no ack), class IPMI
AUTH_NONE = 0x00
AUTH_RMCPPLUS = 0x06


class RmcpError(ValueError):
    """A packet that does not parse, or fails its integrity check."""


class PayloadType(IntEnum):
    IPMI = 0x00
    SOL = 0x01
    OPEN_SESSION_REQUEST = 0x10
    OPEN_SESSION_RESPONSE = 0x11
    RAKP1 = 0x12
    RAKP2 = 0x13
    RAKP3 = 0x14
    RAKP4 = 0x15


def checksum(data: bytes) -> int:
    """IPMI's two's-complement checksum: what makes ``sum(data) + cs == 0``."""
    return -sum(data) & 0xFF


# -- the RMCP / session header ----------------------------------------------


@dataclasses.dataclass(frozen=True)
class Packet:
    """One datagram, parsed down to the session header.

    ``payload`` is still encrypted when ``encrypted`` is set. ``version`` is
    15 for IPMI 1.5 framing (sessionless commands, and 1.5 sessions) and 20
    for RMCP+.
    """

    raw: bytes
    version: int
    authtype: int
    payload_type: int
    encrypted: bool
    authenticated: bool
    session_id: int
    seq: int
    payload: bytes

    @property
    def sessionless(self) -> bool:
        return self.session_id == 0


def parse(data: bytes) -> Packet | None:
    """Parse an IPMI-class RMCP datagram; ``None`` for anything else (ASF
    presence pings, garbage), which the relay passes on untouched."""
    if len(data) < 14 or data[0] != 0x06 or data[3] & 0x1F != 0x07:
        return None
    authtype = data[4]
    if authtype == AUTH_RMCPPLUS:
        if len(data) < 16:
            return None
        ptype = data[5]
        session_id, seq, length = struct.unpack_from("<IIH", data, 6)
        payload = data[16 : 16 + length]
        if len(payload) != length:
            return None
        return Packet(
            raw=data,
            version=20,
            authtype=authtype,
            payload_type=ptype & 0x3F,
            encrypted=bool(ptype & 0x80),
            authenticated=bool(ptype & 0x40),
            session_id=session_id,
            seq=seq,
            payload=payload,
        )
    seq, session_id = struct.unpack_from("<II", data, 5)
    offset = 13 + (16 if authtype != AUTH_NONE else 0)
    if len(data) <= offset:
        return None
    length = data[offset]
    payload = data[offset + 1 : offset + 1 + length]
    if len(payload) != length:
        return None
    return Packet(
        raw=data,
        version=15,
        authtype=authtype,
        payload_type=PayloadType.IPMI,
        encrypted=False,
        authenticated=authtype != AUTH_NONE,
        session_id=session_id,
        seq=seq,
        payload=payload,
    )


#: the sessionless payload type a BMC answers each request type with
_REPLY_TYPE: dict[int, int] = {
    PayloadType.IPMI: PayloadType.IPMI,
    PayloadType.OPEN_SESSION_REQUEST: PayloadType.OPEN_SESSION_RESPONSE,
    PayloadType.RAKP1: PayloadType.RAKP2,
    PayloadType.RAKP3: PayloadType.RAKP4,
}


def sessionless(payload_type: int, payload: bytes, *, version: int = 20) -> bytes:
    """An unauthenticated packet outside any session (session id and
    sequence number 0): Get Channel Auth Capabilities, Open Session, RAKP."""
    if version == 15:
        return RMCP_HEADER + struct.pack("<BIIB", AUTH_NONE, 0, 0, len(payload)) + payload
    header = struct.pack("<BBIIH", AUTH_RMCPPLUS, payload_type, 0, 0, len(payload))
    return RMCP_HEADER + header + payload


def build_sessionless(request: Packet, payload: bytes) -> bytes:
    """A reply to a sessionless ``request``, framed the way it was (1.5 or RMCP+)."""
    reply_type = _REPLY_TYPE.get(request.payload_type)
    if reply_type is None:
        raise RmcpError(f"no sessionless reply to payload type {request.payload_type:#x}")
    return sessionless(reply_type, payload, version=request.version)


# -- IPMI messages (figure 13-4, "IPMI LAN message") -------------------------


@dataclasses.dataclass(frozen=True)
class Message:
    """An IPMI request or response message. For responses, ``data[0]`` is
    the completion code."""

    rs_addr: int
    netfn: int
    rs_lun: int
    rq_addr: int
    rq_seq: int
    rq_lun: int
    cmd: int
    data: bytes

    @classmethod
    def parse(cls, payload: bytes) -> Message:
        if len(payload) < 7:
            raise RmcpError(f"IPMI message of {len(payload)} bytes is too short")
        return cls(
            rs_addr=payload[0],
            netfn=payload[1] >> 2,
            rs_lun=payload[1] & 0b11,
            rq_addr=payload[3],
            rq_seq=payload[4] >> 2,
            rq_lun=payload[4] & 0b11,
            cmd=payload[5],
            data=bytes(payload[6:-1]),
        )

    @property
    def key(self) -> tuple[int, int, int, bytes]:
        """What stays the same when a client retransmits this request, even
        if it rebuilds the packet with a new session sequence number (ipmitool)."""
        return (self.netfn, self.cmd, self.rq_seq, self.data)


def request_message(netfn: int, cmd: int, data: bytes = b"", *, rq_seq: int = 0) -> bytes:
    """A request from software id 0x81 to the BMC (0x20), LUN 0."""
    head = bytes([0x20, netfn << 2])
    body = bytes([0x81, rq_seq << 2, cmd]) + data
    return head + bytes([checksum(head)]) + body + bytes([checksum(body)])


def channel_auth_request() -> bytes:
    """Get Channel Authentication Capabilities (IPMI 2.0 data, admin): the
    sessionless question every IPMI client asks first; a cheap liveness probe."""
    return sessionless(PayloadType.IPMI, request_message(0x06, 0x38, b"\x8e\x04"), version=15)


def response_message(request: Message, code: int, data: bytes = b"") -> bytes:
    """The response a BMC sends to ``request`` with completion ``code``."""
    head = bytes([request.rq_addr, ((request.netfn + 1) << 2) | request.rq_lun])
    body = bytes([request.rs_addr, (request.rq_seq << 2) | request.rs_lun, request.cmd, code])
    body += data
    return head + bytes([checksum(head)]) + body + bytes([checksum(body)])


# -- algorithms and keys -------------------------------------------------------

_AUTH_HASH: dict[int, Callable[..., Any] | None] = {
    0: None,  # RAKP-none
    1: hashlib.sha1,  # RAKP-HMAC-SHA1
    3: hashlib.sha256,  # RAKP-HMAC-SHA256
}
#: integrity algorithm -> (hash, bytes of the truncated HMAC)
_INTEGRITY: dict[int, tuple[Callable[..., Any], int] | None] = {
    0: None,
    1: (hashlib.sha1, 12),  # HMAC-SHA1-96
    4: (hashlib.sha256, 16),  # HMAC-SHA256-128
}
_CONFIDENTIALITY = {0: False, 1: True}  # none, AES-CBC-128
_CONST1 = b"\x01" * 20  # 13.32: both constants are 20 bytes, for SHA-256 too
_CONST2 = b"\x02" * 20


@dataclasses.dataclass(frozen=True)
class Algorithms:
    """The algorithms a session runs with (as the BMC's Open Session
    Response chose them; the request only proposes)."""

    auth: int
    integrity: int
    confidentiality: int

    @classmethod
    def from_open_session(cls, payload: bytes, offset: int) -> Algorithms:
        """Read the three 8-byte algorithm records of an Open Session
        request (offset 8) or response (offset 12)."""
        if len(payload) < offset + 24:
            raise RmcpError("Open Session message without algorithm payloads")
        return cls(
            auth=payload[offset + 4] & 0x3F,
            integrity=payload[offset + 12] & 0x3F,
            confidentiality=payload[offset + 20] & 0x3F,
        )

    @property
    def supported(self) -> bool:
        return (
            self.auth in _AUTH_HASH
            and self.integrity in _INTEGRITY
            and self.confidentiality in _CONFIDENTIALITY
        )

    @property
    def protected(self) -> bool:
        """Whether session payloads need keys to read or forge."""
        return bool(self.integrity or self.confidentiality)


def _auth_hmac(auth: int, key: bytes, data: bytes) -> bytes:
    digest = _AUTH_HASH.get(auth)
    if digest is None:
        raise RmcpError(f"authentication algorithm {auth} has no HMAC")
    return hmac.new(key, data, digest).digest()


def rakp2_authcode(
    auth: int,
    kuid: bytes,
    *,
    console_sid: int,
    bmc_sid: int,
    rm: bytes,
    rc: bytes,
    guid: bytes,
    role: int,
    username: bytes,
) -> bytes:
    """The key-exchange authentication code a BMC puts in RAKP message 2
    (13.31): proves both sides hold the same password."""
    data = struct.pack("<II", console_sid, bmc_sid) + rm + rc + guid
    data += bytes([role, len(username)]) + username
    return _auth_hmac(auth, kuid, data)


def session_integrity_key(
    auth: int, kg: bytes, *, rm: bytes, rc: bytes, role: int, username: bytes
) -> bytes:
    """SIK (13.31)."""
    return _auth_hmac(auth, kg, rm + rc + bytes([role, len(username)]) + username)


def rakp4_icv(auth: int, sik: bytes, *, rm: bytes, bmc_sid: int, guid: bytes) -> bytes:
    """The integrity check value of RAKP message 4, truncated as the
    authentication algorithm prescribes (96 bits for SHA1, 128 for SHA256)."""
    full = _auth_hmac(auth, sik, rm + struct.pack("<I", bmc_sid) + guid)
    return full[: 12 if auth == 1 else 16]


class SessionKeys:
    """Read and write the protected payloads of one RMCP+ session.

    Holds K1 and the AES key; ``repr`` never shows them.
    """

    def __init__(self, algorithms: Algorithms, sik: bytes | None) -> None:
        if not algorithms.supported:
            raise RmcpError(f"unsupported algorithms {algorithms}")
        self.algorithms = algorithms
        self._k1 = self._k2 = b""
        if algorithms.protected:
            if sik is None:
                raise RmcpError("a protected session needs its SIK")
            self._k1 = _auth_hmac(algorithms.auth, sik, _CONST1)
            self._k2 = _auth_hmac(algorithms.auth, sik, _CONST2)

    def __repr__(self) -> str:
        return f"<SessionKeys {self.algorithms} (keys hidden)>"

    def _mac(self, data: bytes) -> bytes:
        spec = _INTEGRITY[self.algorithms.integrity]
        assert spec is not None
        digest, length = spec
        return hmac.new(self._k1, data, digest).digest()[:length]

    def unwrap(self, packet: Packet) -> bytes:
        """The clear payload of a session packet, after checking its integrity."""
        payload = packet.payload
        if packet.authenticated:
            spec = _INTEGRITY.get(self.algorithms.integrity)
            if spec is None:
                raise RmcpError("authenticated packet in a session without integrity")
            code_len = spec[1]
            body, code = packet.raw[4:-code_len], packet.raw[-code_len:]
            if not hmac.compare_digest(self._mac(body), code):
                raise RmcpError("integrity check failed")
        if packet.encrypted:
            if len(payload) < 32 or len(payload) % 16:
                raise RmcpError("encrypted payload is not whole AES blocks")
            decryptor = Cipher(algorithms.AES(self._k2[:16]), modes.CBC(payload[:16])).decryptor()
            clear = decryptor.update(payload[16:]) + decryptor.finalize()
            pad = clear[-1]
            if pad >= len(clear):
                raise RmcpError("bad confidentiality pad")
            payload = clear[: -(pad + 1)]
        return bytes(payload)

    def wrap(self, payload_type: int, session_id: int, seq: int, payload: bytes) -> bytes:
        """A session packet carrying ``payload``, protected as the session requires."""
        algs = self.algorithms
        ptype = (
            payload_type | (0x40 if algs.integrity else 0) | (0x80 if algs.confidentiality else 0)
        )
        if algs.confidentiality:
            pad_len = (16 - (len(payload) + 1) % 16) % 16
            clear = payload + bytes(range(1, pad_len + 1)) + bytes([pad_len])
            iv = os.urandom(16)
            encryptor = Cipher(algorithms.AES(self._k2[:16]), modes.CBC(iv)).encryptor()
            payload = iv + encryptor.update(clear) + encryptor.finalize()
        message = RMCP_HEADER + struct.pack(
            "<BBIIH", AUTH_RMCPPLUS, ptype, session_id, seq, len(payload)
        )
        message += payload
        if algs.integrity:
            # Table 13-8: pad so that everything after the RMCP header, plus
            # pad length and next header, is a multiple of 4 bytes.
            pad = (4 - (len(message) - 4 + 2) % 4) % 4
            message += b"\xff" * pad + bytes([pad, 0x07])
            message += self._mac(message[4:])
        return message
