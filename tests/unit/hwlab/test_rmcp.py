"""RMCP+ parsing, key derivation and packet protection, checked against
pyghmi's own client code (an independent implementation of the same spec).

pyghmi's client ``Session`` is driven without a socket: its RAKP2 handler
must accept the key-exchange code *we* compute (so our HMAC input matches the
spec as pyghmi reads it), then it derives SIK/K1/K2 its way and we compare;
finally a packet pyghmi encrypts and signs must open with our keys and one we
seal must pass pyghmi's integrity check and decrypt to the same payload.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from pyghmi.ipmi.private import session as pyghmi_session

from bmaas.hwlab.proxy import rmcp
from bmaas.hwlab.proxy.ipmi_session import Login
from bmaas.hwlab.proxy.rmcp import Algorithms, Message, PayloadType, RmcpError, SessionKeys

USER = b"admin"
PASSWORD = b"s3cret-pw"
SUITES = {
    3: (Algorithms(auth=1, integrity=1, confidentiality=1), hashlib.sha1, 12),
    17: (Algorithms(auth=3, integrity=4, confidentiality=1), hashlib.sha256, 16),
}


def _pyghmi_client(hashlib_fn: Any, hashlen: int) -> Any:
    """A pyghmi client Session mid-login (RAKP1 sent), with no socket."""
    client = object.__new__(pyghmi_session.Session)
    sent: list[bytes] = []
    client.__dict__.update(
        sessioncontext="EXPECTINGRAKP2",
        rmcptag=7,
        localsid=0x11223344,
        pendingsessionid=0xA1B2C3D4,
        randombytes=os.urandom(16),
        userid=USER,
        password=PASSWORD,
        kg=PASSWORD,
        nameonly=16,
        privlevel=4,
        autopriv=False,
        currhashlib=hashlib_fn,
        currhashlen=hashlen,
        lastpayload=None,
        last_payload_type=None,
        pendingpayloads=[],
        authtype=6,
        integrityalgo=0,
        confalgo=0,
        ipmiversion=2.0,
        sessionid=0,
        sequencenumber=0,
        _customkeepalives=None,
        _xmit_packet=lambda *a, **k: sent.append(bytes(client.netpacket)),
    )
    client.sent = sent
    return client


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_keys_match_pyghmi_for_cipher_suite(suite: int) -> None:
    algs, hashlib_fn, hashlen = SUITES[suite]
    client = _pyghmi_client(hashlib_fn, hashlen)
    rc, guid = os.urandom(16), os.urandom(16)
    role = client.nameonly | client.privlevel
    code = rmcp.rakp2_authcode(
        algs.auth,
        PASSWORD,
        console_sid=client.localsid,
        bmc_sid=client.pendingsessionid,
        rm=client.randombytes,
        rc=rc,
        guid=guid,
        role=role,
        username=USER,
    )
    rakp2 = bytes([client.rmcptag, 0, 0, 0]) + struct.pack("<I", client.localsid) + rc + guid
    assert client._got_rakp2(bytearray(rakp2 + code)) is None  # pyghmi accepted our code
    assert client.sessioncontext == "EXPECTINGRAKP4"

    sik = rmcp.session_integrity_key(
        algs.auth, PASSWORD, rm=client.randombytes, rc=rc, role=role, username=USER
    )
    assert sik == client.sik
    keys = SessionKeys(algs, sik)

    # pyghmi seals a request; we open it.
    client.integrityalgo, client.confalgo = algs.integrity, "aes"
    client.sessionid, client.sequencenumber = 0xA1B2C3D4, 5
    client.lastpayload = None  # RAKP3 answered
    request = rmcp.request_message(0x00, 0x01, rq_seq=9)  # Get Chassis Status
    client.send_payload(payload=bytearray(request), payload_type=PayloadType.IPMI, retry=False)
    packet = rmcp.parse(client.sent[-1])
    assert packet is not None
    assert packet.encrypted
    assert packet.authenticated
    assert keys.unwrap(packet) == request

    # We seal an answer; pyghmi's receive-side checks (integrity, then AES) open it.
    answer = rmcp.response_message(Message.parse(request), 0xC0)
    sealed = keys.wrap(PayloadType.IPMI, client.localsid, 42, answer)
    expected = hmac.new(client.k1, sealed[4:-hashlen], hashlib_fn).digest()[:hashlen]
    assert sealed[-hashlen:] == expected
    body = rmcp.parse(sealed)
    assert body is not None
    assert body.seq == 42
    iv, secret = body.payload[:16], body.payload[16:]
    decryptor = Cipher(algorithms.AES(client.aeskey), modes.CBC(iv)).decryptor()
    clear = decryptor.update(secret) + decryptor.finalize()
    assert clear[: -(clear[-1] + 1)] == answer


def test_tampered_packet_fails_the_integrity_check() -> None:
    algs = SUITES[3][0]
    keys = SessionKeys(algs, os.urandom(20))
    sealed = bytearray(keys.wrap(PayloadType.IPMI, 1, 2, rmcp.request_message(6, 1)))
    sealed[20] ^= 0x01
    packet = rmcp.parse(bytes(sealed))
    assert packet is not None
    with pytest.raises(RmcpError, match="integrity"):
        keys.unwrap(packet)


def test_cipher_suite_zero_needs_no_keys() -> None:
    keys = SessionKeys(Algorithms(0, 0, 0), None)
    payload = rmcp.request_message(0, 2, b"\x01")
    packet = rmcp.parse(keys.wrap(PayloadType.IPMI, 5, 6, payload))
    assert packet is not None
    assert not packet.encrypted
    assert not packet.authenticated
    assert keys.unwrap(packet) == payload


def test_unsupported_algorithms_are_refused() -> None:
    with pytest.raises(RmcpError, match="unsupported"):
        SessionKeys(Algorithms(auth=2, integrity=2, confidentiality=1), b"x" * 16)  # MD5


def test_keys_never_show_in_repr() -> None:
    sik = b"\x42" * 20
    keys = SessionKeys(SUITES[3][0], sik)
    assert "keys hidden" in repr(keys)
    assert sik.hex() not in repr(keys)
    assert "42424242" not in repr(keys)


def test_checksum_and_response_match_pyghmi() -> None:
    data = [0x20, 0x18, 0x81, 0x04, 0x01]
    assert rmcp.checksum(bytes(data)) == pyghmi_session._checksum(*data)
    request = Message.parse(rmcp.request_message(0x06, 0x01, rq_seq=3))
    reply = rmcp.response_message(request, 0xC1)
    assert reply[0] == 0x81
    assert reply[1] >> 2 == 0x07
    assert (sum(reply[:3]) & 0xFF, sum(reply[3:]) & 0xFF) == (0, 0)
    parsed = Message.parse(reply)
    assert (parsed.rq_seq, parsed.cmd, parsed.data) == (3, 0x01, b"\xc1")


def test_parse_ipmi15_sessionless_and_rmcpplus() -> None:
    packet = rmcp.parse(rmcp.channel_auth_request())
    assert packet is not None
    assert packet.version == 15
    assert packet.sessionless
    message = Message.parse(packet.payload)
    assert (message.netfn, message.cmd, message.data) == (0x06, 0x38, b"\x8e\x04")
    open_request = bytes([0, 0, 0, 0]) + struct.pack("<I", 0xA0A2A3A4) + bytes(24)
    packet = rmcp.parse(rmcp.sessionless(PayloadType.OPEN_SESSION_REQUEST, open_request))
    assert packet is not None
    assert packet.version == 20
    assert packet.payload_type == PayloadType.OPEN_SESSION_REQUEST
    reply = rmcp.parse(rmcp.build_sessionless(packet, b"\x00\x01"))
    assert reply is not None
    assert reply.payload_type == PayloadType.OPEN_SESSION_RESPONSE


@pytest.mark.parametrize(
    "data",
    [b"", b"\x06\x00\xff\x07", b"\x06\x00\xff\x06" + bytes(20), b"\x06\x00\xff\x07\x06" + bytes(3)],
)
def test_not_ipmi_or_truncated_is_none(data: bytes) -> None:
    assert rmcp.parse(data) is None


def test_short_message_is_an_error() -> None:
    with pytest.raises(RmcpError):
        Message.parse(b"\x20\x18\xc8")


def test_open_session_algorithms_are_read_from_the_response() -> None:
    response = bytes([1, 0, 4, 0]) + struct.pack("<II", 1, 2)
    response += bytes([0, 0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 8, 4, 0, 0, 0, 2, 0, 0, 8, 1, 0, 0, 0])
    login = Login(started=0.0, last=0.0)
    assert login.open_response(response)
    assert login.bmc_sid == 2
    assert login.algorithms == Algorithms(auth=3, integrity=4, confidentiality=1)
    assert not Login(started=0.0, last=0.0).open_response(bytes([1, 0x01, 0, 0]))
