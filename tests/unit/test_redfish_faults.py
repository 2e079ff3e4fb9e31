"""The Redfish mapping function on real requests/urllib3/sushy exceptions, no sockets.

Each exception is built the way the libraries build it (requests wraps
urllib3 in ``args``, urllib3 chains the socket error as ``__cause__``, sushy
raises its ConnectionError inside the ``except`` so it lands in
``__context__``), then mapped.
"""

from __future__ import annotations

import functools
import http.client
import json
import ssl

import pytest
import requests
import sushy.exceptions as sushy_exc
import urllib3.exceptions as u3

from bmaas.driver_info import DriverInfo
from bmaas.drivers.redfish import RedfishDriver
from bmaas.drivers.redfish.faults import MESSAGE_RULES, DeadlineExceeded, map_exception, retry_after
from bmaas.faults import (
    BmaasError,
    BMCAuthError,
    BMCBusy,
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
from bmaas.policy import FleetOutcome, policy_for

URL = "https://10.0.0.9/redfish/v1/Systems/1"
SYSTEM = "/redfish/v1/Systems/1"


@pytest.fixture
def build():
    info = DriverInfo(
        redfish_address="https://10.0.0.9", redfish_username="u", redfish_password="p"
    )
    driver = RedfishDriver("r1-n09", info)
    return functools.partial(driver.fault, operation="power.get", elapsed=0.25)


def mapped(exc: BaseException, build) -> BmaasError:
    return map_exception(exc, build, node="r1-n09", system=SYSTEM)


def via_sushy(inner: Exception) -> sushy_exc.ConnectionError:
    """What sushy's connector raises when requests fails."""
    try:
        raise inner
    except Exception as exc:
        try:
            raise sushy_exc.ConnectionError(url=URL, error=exc) from None
        except sushy_exc.ConnectionError as outer:
            outer.__context__ = exc  # sushy raises inside `except`, without `from`
            return outer


def response(status: int, body: object = None, headers: dict[str, str] | None = None):
    resp = requests.Response()
    resp.status_code = status
    resp._content = (
        b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    )
    resp.headers.update(headers or {})
    resp.request = requests.Request("GET", URL).prepare()
    resp.url = URL
    return resp


def http_error(status: int, body: object = None, headers: dict[str, str] | None = None):
    """The sushy HTTPError for a reply, with the response kept as our connector keeps it."""
    resp = response(status, body, headers)
    with pytest.raises(sushy_exc.HTTPError) as info:
        sushy_exc.raise_for_response("GET", resp.url, resp)
    info.value.response = resp
    return info.value


def redfish_error(message_id: str, message: str = "it failed") -> dict[str, object]:
    return {
        "error": {
            "code": "Base.1.8.GeneralError",
            "message": message,
            "@Message.ExtendedInfo": [{"MessageId": message_id, "Message": message}],
        }
    }


def refused() -> Exception:
    cause = ConnectionRefusedError(111, "Connection refused")
    try:
        raise u3.NewConnectionError(None, "Failed to establish a new connection") from cause
    except u3.NewConnectionError as new:
        return requests.exceptions.ConnectionError(u3.MaxRetryError(None, URL, new))


# -- transport -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("inner", "cls", "words"),
    [
        (refused(), BMCUnreachable, "refused"),
        (
            requests.exceptions.ConnectionError(
                u3.MaxRetryError(None, URL, u3.NameResolutionError("bmc.example", None, "EAI"))
            ),
            BMCUnreachable,
            "resolve",
        ),
        (
            requests.exceptions.ConnectTimeout(
                u3.MaxRetryError(None, URL, u3.ConnectTimeoutError(None, "timed out"))
            ),
            BMCUnreachable,
            "connect timed out",
        ),
        (
            requests.exceptions.SSLError(
                u3.MaxRetryError(
                    None,
                    URL,
                    u3.SSLError(ssl.SSLEOFError(8, "EOF occurred in violation of protocol")),
                )
            ),
            BMCUnreachable,  # a handshake cut short: the transport's, not the configuration's
            "TLS",
        ),
        (
            requests.exceptions.ReadTimeout(u3.ReadTimeoutError(None, URL, "Read timed out.")),
            BMCTimeout,
            "read timeout",
        ),
        (
            requests.exceptions.ConnectionError(
                u3.ProtocolError(
                    "Connection aborted.", http.client.RemoteDisconnected("closed without response")
                )
            ),
            BMCTimeout,
            "without a response",
        ),
        (
            requests.exceptions.ConnectionError(
                u3.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset by peer"))
            ),
            BMCTimeout,
            "without a response",
        ),
        (
            requests.exceptions.ConnectionError(
                u3.ProtocolError(
                    "Connection aborted.", http.client.BadStatusLine("HTTP/1.1 2OO Ok")
                )
            ),
            BMCProtocolError,
            "not valid HTTP",
        ),
        (
            requests.exceptions.ChunkedEncodingError(
                u3.ProtocolError("Response ended prematurely")
            ),
            BMCProtocolError,
            "not valid HTTP",
        ),
    ],
    ids=[
        "refused",
        "dns",
        "connect-timeout",
        "tls",
        "read-timeout",
        "remote-disconnected",
        "reset",
        "bad-status-line",
        "truncated-chunks",
    ],
)
def test_transport_failures(build, inner: Exception, cls: type, words: str) -> None:
    fault = mapped(via_sushy(inner), build)
    assert type(fault) is cls
    assert words in fault.message
    assert (fault.node, fault.operation, fault.driver, fault.elapsed) == (
        "r1-n09",
        "power.get",
        "redfish",
        0.25,
    )
    assert fault.address == "https://10.0.0.9"


def test_invalid_json_that_sushy_lets_through(build) -> None:
    with pytest.raises(requests.exceptions.JSONDecodeError) as info:
        response(200, b'{"PowerState": "O').json()
    fault = mapped(info.value, build)
    assert isinstance(fault, BMCProtocolError)
    assert "not valid JSON" in fault.message


def test_our_deadline(build) -> None:
    fault = mapped(DeadlineExceeded("deadline passed before GET /redfish/v1/Systems/1"), build)
    assert isinstance(fault, BMCTimeout)


# -- HTTP statuses -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (401, BMCAuthError),
        (403, BMCAuthError),
        (405, UnsupportedOperation),
        (501, UnsupportedOperation),
        (500, BMCInternalError),
        (502, BMCInternalError),
        (504, BMCTimeout),
        (409, BMCBusy),  # a conflict with the current state: it passes
        (412, BMCBusy),  # written meanwhile, still after one re-read and resend
        (428, UnsupportedOperation),  # an ETag rule not met even with If-Match
        (418, UnclassifiedFault),
    ],
)
def test_statuses(build, status: int, cls: type) -> None:
    fault = mapped(http_error(status, {"error": {"message": "no"}}), build)
    assert type(fault) is cls
    assert fault.status == str(status)


@pytest.mark.parametrize("status", [429, 503])
def test_busy_reads_retry_after_seconds(build, status: int) -> None:
    fault = mapped(http_error(status, None, {"Retry-After": "12"}), build)
    assert isinstance(fault, BMCBusy)
    assert fault.retry_after == 12.0


def test_updating_is_busy_and_reads_retry_after(build) -> None:
    fault = mapped(
        http_error(503, redfish_error("Update.1.3.UpdateInProgress"), {"Retry-After": "30"}), build
    )
    assert isinstance(fault, BMCUpdating)
    assert fault.retry_after == 30.0


def test_busy_without_retry_after(build) -> None:
    fault = mapped(http_error(503), build)
    assert isinstance(fault, BMCBusy)
    assert fault.retry_after is None


def test_retry_after_as_an_http_date() -> None:
    assert retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now=1445412480.0) == 30.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412480.0) == 0.0
    assert retry_after("soon") is None
    assert retry_after(None) is None


def test_internal_error_carries_the_message_id(build) -> None:
    fault = mapped(http_error(500, redfish_error("Oem.1.0.FanFailure")), build)
    assert isinstance(fault, BMCInternalError)
    assert fault.message_id == "Oem.1.0.FanFailure"
    assert "Oem.1.0.FanFailure" in str(fault)


def test_internal_error_without_a_json_body(build) -> None:
    fault = mapped(http_error(500, b"<html>oops</html>"), build)
    assert isinstance(fault, BMCInternalError)
    assert fault.message_id == "Base.1.0.GeneralError"  # sushy's default code


def test_404_on_the_configured_system_names_it(build) -> None:
    fault = mapped(http_error(404), build)
    assert isinstance(fault, InputError)
    assert fault.field == "driver_info.redfish_system_id"
    assert fault.node == "r1-n09"
    assert SYSTEM in str(fault)


def http_error_at(status: int, url: str, body: object = None) -> sushy_exc.HTTPError:
    """The sushy HTTPError for a reply to a GET of ``url``."""
    resp = response(status, body)
    resp.request = requests.Request("GET", url).prepare()
    resp.url = url
    with pytest.raises(sushy_exc.HTTPError) as info:
        sushy_exc.raise_for_response("GET", url, resp)
    info.value.response = resp
    return info.value


MANAGER = "https://10.0.0.9/redfish/v1/Managers/e7000927-1528-5935-b1f2-9601c5b1b830"
#: what hwlab's sushy-tools answers for a Manager it links but does not serve (issue 36)
NOT_FOUND = {
    "error": {
        "code": "Base.1.0.GeneralError",
        "message": "Manager with UUID e7000927-1528-5935-b1f2-9601c5b1b830 was not found",
    }
}


@pytest.mark.parametrize(
    "url",
    [
        MANAGER,  # Links.ManagedBy of the system
        "https://10.0.0.9/redfish/v1/Managers/1/VirtualMedia",  # the Manager's collection
        "https://10.0.0.9/redfish/v1/Managers/1/VirtualMedia/Cd",  # a slot
        "https://10.0.0.9/redfish/v1/Systems/2",  # another system than the configured one
    ],
)
def test_404_on_a_linked_resource_is_unsupported_never_the_nodes_fault(build, url: str) -> None:
    """A 404 on something the service linked is a well-formed answer ("not
    here"), not a malformed reply: the service cannot serve it. Asking again
    never helps and it says nothing about the node -- not counted, not fenced."""
    fault = mapped(http_error_at(404, url, NOT_FOUND), build)
    assert isinstance(fault, UnsupportedOperation)
    assert not isinstance(fault, BMCProtocolError)
    path = url.removeprefix("https://10.0.0.9")
    assert f"the service links {path} but does not serve it" in str(fault)
    assert fault.status == "404"
    assert fault.node == "r1-n09"
    row = policy_for(fault)
    assert (row.counts_for_health, row.fences) == (False, False)
    assert row.fleet is FleetOutcome.UNSUPPORTED


def test_404_on_the_service_root_is_still_a_protocol_error(build) -> None:
    """The root is the one path asked for without a link: a 404 there means
    no Redfish service at the address."""
    fault = mapped(http_error_at(404, "https://10.0.0.9/redfish/v1/"), build)
    assert isinstance(fault, BMCProtocolError)


def test_404_elsewhere_names_the_path_even_without_the_response(build) -> None:
    """sushy's HTTPError without our connector's response: the path comes
    from the message (``GET https://.../redfish/v1/... failed``)."""
    exc = http_error_at(404, MANAGER, NOT_FOUND)
    exc.response = None
    fault = mapped(exc, build)
    assert isinstance(fault, UnsupportedOperation)
    assert "/redfish/v1/Managers/e7000927" in str(fault)


# -- MessageIds and vendor quirks ---------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "message_id", "cls"),
    [
        (400, "IDRAC.2.8.SYS518", BMCBusy),
        (400, "iLO.2.14.InvalidOperationForSystemState", BMCBusy),
        (500, "iLO.2.14.InvalidOperationForSystemState", BMCBusy),
        (400, "Base.1.8.ActionParameterValueNotInList", UnsupportedOperation),
        (400, "Base.1.8.PropertyValueNotInList", UnsupportedOperation),
        (503, "Base.1.8.SessionLimitExceeded", BMCBusy),
        (403, "Base.1.8.InsufficientPrivilege", BMCAuthError),
        (400, "IDRAC.2.9.RAC0904", BMCBusy),  # virtual media in use
        (500, "IDRAC.2.9.VRM0021", BMCBusy),
        (400, "Base.1.8.MalformedJSON", UnclassifiedFault),
        # a write the service calls wrong is not the node's fault (issue 47)
        (400, "Base.1.16.PropertyUnknown", UnsupportedOperation),
        (400, "Base.1.16.PropertyNotWritable", UnsupportedOperation),
        (400, "Base.1.16.PropertyValueTypeError", UnsupportedOperation),
        (400, "Base.1.16.OperationNotAllowed", UnsupportedOperation),
        (405, "Base.1.16.OperationNotAllowed", UnsupportedOperation),
        # the one free-form value bmaas sends is its user's image URL
        (400, "Base.1.16.PropertyValueFormatError", InputError),
        (400, "Base.1.16.ActionParameterValueFormatError", InputError),
        # the hardware's life cycle (issue 51): DMTF Update registry 1.3.0
        (503, "Update.1.3.UpdateInProgress", BMCUpdating),
        (400, "Update.1.3.VerificationFailed", RequestRejected),
        (400, "Update.1.3.UpdateNotApplicable", RequestRejected),
    ],
)
def test_message_rules_decide_before_the_status(build, status, message_id, cls) -> None:
    fault = mapped(http_error(status, redfish_error(message_id)), build)
    assert type(fault) is cls


def test_every_message_rule_has_a_note() -> None:
    assert all(rule.note for rule in MESSAGE_RULES)


# -- sushy's own errors ----------------------------------------------------------------


def test_missing_action_and_disallowed_values_are_unsupported(build) -> None:
    missing = sushy_exc.MissingActionError(action="#ComputerSystem.Reset", resource=SYSTEM)
    value = sushy_exc.InvalidParameterValueError(
        parameter="ResetType", value="GracefulShutdown", valid_values="On, ForceOff"
    )
    assert isinstance(mapped(missing, build), UnsupportedOperation)
    assert isinstance(mapped(value, build), UnsupportedOperation)


def test_missing_attribute_and_token_are_protocol_errors(build) -> None:
    attr = sushy_exc.MissingAttributeError(attribute="Id", resource=SYSTEM)
    assert isinstance(mapped(attr, build), BMCProtocolError)
    token = sushy_exc.MissingXAuthToken("POST", URL, response(201, {}))
    assert isinstance(mapped(token, build), BMCProtocolError)


def test_no_single_system_is_an_input_error(build) -> None:
    exc = sushy_exc.UnknownDefaultError(entity="ComputerSystem", error="2 systems")
    fault = mapped(exc, build)
    assert isinstance(fault, InputError)
    assert fault.field == "driver_info.redfish_system_id"


def test_anything_else_is_unclassified_and_honest(build) -> None:
    fault = mapped(KeyError("Members"), build)
    assert isinstance(fault, UnclassifiedFault)
    assert "KeyError" in fault.message


def test_bmaas_errors_pass_through(build) -> None:
    original = build(BMCBusy, "already mapped")
    assert mapped(original, build) is original


def _ssl_error(reason: str) -> ssl.SSLError:
    exc = ssl.SSLError(1, f"[SSL: {reason}] {reason.lower()}")
    exc.reason = reason
    return exc


@pytest.mark.parametrize(
    ("inner", "field", "words"),
    [
        (
            ssl.SSLCertVerificationError(1, "certificate verify failed"),
            "driver_info.redfish_verify_ca",
            "certificate does not verify",
        ),
        (
            _ssl_error("TLSV1_ALERT_PROTOCOL_VERSION"),
            "driver_info.redfish_tls_min_version",
            "offers no TLS version bmaas accepts",
        ),
        (
            _ssl_error("UNSUPPORTED_PROTOCOL"),
            "driver_info.redfish_tls_min_version",
            "offers no TLS version bmaas accepts",
        ),
        (
            _ssl_error("SSLV3_ALERT_HANDSHAKE_FAILURE"),
            "driver_info.redfish_tls_ciphers",
            "share no TLS cipher",
        ),
    ],
    ids=["certificate", "version-alert", "unsupported-protocol", "no-cipher"],
)
def test_tls_configuration_problems_are_input_errors_naming_the_setting(
    build, inner: Exception, field: str, words: str
) -> None:
    """Issue 36: a certificate that does not verify, or a handshake with no
    version or cipher in common, is the node's configuration: never retried,
    never counted against the hardware (InputError's row), with the setting."""
    outer = requests.exceptions.SSLError(u3.MaxRetryError(None, URL, u3.SSLError(inner)))
    fault = mapped(via_sushy(outer), build)
    assert type(fault) is InputError
    assert (fault.field, fault.node) == (field, "r1-n09")
    assert words in fault.message


# -- a plain-text error body (sushy-tools' UEFI HTTP boot answers, issue 48) ----------------------


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        (b"Failed to save HttpBootUri field value.", UnsupportedOperation),
        (b"Failed to set the supplied media as the next bootdevice.", UnsupportedOperation),
        (b"Failed to download and attach HttpBootUri.", InputError),
    ],
)
def test_a_plain_text_answer_is_typed_by_its_words(build, text: bytes, cls: type) -> None:
    fault = mapped(http_error(400, text), build)
    assert type(fault) is cls
    assert text.decode().rstrip(".") in str(fault)
    assert "[Failed" not in str(fault)  # quoted once, not again as the rule's text


def test_a_plain_text_answer_no_rule_names_is_quoted_on_one_line_and_bounded(build) -> None:
    fault = mapped(http_error(400, b"some\n  other  words" + b"x" * 400), build)
    assert isinstance(fault, UnclassifiedFault)
    assert "HTTP 400: some other words" in fault.message
    assert "\n" not in fault.message
    assert len(fault.message) < 260


def test_a_json_answer_is_never_quoted_raw(build) -> None:
    fault = mapped(http_error(400, {"unexpected": "shape"}), build)
    assert "unexpected" not in str(fault)
