"""bmaas.drivers.ipmi.classify: the one mapping, fed the exceptions pyghmi really raises.

Where pyghmi can be made to raise without a socket (its parsers, its helpers
over a stub session), the exception comes from pyghmi's own code; otherwise it
is built with the exact text pyghmi uses, taken from pyghmi's tables.
"""

from __future__ import annotations

import hashlib
import os
import socket
import struct
from typing import Any

import pytest
from pyghmi import exceptions as pyghmi_exc
from pyghmi.ipmi import command as pyghmi_command
from pyghmi.ipmi import fru as pyghmi_fru
from pyghmi.ipmi.private import constants
from pyghmi.ipmi.private import session as pyghmi_session
from pyghmi.ipmi.private import util as pyghmi_util

from bmaas.drivers.ipmi.classify import COMPLETION_CODES, RMCP_STATUS, NoAnswer, classify
from bmaas.faults import (
    BMCAuthError,
    BMCBusy,
    BMCFault,
    BMCInternalError,
    BMCProtocolError,
    BMCTimeout,
    BMCUnreachable,
    PowerFailure,
    UnclassifiedFault,
    UnsupportedOperation,
)


def _raised(fn: Any, *args: Any) -> BaseException:
    with pytest.raises(Exception) as info:  # noqa: PT011 - whatever pyghmi raises is the subject
        fn(*args)
    return info.value


class _StubSession:
    """Answers every raw_command with one canned response, as a BMC would."""

    def __init__(self, response: dict[str, Any]) -> None:
        self.response = response

    def raw_command(self, **kw: Any) -> dict[str, Any]:
        return dict(self.response)


def _command(response: dict[str, Any]) -> pyghmi_command.Command:
    cmd = pyghmi_command.Command.__new__(pyghmi_command.Command)
    cmd.ipmi_session = _StubSession(response)
    cmd.bmc = "stub"
    cmd._oemknown = True
    return cmd


# -- completion codes --------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (0xC0, BMCBusy),
        (0xC1, UnsupportedOperation),
        (0xC3, BMCBusy),
        (0xC9, UnsupportedOperation),
        (0xCB, UnsupportedOperation),
        (0xCC, UnsupportedOperation),
        (0xCE, BMCBusy),
        (0xCF, BMCTimeout),
        (0xD2, BMCBusy),
        (0xD4, BMCAuthError),
        (0xD5, BMCBusy),
        (0xFF, BMCInternalError),
    ],
)
def test_completion_code_from_xraw_command(code: int, expected: type[BMCFault]) -> None:
    # Command.xraw_command raises IpmiException(text, code): the code survives.
    cmd = _command({"netfn": 1, "command": 1, "code": code, "data": b""})
    cmd.ipmi_session.response["error"] = pyghmi_util.get_ipmi_error(cmd.ipmi_session.response)
    exc = _raised(cmd.xraw_command, 0, 1)
    found = classify(exc, established=True)
    assert found.cls is expected
    assert found.status == f"0x{code:02X}"
    assert found.keeps_session  # the BMC answered: the session is fine


def test_every_standard_completion_code_has_a_class() -> None:
    standard = {c for c in constants.ipmi_completion_codes if 0xC0 <= c <= 0xFF}
    assert standard <= set(COMPLETION_CODES)


def test_code_lost_by_get_bootdev_is_recovered_from_its_text() -> None:
    # pyghmi's get_bootdev raises IpmiException(response['error']) without the code
    cmd = _command({"netfn": 1, "command": 9, "code": 0xC0, "error": "Node Busy", "data": b""})
    exc = _raised(cmd.get_bootdev)
    assert isinstance(exc, pyghmi_exc.IpmiException)
    assert exc.ipmicode == 0
    found = classify(exc, established=True)
    assert (found.cls, found.status) == (BMCBusy, "0xC0")


def test_code_text_with_pyghmi_suffix_is_recovered() -> None:
    text = pyghmi_util.get_ipmi_error(
        {"netfn": 7, "command": 0x3B, "code": 0xFF}, suffix=" while requesting privilege level 4"
    )
    found = classify(pyghmi_exc.IpmiException(text), established=False)
    assert (found.cls, found.status) == (BMCInternalError, "0xFF")


def test_command_specific_code_needs_its_command() -> None:
    exc = pyghmi_exc.IpmiException("Parameter not supported", 0x80)
    assert classify(exc, established=True, command=(0x00, 0x09)).cls is UnsupportedOperation
    assert classify(exc, established=True).cls is UnclassifiedFault


# -- login -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (0x01, BMCBusy),
        (0x0D, BMCAuthError),
        (0x0F, BMCAuthError),
        (0x11, UnsupportedOperation),
        (0x12, BMCProtocolError),
    ],
)
def test_rmcp_status_as_pyghmi_words_it(status: int, expected: type[BMCFault]) -> None:
    for suffix in ("", " in RAKP2", " reported in RAKP4"):
        exc = pyghmi_exc.IpmiException(constants.rmcp_codes[status] + suffix)
        found = classify(exc, established=False)
        assert found.cls is expected
        assert found.status == f"rmcp 0x{status:02X}"


def test_every_rmcp_status_has_a_class() -> None:
    assert set(constants.rmcp_codes) <= set(RMCP_STATUS)


def _rakp2_session(password: bytes) -> pyghmi_session.Session:
    """A client session waiting for RAKP2 after proposing suite 17."""
    s = object.__new__(pyghmi_session.Session)  # bypass its session sharing: no socket
    s.sessioncontext = "EXPECTINGRAKP2"
    s.rmcptag = 3
    s.localsid = 0x01020304
    s.pendingsessionid = 0x0A0B0C0D
    s.userid = b"admin"
    s.password = password
    s.kg = password
    s.currhashlib = hashlib.sha256
    s.nameonly = 16
    s.privlevel = 4
    s.randombytes = os.urandom(16)
    s.logonwaiters = []
    s.errors = []
    s.onlogon = s.errors.append
    return s


def test_struct_error_from_pyghmi_rakp2_is_a_protocol_error() -> None:
    # What pyghmi's own BMC provokes: a 20-byte SHA1 code where SHA256 (32) is due.
    s = _rakp2_session(b"pw")
    rakp2 = bytearray([3, 0, 0, 0]) + struct.pack("<I", s.localsid) + bytes(32) + bytes(20)
    exc = _raised(s._got_rakp2, rakp2)
    assert isinstance(exc, struct.error)
    assert classify(exc, established=False).cls is BMCProtocolError


def test_wrong_password_in_rakp2_is_an_auth_error() -> None:
    s = _rakp2_session(b"right")
    rakp2 = bytearray([3, 0, 0, 0]) + struct.pack("<I", s.localsid) + bytes(32) + bytes(32)
    assert s._got_rakp2(rakp2) == -9
    (error,) = s.errors
    found = classify(pyghmi_exc.IpmiException(error["error"]), established=False)
    assert found.cls is BMCAuthError
    assert "right" not in found.message


@pytest.mark.parametrize(
    "text",
    ["Invalid RAKP4 integrity code (wrong Kg?)", "Username too long for IPMI, must not exceed 16"],
)
def test_other_login_refusals_are_auth_errors(text: str) -> None:
    assert classify(pyghmi_exc.IpmiException(text), established=False).cls is BMCAuthError


# -- no answer ---------------------------------------------------------------


@pytest.mark.parametrize(
    "exc",
    [
        NoAnswer("no answer to the login"),
        pyghmi_exc.IpmiException("Session no longer connected"),
        pyghmi_exc.IpmiException("None"),  # a dead BMC, after ~5 s
        pyghmi_exc.IpmiException("timeout", 0xFFFF),  # pyghmi's retransmits ran out
    ],
    ids=["deadline", "session-gone", "dead-bmc", "pyghmi-timeout"],
)
def test_silence_is_unreachable_before_login_and_timeout_after(exc: BaseException) -> None:
    assert classify(exc, established=False).cls is BMCUnreachable
    after = classify(exc, established=True)
    assert after.cls is BMCTimeout
    assert "outcome unknown" in after.message
    assert not after.keeps_session


def test_network_errors_are_unreachable() -> None:
    refused = ConnectionRefusedError(111, "Connection refused")
    dns = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    unroutable = OSError(113, "No route to host")
    for exc in (refused, dns, unroutable):
        assert classify(exc, established=False).cls is BMCUnreachable
    assert "ICMP" in classify(refused, established=False).message


def test_transmit_failure_is_unreachable() -> None:
    exc = pyghmi_exc.IpmiException("Unable to transmit to specified address")
    assert classify(exc, established=False).cls is BMCUnreachable


# -- malformed replies ---------------------------------------------------------


def test_short_device_id_from_pyghmi_helper_is_a_protocol_error() -> None:
    cmd = _command({"netfn": 7, "command": 1, "code": 0, "data": bytearray([0x20, 1])})
    exc = _raised(cmd._get_device_id)
    assert isinstance(exc, IndexError | struct.error)
    assert classify(exc, established=True).cls is BMCProtocolError


def test_unexpected_boot_reply_tripping_pyghmi_assert_is_a_protocol_error() -> None:
    cmd = _command({"netfn": 1, "command": 9, "code": 0, "data": bytearray([1, 4, 0x80, 4])})
    exc = _raised(cmd.get_bootdev)
    assert isinstance(exc, AssertionError)
    assert classify(exc, established=True).cls is BMCProtocolError


def test_invalid_fru_area_is_a_protocol_error() -> None:
    # common header pointing at a board area whose version byte is wrong
    exc = _raised(pyghmi_fru.FRU, bytearray([1, 0, 0, 1, 0, 0, 0, 0xFE]) + bytes([7]) + bytes(7))
    assert isinstance(exc, pyghmi_exc.BmcErrorException)
    assert classify(exc, established=True).cls is BMCProtocolError


# -- the rest ------------------------------------------------------------------


def test_power_change_not_accomplished_is_a_power_failure() -> None:
    exc = pyghmi_exc.IpmiException("System did not accomplish power state change")
    assert classify(exc, established=True).cls is PowerFailure


def test_unknown_errors_are_unclassified_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    found = classify(RuntimeError("surprise"), established=True)
    assert found.cls is UnclassifiedFault
    assert "RuntimeError: surprise" in found.message
    assert "unclassified IPMI error" in caplog.text
    assert classify(pyghmi_exc.IpmiException("Unknown code 0x82", 0x82), established=True).cls is (
        UnclassifiedFault
    )
