"""Which operation an HTTP request is, and what the BMC-layer effects answer.

Every request is evaluated against the machine's fault plan as one
:class:`~bmaas.driver.Operation`, found by method and path in
:data:`hwlab.operations.REDFISH_ROUTES` (shared with the fault proxy):

============================================  ==================================
request                                       operation
============================================  ==================================
POST/DELETE SessionService/Sessions[/<id>]    ``login``
POST .../Actions/ComputerSystem.Reset         ``power.set``
PATCH /redfish/v1/Systems/<id>                ``boot.set``
POST .../VirtualMedia.InsertMedia|EjectMedia  ``vmedia.insert`` / ``vmedia.eject``
GET /redfish/v1/Systems/<id>                  ``power.get`` (unless named, below)
GET .../Processors, .../Memory                ``inventory.get``
any other request                             ``probe``
============================================  ==================================

One GET of the ComputerSystem serves power state, boot override, inventory and
boot progress alike, so the server cannot tell them apart. A client may name
the read in the ``X-Bmaas-Operation`` header (bmaas's Redfish driver does);
only read operations are honoured there, so a header can never make a GET
draw a hardware effect meant for a power or boot change.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from bmaas.driver import Operation
from hwlab.operations import redfish_operation
from hwlab.redfish.app import error_body
from hwlab.redfish.minihttp import Response

__all__ = ["OPERATION_HEADER", "READ_OPERATIONS", "operation_for"]

OPERATION_HEADER = "x-bmaas-operation"
READ_OPERATIONS = frozenset(
    {
        Operation.PROBE,
        Operation.POWER_GET,
        Operation.BOOT_GET,
        Operation.INVENTORY_GET,
        Operation.BOOT_PROGRESS_GET,
    }
)

#: requests answered without credentials, as real BMCs do (path without trailing /)
PUBLIC = frozenset(
    {
        ("GET", "/redfish"),
        ("GET", "/redfish/v1"),
        ("POST", "/redfish/v1/SessionService/Sessions"),
    }
)


def operation_for(method: str, path: str, named: str | None = None) -> Operation:
    """The operation a request is evaluated as (see the module docstring)."""
    if method == "GET" and named in READ_OPERATIONS:
        return Operation(named)
    return redfish_operation(method, path) or Operation.PROBE


def _json(status: int, payload: Mapping[str, Any], *extra: tuple[str, str]) -> Response:
    body = json.dumps(payload).encode()
    headers = [("Content-Type", "application/json"), ("OData-Version", "4.0"), *extra]
    return Response(status, headers, body)


def busy(retry_after: float | None) -> Response:
    extra = [("Retry-After", str(math.ceil(retry_after)))] if retry_after is not None else []
    body = error_body("Base.1.8.ServiceTemporarilyUnavailable", "the service is busy, try later")
    return _json(503, body, *extra)


def internal_error(message_id: str) -> Response:
    return _json(500, error_body(message_id, "the BMC failed to carry out the request"))


def unauthorized(message_id: str, message: str) -> Response:
    return _json(
        401, error_body(message_id, message), ("WWW-Authenticate", 'Basic realm="hwlab BMC"')
    )


def unsupported(method: str) -> Response:
    """405 for a change the resource does not allow, 501 for a read the BMC lacks."""
    if method == "GET":
        return _json(501, error_body("Base.1.8.ActionNotSupported", "not implemented"))
    return _json(
        405,
        error_body("Base.1.8.OperationNotAllowed", f"{method} is not allowed here"),
        ("Allow", "GET"),
    )


def bad_request(status: int, message: str) -> Response:
    return _json(status, error_body("Base.1.8.MalformedJSON", message))


def truncated(response: Response) -> Response:
    """The same answer with its JSON body cut in half: a BMC that emits broken JSON."""
    cut = response.body[: max(1, len(response.body) // 2)]
    return Response(response.status, response.headers, cut)


#: a reply that is not HTTP at all (the status code is not a number)
GARBLED_REPLY = b'HTTP/1.1 2OO Ok\r\nContent-Type: application/json\r\n\r\n{"PowerSt'
