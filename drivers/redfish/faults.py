"""The one place Redfish failures become bmaas faults.

:func:`map_exception` takes whatever sushy, requests or the JSON decoder raised
and returns the most specific :mod:`bmaas.faults` class, in this order:

=====================================================  ======================
what happened                                          fault
=====================================================  ======================
our own per-call deadline ran out between requests     ``BMCTimeout``
connection refused, DNS failure, connect timeout,      ``BMCUnreachable``
a TLS handshake cut short (through requests or the
lean read's own connection, ``ConnectFailed``)
a certificate that does not verify; no TLS version     ``InputError`` (redfish_verify_ca,
(>= 1.2) or cipher both sides accept                   redfish_tls_min_version/ciphers)
read timeout                                           ``BMCTimeout``
connection closed or reset before any response         ``BMCTimeout`` (sent: outcome unknown)
reply not HTTP, truncated, or not JSON                 ``BMCProtocolError``
a vendor answer or standard MessageId in the table     as in :data:`MESSAGE_RULES`
(or a plain-text body's words, sushy-tools')
(conflict and POST windows, Lifecycle Controller       (``BMCBusy``: retried here,
busy, session limit; licence missing; the Base        never counted; licence and
registry's property and operation errors on a write)   property errors:
                                                       ``UnsupportedOperation``; a
                                                       value's format: ``InputError``)
HTTP 401, 403                                          ``BMCAuthError``
HTTP 409, 429, 503 (``retry_after`` from Retry-After)  ``BMCBusy``
HTTP 412 after one re-read and resend                  ``BMCBusy`` (written meanwhile)
HTTP 428 after one re-read and resend with If-Match    ``UnsupportedOperation``
HTTP 500, 502, another 5xx (``message_id``)            ``BMCInternalError``
HTTP 504 (the BMC's own backend timed out)             ``BMCTimeout``
HTTP 405, 501; missing action; value not allowed       ``UnsupportedOperation``
HTTP 404 on the configured system                      ``InputError`` (redfish_system_id)
HTTP 404 on a resource the service itself links        ``UnsupportedOperation`` (see below)
HTTP 404 on the service root, missing required         ``BMCProtocolError``
attribute, no token
system id needed but not exactly one system            ``InputError`` (redfish_system_id)
anything else                                          ``UnclassifiedFault``
=====================================================  ======================

A 404 on a resource the service linked is a well-formed "not here" (a
dangling link, or a resource gone since it was read): asking again never
helps and it says nothing about the node's hardware, so it is never counted
or fenced (issue 36; docs/faults.md, "Only the node's own faults count").

The mapping is pure (no I/O) so it is unit-tested with real exception objects.
"""

from __future__ import annotations

import dataclasses
import email.utils
import http.client
import json
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any

import requests
import sushy.exceptions as sushy_exc
import urllib3.exceptions as u3

from bmaas.faults import (
    BmaasError,
    BMCAuthError,
    BMCBusy,
    BMCFault,
    BMCInternalError,
    BMCProtocolError,
    BMCTimeout,
    BMCUnreachable,
    BMCUpdating,
    InputError,
    RequestRejected,
    UnclassifiedFault,
    UnsupportedOperation,
)
from bmaas.tlspolicy import handshake_problem

__all__ = [
    "ALREADY_THERE",
    "MESSAGE_RULES",
    "PLAIN_BODY_CHARS",
    "SERVICE_ROOT",
    "BodyTooLarge",
    "ConnectFailed",
    "DeadlineExceeded",
    "FaultBuilder",
    "MalformedBody",
    "NotSent",
    "answer_text",
    "map_answer",
    "map_exception",
    "map_task",
    "may_be_already_there",
    "retry_after",
    "rule_for",
    "status_fault",
]

#: builds a BMC fault naming node, driver, operation, address and elapsed
FaultBuilder = Callable[..., BMCFault]


class DeadlineExceeded(Exception):
    """The call's deadline passed before its next request could be sent, or
    before the BMC's answer was over."""


class NotSent(DeadlineExceeded):
    """The deadline passed before this request went out. When no request of
    the driver call went out before it (bmaas's own waits -- the node's lock,
    the BMC's gate, another node's login to the same service -- spent the
    budget), the call is ``SlotTimeout`` ("nothing sent"), never the BMC's
    timeout (:meth:`~bmaas.drivers.redfish.connector.BoundedConnector.within`)."""


class ConnectFailed(Exception):
    """The lean read's own connection (:mod:`bmaas.drivers.redfish.wire`) could not
    be made: no route, reset during connect, a connect timeout before the
    deadline -- the request was never sent (urllib3's ``NewConnectionError``
    for the requests path). The OS error is its ``__cause__``."""


class BodyTooLarge(Exception):
    """The BMC's answer is larger than the node's body cap
    (``redfish_max_body_bytes``): a malformed reply, never read whole."""


class MalformedBody(ValueError):
    """A JSON answer refused before it was parsed
    (:func:`~bmaas.drivers.redfish.framing.loads_bounded`: over its cap,
    nested deeper than it takes, a string never closed): a malformed reply."""


@dataclasses.dataclass(frozen=True)
class MessageRule:
    """A text that, found in an error reply, decides the fault (before the status)."""

    text: str
    #: a BMC fault, or ``InputError`` where the value refused was the user's
    fault: type[BMCFault] | type[InputError]
    #: why this class: what the answer means for the caller
    note: str
    #: where the answer is documented (Ironic bug or release note, sushy,
    #: a DMTF or vendor message registry, a public report of the body)
    source: str = "DMTF Base message registry"


_BUSY_BY_MEANING = (
    "a state the BMC or the node passes through: retried on the same node with "
    "backoff, never counted against the node (BMCBusy's row in the policy table)"
)

#: Standard Base-registry MessageIds (matched without their version) and vendor
#: answers seen in the field, classified by what they mean for the caller.
#: First match wins; each entry says why and where it is documented.
MESSAGE_RULES: tuple[MessageRule, ...] = (
    MessageRule(
        "SYS518",
        BMCBusy,
        "Dell iDRAC answers SYS518 while the Lifecycle Controller is still busy "
        "with a previous operation: " + _BUSY_BY_MEANING,
        "sushy connector check_retry_on_exception (IDRAC.2.7.SYS518)",
    ),
    MessageRule(
        "InvalidOperationForSystemState",
        BMCBusy,
        "HPE iLO rejects a change while a previous power or boot change settles. "
        "iLO also answers it to an On of a node already on: a power action re-reads "
        "the state first and succeeds if the node is there (ALREADY_THERE).",
        "sushy connector check_retry_on_exception; HPE iLO 5 message registry iLO.2.16",
    ),
    MessageRule(
        "ActionParameterValueConflict",
        BMCBusy,
        "Dell iDRAC10 answers 409 to ComputerSystem.Reset On for up to ~60 s after a "
        "power-off; the same On is accepted once it settles: " + _BUSY_BY_MEANING,
        "Ironic bug 2162995 (power_on_conflict_retry_*); DMTF Base 1.18",
    ),
    MessageRule(
        "UnableToModifyDuringSystemPOST",
        BMCBusy,
        "HPE iLO refuses boot and BIOS changes while the system is in POST; they are "
        "accepted once POST ends: " + _BUSY_BY_MEANING,
        "Ironic bug 2136275 (post_boot_retry_*); HPE iLO 5 message registry iLO.2.18",
    ),
    MessageRule(
        "PSU50",
        BMCBusy,
        "Dell iDRAC's PSU501/PSU502 'Server is already powered ON/OFF.' (409). A power "
        "action re-reads the state first and succeeds if the node is there "
        "(ALREADY_THERE); if the read disagrees, the two agree shortly",
        "dell/dellemc-openmanage-ansible-modules#115 (IDRAC.2.1.PSU501); Ironic release "
        "note catch-redfish-409",
    ),
    MessageRule(
        "RAC0218",
        BMCBusy,
        "Dell iDRAC's 'maximum number of user sessions is reached' (503 on login): no "
        "slot now, one frees when a session ends or expires; never an auth error",
        "stmcginnis/gofish#75, bb-Ricardo/check_redfish#89 (IDRAC.2.x.RAC0218)",
    ),
    MessageRule(
        "LIC501",
        UnsupportedOperation,
        "Dell iDRAC's 'A required license is missing or expired' (403): the feature "
        "is not licensed on this BMC. Asking again never helps, and it is not a bad "
        "password (an operator would rotate a good one)",
        "Dell iDRAC message registry LIC501; dellemc-openmanage-ansible-modules "
        "(treated as 'skipped')",
    ),
    MessageRule(
        "LicenseKeyRequired",
        UnsupportedOperation,
        "HPE iLO's 'a license key is required' (400, iLO.2.x.LicenseKeyRequired: "
        "virtual media and other Advanced features on an iLO Standard licence): not "
        "licensed on this BMC; asking again never helps, and the request was right",
        "HPE iLO 5 message registry (iLO.2.14.LicenseKeyRequired); Cray-HPE hms-capmc tests",
    ),
    MessageRule(
        "OemLicenseNotPassed",
        UnsupportedOperation,
        "Supermicro's 'Not licensed to perform this request ... DCMS' (403): the "
        "feature needs a licence this BMC lacks",
        "metal-stack/go-hal#67 (SMC.1.0.OemLicenseNotPassed)",
    ),
    MessageRule(
        "Not licensed to perform this request",
        UnsupportedOperation,
        "Supermicro's licence text, when the MessageId is missing or different",
        "metal-stack/go-hal#67",
    ),
    MessageRule(
        "RAC0904",
        BMCBusy,
        "Dell iDRAC's 'Virtual Media is detached or already in use' on an insert: the "
        "slot is held by another session (a console user, another tool) or is being "
        "re-attached. The insert tries the next CD slot first (bmaas.drivers.redfish."
        "vmedia.NEXT_SLOT); with none left it is a state of the BMC, not of the node: "
        + _BUSY_BY_MEANING,
        "Ironic's 2026 virtual media fixes (issue 34); Dell iDRAC message registry",
    ),
    MessageRule(
        "VRM0021",
        BMCBusy,
        "Dell iDRAC's other MessageId for 'Virtual Media is detached or already in use' "
        "(as RAC0904)",
        "Ironic's 2026 virtual media fixes (issue 34); Dell iDRAC message registry",
    ),
    MessageRule(
        "Virtual Media is detached or already in use",
        BMCBusy,
        "the same iDRAC answer when its MessageId is missing or another one (as RAC0904)",
        "Ironic's 2026 virtual media fixes (issue 34)",
    ),
    MessageRule(
        "UpdateInProgress",
        BMCUpdating,
        "Update registry: an update is in progress, and the service takes no other "
        "change meanwhile (the BMC may reboot under it). Later, on the same node; never "
        "counted, and the node is never powered off mid-update (BMCUpdating's row)",
        "DMTF Update message registry 1.3.0 (UpdateInProgress); bmclib ErrBMCUpdating",
    ),
    MessageRule(
        "VerificationFailed",
        RequestRejected,
        "Update registry: the service or component could not verify the image (signature, "
        "checksum, wrong model): the image is wrong, and every node of the kind refuses it",
        "DMTF Update message registry 1.3.0 (VerificationFailed)",
    ),
    MessageRule(
        "UpdateNotApplicable",
        RequestRejected,
        "Update registry: the image applies to no component of this system: the request "
        "is wrong, not the node",
        "DMTF Update message registry 1.3.0 (UpdateNotApplicable)",
    ),
    MessageRule(
        "RED007",
        RequestRejected,
        "Dell iDRAC's update job Failed with 'Unable to verify Update Package signature': "
        "the image is wrong (VerificationFailed in iDRAC's words), every node of the kind "
        "refuses it",
        "Dell KB 000135299 (RED007 on an out-of-band firmware update job)",
    ),
    MessageRule(
        "ServiceTemporarilyUnavailable",
        BMCBusy,
        "Base registry: the service is temporarily unavailable.",
    ),
    MessageRule("SessionLimitExceeded", BMCBusy, "Base registry: no free session slot."),
    MessageRule("InsufficientPrivilege", BMCAuthError, "Base registry: the account lacks rights."),
    MessageRule("ActionNotSupported", UnsupportedOperation, "Base registry."),
    MessageRule("ActionParameterValueNotInList", UnsupportedOperation, "Base registry."),
    MessageRule("ActionParameterNotSupported", UnsupportedOperation, "Base registry."),
    MessageRule("PropertyValueNotInList", UnsupportedOperation, "Base registry."),
    MessageRule(
        "PropertyUnknown",
        UnsupportedOperation,
        "Base registry: a write named a property this service does not have (a Boot with "
        "BootOrder/BootOptions only, PATCHed an override). bmaas sent a standard property; "
        "the service lacks it. Asking again never helps, and it says nothing about the node",
        "DMTF Base message registry (PropertyUnknown); issue 47",
    ),
    MessageRule(
        "PropertyNotWritable",
        UnsupportedOperation,
        "Base registry: the service has the property but will not have it written (a "
        "read-only override, a slot's Image on a PATCH-less service): a capability it lacks, "
        "never the node's fault",
        "DMTF Base message registry (PropertyNotWritable); issue 47",
    ),
    MessageRule(
        "PropertyValueTypeError",
        UnsupportedOperation,
        "Base registry: the service wants another JSON type for a property bmaas sends as the "
        "schema types it (a string target, a boolean Inserted): the service's reading of the "
        "schema, not the node's state and not the user's input",
        "DMTF Base message registry (PropertyValueTypeError); issue 47",
    ),
    MessageRule(
        "OperationNotAllowed",
        UnsupportedOperation,
        "Base registry: the service does not allow this method on the resource (as HTTP 405, "
        "but some services answer it with 400): the service's rule, never the node's fault",
        "DMTF Base message registry (OperationNotAllowed); issue 47",
    ),
    MessageRule(
        "PropertyValueFormatError",
        InputError,
        "Base registry: a property's value has the wrong format. The one free-form value "
        "bmaas writes is its user's (the image URL of a PATCHed slot, a UEFI HTTP boot "
        "URI; targets and modes are checked against AllowableValues first): fix the input; "
        "never retried, never the node's fault",
        "DMTF Base message registry (PropertyValueFormatError); issue 47",
    ),
    # sushy-tools' system PATCH of a UEFI HTTP boot (``UefiHttp`` with
    # ``HttpBootUri``) answers 400 with a plain-text body, no Redfish error;
    # the text is what says what happened (issue 48, finding 4)
    MessageRule(
        "Failed to save HttpBootUri field value",
        UnsupportedOperation,
        "sushy-tools: its systems backend cannot keep an HttpBootUri (the fake driver has "
        "no set_http_boot_uri): UEFI HTTP boot from a URI is a capability this service "
        "lacks. Asking again never helps, and it says nothing about the node",
        "sushy-tools 2.2.0 emulator/main.py (system PATCH, HttpBootUri)",
    ),
    MessageRule(
        "Failed to set the supplied media as the next bootdevice",
        UnsupportedOperation,
        "sushy-tools: its systems backend could not make the downloaded image the boot "
        "device (no CD device to attach it to): a capability of the service, not the node",
        "sushy-tools 2.2.0 emulator/main.py (system PATCH, HttpBootUri)",
    ),
    MessageRule(
        "Failed to download and attach HttpBootUri",
        InputError,
        "sushy-tools: the service could not download the image at the HttpBootUri sent (as "
        "a BMC's firmware fetches it): the URL the user or Ironic published is wrong or "
        "out of the BMC's reach ([deploy]http_url, external_http_url). Fix the input; "
        "another node fetches from the same URL",
        "sushy-tools 2.2.0 emulator/main.py (system PATCH, HttpBootUri)",
    ),
    MessageRule(
        "ActionParameterValueFormatError",
        InputError,
        "Base registry: an action parameter's value has the wrong format -- on InsertMedia "
        "the user's image URL (as PropertyValueFormatError)",
        "DMTF Base message registry (ActionParameterValueFormatError); issue 47",
    ),
)

#: statuses with which a BMC may refuse an idempotent power action because
#: the node is *already* in the requested state (iDRAC 409 PSU501 "Server is
#: already powered ON.", iLO 400 InvalidOperationForSystemState ["Power is
#: on"]): the driver re-reads the power state and, if the node is there (or
#: heading there), the action succeeded. Source: Ironic release note
#: catch-redfish-409 (2025-10, "treated as success"); the bodies from
#: dell/dellemc-openmanage-ansible-modules#115 and HPE's iLO 5 registry.
ALREADY_THERE: frozenset[int] = frozenset({400, 409})


def may_be_already_there(exc: BaseException) -> bool:
    """Whether ``exc`` is an answer that may mean "already in that state"
    (the caller re-reads the power state before deciding)."""
    return isinstance(exc, sushy_exc.HTTPError) and exc.status_code in ALREADY_THERE


_STATUS: dict[int, type[BMCFault]] = {
    401: BMCAuthError,
    403: BMCAuthError,
    405: UnsupportedOperation,
    429: BMCBusy,
    500: BMCInternalError,
    # RFC 9110: "conflicts with the current state of the target resource" -- on
    # a BMC a state that passes (a power transition settling), so "later"
    409: BMCBusy,
    # a PATCH's If-Match no longer matches: someone else wrote the resource
    # between our read and our write. The driver re-reads and sends once more
    # (bmaas.drivers.redfish.preconditions); a second 412 is more writing
    # going on: later, never this node's fault
    412: BMCBusy,
    # the service wants If-Match: the driver re-reads and sends it; a second
    # 428 is an ETag rule bmaas cannot meet on this BMC -- asking again never
    # helps, and it says nothing about the node
    428: UnsupportedOperation,
    501: UnsupportedOperation,
    502: BMCInternalError,  # the BMC's web front end could not reach its Redfish service
    503: BMCBusy,
    504: BMCTimeout,  # the BMC's web front end gave up waiting on its own backend
}


def status_fault(status: int) -> type[BMCFault] | None:
    """The fault an HTTP error status says by itself, before any message
    rule: :data:`_STATUS`, and any other 5xx (505, 507, a vendor's) the BMC's
    own fault, as 500 (RFC 9110: the server erred or cannot do it). None for
    a 4xx the table does not name (a 404's meaning depends on the path)."""
    cls = _STATUS.get(status)
    if cls is None and 500 <= status < 600:
        cls = BMCInternalError
    return cls


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and everything it wraps: ``__cause__``/``__context__``, wrapped
    ``args`` (requests wraps urllib3) and urllib3's ``reason``."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo += [a for a in current.args if isinstance(a, BaseException)]
        for attr in ("reason", "__cause__", "__context__"):
            inner = getattr(current, attr, None)
            if isinstance(inner, BaseException):
                todo.append(inner)


def retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds from an HTTP ``Retry-After`` (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _message_ids(exc: sushy_exc.HTTPError) -> list[str]:
    info = exc.extended_info if isinstance(exc.extended_info, list) else []
    ids = [m.get("MessageId") for m in info if isinstance(m, dict)]
    return [i for i in ids if isinstance(i, str)]


def _transport(exc: BaseException, build: FaultBuilder) -> BMCFault | None:
    """A fault for a failure below HTTP (socket, TLS, framing), if there is one."""
    found = list(_chain(exc))

    def has(*kinds: type[BaseException]) -> BaseException | None:
        return next((e for e in found if isinstance(e, kinds)), None)

    if inner := has(requests.exceptions.SSLError, ssl.SSLError, u3.SSLError):
        return build(BMCUnreachable, f"TLS handshake failed: {_short(inner)}")
    # socket.gaierror: the lean read's own connect (bmaas.drivers.redfish.wire)
    if has(u3.NameResolutionError, socket.gaierror):
        return build(BMCUnreachable, "BMC host name does not resolve")
    if has(ConnectionRefusedError):
        return build(BMCUnreachable, "connection refused")
    # urllib3's NewConnectionError subclasses ConnectTimeoutError: test it first.
    if inner := has(u3.NewConnectionError, ConnectFailed):
        return build(BMCUnreachable, f"could not connect: {_short(inner.__cause__ or inner)}")
    if has(requests.exceptions.ConnectTimeout, u3.ConnectTimeoutError):
        return build(BMCUnreachable, "connect timed out")
    if has(requests.exceptions.ReadTimeout, u3.ReadTimeoutError, TimeoutError):
        return build(BMCTimeout, "no answer before the deadline (read timeout)")
    # RemoteDisconnected is also a BadStatusLine: test for it first.
    if has(http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
        return build(BMCTimeout, "connection closed without a response")
    if inner := has(
        http.client.HTTPException,
        requests.exceptions.ChunkedEncodingError,
        requests.exceptions.ContentDecodingError,
        u3.ProtocolError,
    ):
        return build(BMCProtocolError, f"reply is not valid HTTP: {_short(inner)}")
    return None


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."


#: how much of an error answer that is not a Redfish error (plain text, an
#: HTML page) a fault message quotes
PLAIN_BODY_CHARS = 200


def _plain_body(exc: sushy_exc.HTTPError) -> str:
    """The text of an error answer with no Redfish error in it (sushy found
    no JSON: no detail, no MessageId), on one line and at most
    :data:`PLAIN_BODY_CHARS`; "" when there is none or it is JSON."""
    if exc.detail or getattr(exc, "body", None) is not None:
        return ""
    try:
        text = str(getattr(getattr(exc, "response", None), "text", "") or "")
    except (TypeError, ValueError, LookupError):  # an undecodable body says nothing
        return ""
    text = " ".join(text.split())
    if not text or text.startswith(("{", "[")):
        return ""
    return text if len(text) <= PLAIN_BODY_CHARS else text[: PLAIN_BODY_CHARS - 3] + "..."


def answer_text(exc: sushy_exc.HTTPError) -> str:
    """What an error answer says, for a fault message: ``HTTP 400: its
    detail`` (a Redfish error's message, else the plain body's text)."""
    said = exc.detail or _plain_body(exc)
    return f"HTTP {exc.status_code or 0}" + (f": {said}" if said else "")


def rule_for(exc: sushy_exc.HTTPError) -> MessageRule | None:
    """The :data:`MESSAGE_RULES` row an error answer matches (its MessageIds,
    code and detail, or its plain body's text), None when no row names it."""
    haystack = " ".join(
        [*_message_ids(exc), str(exc.code or ""), str(exc.detail or ""), _plain_body(exc)]
    )
    return next((r for r in MESSAGE_RULES if r.text in haystack), None)


def _http(
    exc: sushy_exc.HTTPError, build: FaultBuilder, *, node: str, system: str | None
) -> BmaasError:
    status = exc.status_code or 0
    ids = _message_ids(exc)
    response = getattr(exc, "response", None)
    headers: Any = getattr(response, "headers", None) or {}
    what = answer_text(exc)
    extra: dict[str, Any] = {"status": str(status)}
    rule = rule_for(exc)
    cls = rule.fault if rule else status_fault(status)
    if rule is not None and rule.text not in what:
        # the answer that decided it, for the operator (the detail is often
        # only "A general error has occurred")
        what += f" [{next((i for i in ids if rule.text in i), rule.text)}]"
    if cls is InputError:
        return InputError(f"the BMC refused the value given: {what}", field="url", node=node)
    if cls is None and status == 404:
        url = getattr(getattr(response, "request", None), "path_url", None) or str(exc)
        url = url.partition("?")[0]  # the lean read may add $select
        if system and url.rstrip("/").endswith(system.rstrip("/")):
            return InputError(
                f"the BMC has no system {system} (HTTP 404)",
                field="driver_info.redfish_system_id",
                node=node,
            )
        path = _path_of(url)
        if path is None or path.rstrip("/") == SERVICE_ROOT:
            cls = BMCProtocolError  # no Redfish service where one was configured
        else:
            return build(
                UnsupportedOperation,
                f"{what}: the service links {path} but does not serve it (a dangling "
                "link or a resource gone since it was read): not a fault of the node",
                **extra,
            )
    if cls is None:
        return build(UnclassifiedFault, what, **extra)
    if cls is not None and issubclass(cls, BMCBusy):
        extra["retry_after"] = retry_after(headers.get("Retry-After"))
    if cls is BMCInternalError:
        extra["message_id"] = ids[0] if ids else exc.code
    return build(cls, what, **extra)


#: the one path bmaas asks for without reading a link to it (besides the
#: configured system): a 404 here means no Redfish service at the address
SERVICE_ROOT = "/redfish/v1"


def _path_of(url: str) -> str | None:
    """The path of a request URL (``/redfish/v1/Managers/1``), whether it came
    as a path or as a whole URL (sushy's message); None when there is none."""
    if url.startswith("/"):
        return url
    found = url.find("/redfish/")
    return url[found:].split()[0] if found >= 0 else None


def map_exception(
    exc: BaseException, build: FaultBuilder, *, node: str, system: str | None = None
) -> BmaasError:
    """The bmaas fault for ``exc`` (the caller raises it ``from exc``).

    ``build(cls, message, **kw)`` makes a BMC fault that names the node,
    operation, address and elapsed time (``BMCDriver.fault``); ``system`` is
    the configured system path, so a 404 on it reads as bad input.
    """
    if isinstance(exc, BmaasError):
        return exc
    if isinstance(exc, DeadlineExceeded):
        return build(BMCTimeout, str(exc) or "deadline passed")
    if isinstance(exc, BodyTooLarge | MalformedBody):
        return build(BMCProtocolError, str(exc))
    if isinstance(exc, json.JSONDecodeError):  # requests' JSONDecodeError is one too
        return build(BMCProtocolError, f"reply is not valid JSON: {exc.msg} at char {exc.pos}")
    if isinstance(exc, sushy_exc.MissingXAuthToken):
        return build(BMCProtocolError, "session created without an X-Auth-Token")
    if isinstance(exc, sushy_exc.HTTPError):
        return _http(exc, build, node=node, system=system)
    if isinstance(exc, sushy_exc.MissingActionError | sushy_exc.InvalidParameterValueError):
        return build(UnsupportedOperation, str(exc))
    if isinstance(exc, sushy_exc.MissingAttributeError | sushy_exc.MalformedAttributeError):
        return build(BMCProtocolError, str(exc))
    if isinstance(exc, sushy_exc.UnknownDefaultError):
        return InputError(
            "is required: the BMC does not have exactly one system",
            field="driver_info.redfish_system_id",
            node=node,
        )
    # a certificate that does not verify, no common TLS version or cipher: the
    # node's configuration, not its hardware (bmaas.tlspolicy; issue 36)
    tls = handshake_problem(_chain(exc), node=node)
    if tls is not None:
        return tls
    fault = _transport(exc, build)
    if fault is not None:
        return fault
    return build(UnclassifiedFault, f"{type(exc).__name__}: {_short(exc)}")


def map_task(state: str, messages: list[str], build: FaultBuilder) -> BMCFault:
    """The fault for a task (or vendor job) that ended badly (``state``:
    ``Exception``, ``Killed``, ``Cancelled``, a job's ``Failed``): the class
    of the first :data:`MESSAGE_RULES` row its messages (``MessageId: text``)
    name -- an image refused (``VerificationFailed``,
    ``UpdateNotApplicable``) is ``RequestRejected`` --, else
    ``BMCInternalError``: the BMC reported its own failure."""
    said = "; ".join(messages) or "no message"
    haystack = " ".join(messages)
    rule = next((r for r in MESSAGE_RULES if r.text in haystack), None)
    cls = rule.fault if rule is not None and issubclass(rule.fault, BMCFault) else None
    return build(cls or BMCInternalError, f"the task ended {state}: {said}")


def map_answer(
    method: str,
    url: str,
    answer: tuple[int, str, dict[str, str], bytes],
    build: FaultBuilder,
    *,
    node: str,
) -> BmaasError:
    """The fault for an error answer bmaas's own HTTP read
    (:mod:`bmaas.drivers.redfish.wire`: the events client's EventService
    read, stream open and subscriptions): ``answer`` is its status, reason,
    headers (lower-case names) and body, raised as sushy raises the answers
    of its own requests and mapped by :func:`map_exception` -- one table for
    every status bmaas reads. A status sushy does not raise for (a 3xx, a
    2xx that is not the one asked for) is a :class:`BMCProtocolError`."""
    status, reason, headers, body = answer
    response = requests.Response()
    response.status_code = status
    response.reason = reason
    response.headers = requests.structures.CaseInsensitiveDict(headers)
    response._content = body
    response._content_consumed = True
    response.url = url
    try:
        sushy_exc.raise_for_response(method, url, response)
    except sushy_exc.HTTPError as exc:
        exc.response = response  # as the connector does: for its headers and URL
        return map_exception(exc, build, node=node)
    return build(BMCProtocolError, f"unexpected HTTP {status}", status=str(status))
