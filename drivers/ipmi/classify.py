"""The one mapping from pyghmi, socket and struct errors to bmaas faults.

:func:`classify` is the only place the IPMI driver turns a foreign exception
into a fault class. It decides by, in order: the completion code the BMC
returned; the RMCP+ status of a refused login; the text pyghmi uses when it
drops the code (its login errors and some helpers raise ``IpmiException(text)``
with ``ipmicode=0``, so the text is mapped back to its code through pyghmi's
own tables); then the exception type.

Completion codes: :data:`COMPLETION_CODES` (IPMI 2.0 table 5-2), each row
with its meaning and why.

Source of every row: IPMI v2.0 rev 1.1, table 5-2 (completion codes) and
table 13-15 (RMCP+ status). The codes field incidents show (hwlab's
``ipmi-*`` incidents, :mod:`bmaas.fakes.incidents`) are also those Ironic's ipmitool
driver retries by text (``IPMITOOL_RETRYABLE_FAILURES``: "Node busy" 0xC0,
"Timeout" 0xC3, "Out of space" 0xC4, "BMC initialization in progress" 0xD2,
and RMCP+ 0x01 "insufficient resources for session"); 0xCE and 0xD5 are the
"cannot respond now" answers of BMCs busy with a power transition. Here each
is classified once by code, never by substring.

(1) 0xC9 and 0xD5 can both surface as "not in this state". 0xC9 speaks of a
*parameter*: sending the same bytes again cannot bring them into range, so it
is ``UnsupportedOperation`` (never retried). 0xD5 speaks of the *present
state* (a power transition under way, POST, a firmware update), which passes:
it is ``BMCBusy``, retried with backoff until the retry budget ends, the same
treatment the Redfish driver gives iLO's ``InvalidOperationForSystemState``.

(2) 0xCF means the BMC saw our (retransmitted) request twice and cannot repeat
the first answer: the first one may have acted, so the outcome is unknown.

No answer at all: if the session never came up, nothing reached the BMC, so
``BMCUnreachable`` (safe to retry anything); inside a live session the request
was sent and may have acted, so ``BMCTimeout`` (retry only idempotent calls).
An ICMP port-unreachable seen during login is ``BMCUnreachable`` at once.
A reply that is short or not what the protocol allows (``struct.error``,
``IndexError``, pyghmi's own assertions) is ``BMCProtocolError``. Anything not
named here is ``UnclassifiedFault``, logged at WARNING.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import struct

from pyghmi import exceptions as pyghmi_exc
from pyghmi.ipmi.private import constants

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

__all__ = ["COMPLETION_CODES", "RMCP_STATUS", "Classified", "NoAnswer", "SuiteRefused", "classify"]

LOG = logging.getLogger(__name__)

#: IPMI completion code -> fault class; (1) and (2): the module docstring
COMPLETION_CODES: dict[int, type[BMCFault]] = {
    0xC0: BMCBusy,  # node busy: the BMC said "later"
    0xC1: UnsupportedOperation,  # invalid command: this BMC lacks it
    0xC2: UnsupportedOperation,  # invalid command for LUN
    0xC3: BMCBusy,  # timeout while processing: the BMC gave up, not us
    0xC4: BMCInternalError,  # out of space
    0xC5: BMCBusy,  # reservation cancelled: someone else is reading
    0xC6: UnsupportedOperation,  # request data truncated: this BMC wants other bytes
    0xC7: UnsupportedOperation,  # request data length invalid
    0xC8: UnsupportedOperation,  # request field length exceeded
    0xC9: UnsupportedOperation,  # parameter out of range: (1)
    0xCA: UnsupportedOperation,  # cannot return that many bytes
    0xCB: UnsupportedOperation,  # sensor/data/record not present: e.g. no FRU 0
    0xCC: UnsupportedOperation,  # invalid data field: e.g. a boot device it lacks
    0xCD: UnsupportedOperation,  # illegal for this sensor/record
    0xCE: BMCBusy,  # response could not be provided: resources exhausted
    0xCF: BMCTimeout,  # duplicated request: (2)
    0xD0: BMCBusy,  # SDR repository in update mode
    0xD1: BMCBusy,  # firmware update mode
    0xD2: BMCBusy,  # BMC initialisation in progress
    0xD3: BMCInternalError,  # destination unavailable
    0xD4: BMCAuthError,  # insufficient privilege: never retry a privilege
    0xD5: BMCBusy,  # not supported in present state: (1)
    0xD6: UnsupportedOperation,  # subfunction disabled
    0xFF: BMCInternalError,  # unspecified error
}

#: command-specific codes (0x80-0xBE) of the commands this driver sends
COMMAND_CODES: dict[tuple[int, int, int], type[BMCFault]] = {
    (0x06, 0x3B, 0x80): BMCAuthError,  # user may not have the requested privilege
    (0x06, 0x3B, 0x81): BMCAuthError,  # privilege not allowed on this channel
    (0x00, 0x08, 0x80): UnsupportedOperation,  # boot parameter not supported
    (0x00, 0x08, 0x81): BMCBusy,  # another "set in progress"
    (0x00, 0x08, 0x82): UnsupportedOperation,  # read-only parameter
    (0x00, 0x09, 0x80): UnsupportedOperation,  # boot parameter not supported
}

#: RMCP+ / RAKP status of a refused login (IPMI 2.0 table 13-15) -> fault class
RMCP_STATUS: dict[int, type[BMCFault]] = {
    0x01: BMCBusy,  # no session slot free ("insufficient resources for session")
    0x02: BMCProtocolError,  # invalid session id
    0x03: BMCProtocolError,  # invalid payload type
    0x04: UnsupportedOperation,  # authentication algorithm
    0x05: UnsupportedOperation,  # integrity algorithm
    0x06: UnsupportedOperation,
    0x07: UnsupportedOperation,
    0x08: BMCProtocolError,  # inactive session id
    0x09: BMCAuthError,  # invalid role
    0x0A: BMCAuthError,  # role or privilege not allowed
    0x0B: BMCBusy,  # no slot at this role
    0x0C: BMCAuthError,  # invalid user name length
    0x0D: BMCAuthError,  # unauthorized name
    0x0E: BMCAuthError,  # unauthorized GUID
    0x0F: BMCAuthError,  # invalid integrity check value (wrong password or Kg)
    0x10: UnsupportedOperation,  # confidentiality algorithm
    0x11: UnsupportedOperation,  # no cipher suite match
    0x12: BMCProtocolError,  # illegal parameter
}

_NO_ANSWER_CODE = 0xFFFF  # pyghmi's own "timeout" pseudo completion code

#: pyghmi messages that carry no code, by prefix
_MESSAGES: tuple[tuple[str, type[BMCFault] | None], ...] = (
    ("Incorrect password provided", BMCAuthError),
    ("Invalid RAKP4 integrity code", BMCAuthError),
    ("Username too long", BMCAuthError),
    ("MD5 required", UnsupportedOperation),
    ("Unable to transmit to specified address", BMCUnreachable),
    ("System did not accomplish power state change", PowerFailure),
    ("Unrecognized RMCP code", BMCProtocolError),
    # pyghmi's words for "no answer": None means "decide by session state"
    ("Session no longer connected", None),
    ("Session failed to initialize", None),
    ("timeout", None),
    ("None", None),
)
_BY_TEXT: dict[str, int] = {text: code for code, text in constants.ipmi_completion_codes.items()}
_RMCP_BY_TEXT: dict[str, int] = {text: code for code, text in constants.rmcp_codes.items()}
_RAKP_SUFFIXES = (" in RAKP2", " reported in RAKP4")


class NoAnswer(Exception):
    """The deadline passed and the BMC had not answered (raised by the
    driver's session layer, which owns the waiting)."""


class SuiteRefused(Exception):
    """The BMC refused cipher suite 17 (RMCP+ ``status``: its algorithms) or
    chose suite 3's in answer to it (``chose_3``), and the node's
    ``ipmi_cipher_suite`` does not allow suite 3: ``UnsupportedOperation``
    (RMCP+ 0x11's row: never retried, never counted) with a message that
    names the setting that allows suite 3."""

    def __init__(self, status: int, *, chose_3: bool = False) -> None:
        super().__init__(status, chose_3)
        self.status = status
        self.chose_3 = chose_3

    def __str__(self) -> str:
        if self.chose_3:
            return "the BMC answered a cipher suite 17 proposal with suite 3's algorithms"
        text = constants.rmcp_codes.get(self.status, "refused")
        return f"the BMC refused cipher suite 17 (RMCP+ 0x{self.status:02X}: {text})"


@dataclasses.dataclass(frozen=True)
class Classified:
    """The verdict on one exception."""

    cls: type[BMCFault]
    message: str
    #: the BMC's own status ("0xC0", "rmcp 0x0D"), if it gave one
    status: str | None = None
    #: the session is still good (the BMC answered, with an error code)
    keeps_session: bool = False


def _no_answer(message: str, *, established: bool) -> Classified:
    if established:
        return Classified(BMCTimeout, f"{message}; it was sent in a live session: outcome unknown")
    return Classified(BMCUnreachable, f"{message}; no session was established")


def _by_code(code: int, message: str, command: tuple[int, int] | None) -> Classified | None:
    cls = COMPLETION_CODES.get(code)
    if cls is None and command is not None:
        cls = COMMAND_CODES.get((*command, code))
    if cls is None:
        return None
    return Classified(cls, message, status=f"0x{code:02X}", keeps_session=True)


def _by_text(text: str, *, established: bool) -> Classified | None:
    for prefix, cls in _MESSAGES:
        if text.startswith(prefix):
            return (
                _no_answer(text, established=established) if cls is None else Classified(cls, text)
            )
    bare = text
    for suffix in _RAKP_SUFFIXES:
        bare = bare.removesuffix(suffix)
    if bare in _RMCP_BY_TEXT:
        status = _RMCP_BY_TEXT[bare]
        return Classified(RMCP_STATUS.get(status, BMCProtocolError), text, f"rmcp 0x{status:02X}")
    # A completion code pyghmi turned into text (get_ipmi_error adds suffixes).
    for code_text, code in sorted(_BY_TEXT.items(), key=lambda kv: -len(kv[0])):
        if code and text.startswith(code_text):
            return _by_code(code, text, None)
    return None


def classify(
    exc: BaseException, *, established: bool, command: tuple[int, int] | None = None
) -> Classified:
    """Map one exception raised while talking to a BMC to a fault class.

    ``established`` says whether the session was up when it happened (it
    decides between ``BMCUnreachable`` and ``BMCTimeout`` for silence);
    ``command`` is the (netfn, command) in flight, for command-specific codes.
    """
    if isinstance(exc, NoAnswer):
        return _no_answer(str(exc), established=established)
    if isinstance(exc, SuiteRefused):
        # the RMCP+ row of 0x11 (never retried, never counted), with the fix
        return Classified(
            UnsupportedOperation,
            f"{exc}: bmaas never falls back to suite 3 unasked; set driver_info "
            "ipmi_cipher_suite: auto (17, else 3, recorded on the node and reported) "
            "or 3 for this BMC",
            status=f"rmcp 0x{exc.status:02X}",
        )
    if isinstance(exc, pyghmi_exc.IpmiException):
        text = str(exc)
        code = getattr(exc, "ipmicode", 0) or 0
        if code == _NO_ANSWER_CODE:
            return _no_answer(text, established=established)
        found = _by_code(code, text, command) if code else _by_text(text, established=established)
        if found is not None:
            return found
        if isinstance(exc, pyghmi_exc.BmcErrorException):
            return Classified(BMCProtocolError, text)  # pyghmi judged the BMC's data invalid
    elif isinstance(exc, struct.error | IndexError | AssertionError | UnicodeDecodeError):
        # a reply shorter than its format, or not what pyghmi asserts it must be
        return Classified(BMCProtocolError, f"malformed reply ({type(exc).__name__}: {exc})")
    elif isinstance(exc, socket.gaierror):
        return Classified(BMCUnreachable, f"cannot resolve the BMC address: {exc.strerror}")
    elif isinstance(exc, ConnectionRefusedError):
        return Classified(BMCUnreachable, "ICMP port unreachable: nothing listens on the IPMI port")
    elif isinstance(exc, OSError):
        return Classified(BMCUnreachable, f"cannot send to the BMC: {exc.strerror or exc}")
    message = f"{type(exc).__name__}: {exc}"
    LOG.warning("unclassified IPMI error: %s", message)
    return Classified(UnclassifiedFault, message)
