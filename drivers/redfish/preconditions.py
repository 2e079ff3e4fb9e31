"""Reads that keep the resource's ETag, and PATCHes that honour it.

HPE iLO, Supermicro X13/H13 and Dell virtual media carry ``@odata.etag``;
some services also send an ``ETag`` header, a few only one of the two. A
PATCH sends ``If-Match`` with the ETag of the read it is based on, and
a ``412 Precondition Failed`` (written meanwhile) or ``428 Precondition
Required`` (no ETag we sent) gets one fresh read and one more PATCH with its
ETag, within the call's deadline; a second 412 is ``BMCBusy``, a second 428
``UnsupportedOperation`` (the details: docs/vendors.md's quirk table).
Neither counts against the node (the policy rows of ``BMCBusy`` and
``UnsupportedOperation``): a resource written by someone else, or an ETag
rule, says nothing about the hardware.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import sushy.exceptions as sushy_exc

from bmaas.drivers.redfish.connector import BoundedConnector

__all__ = ["RESEND_ONCE", "Resource", "patch", "read"]

#: statuses after which a PATCH is re-read and sent once more
RESEND_ONCE: frozenset[int] = frozenset({412, 428})


@dataclasses.dataclass(frozen=True)
class Resource:
    """A resource as one GET returned it."""

    path: str
    body: dict[str, Any]
    #: the ``ETag`` header, else the body's ``@odata.etag``
    etag: str | None = None


def read(conn: BoundedConnector, path: str) -> Resource:
    """GET ``path``: its JSON body and ETag (one request)."""
    response = conn.get(path)
    body = response.json()
    if not isinstance(body, dict):
        raise sushy_exc.MalformedAttributeError(
            attribute="body", resource=path, error="not a JSON object"
        )
    etag = response.headers.get("ETag") or body.get("@odata.etag")
    return Resource(path, body, etag if isinstance(etag, str) and etag else None)


def patch(conn: BoundedConnector, resource: Resource, data: dict[str, Any]) -> None:
    """PATCH ``data`` onto ``resource`` (as read), with ``If-Match`` when it
    has an ETag; on 412/428 one fresh read and one more PATCH."""
    try:
        _send(conn, resource, data)
    except sushy_exc.HTTPError as exc:
        if exc.status_code not in RESEND_ONCE:
            raise
        fresh = read(conn, resource.path)
        if exc.status_code == 412 and fresh.etag == resource.etag and fresh.etag:
            # Nothing changed, yet 412: RFC 9110's If-Match compares strongly
            # and a weak ETag never matches. sushy's lore has such BMCs
            # (Connector._etag_handler): send it strong.
            fresh = dataclasses.replace(fresh, etag=_strong(fresh.etag))
        if exc.status_code == 428 and fresh.etag is None:
            # no ETag to be had on a read: "*" matches the current
            # representation, whatever it is (RFC 9110 13.1.1)
            fresh = dataclasses.replace(fresh, etag="*")
        _send(conn, fresh, data)


def _strong(etag: str) -> str:
    return etag[2:] if etag.startswith("W/") else etag


def _send(conn: BoundedConnector, resource: Resource, data: dict[str, Any]) -> None:
    headers = {"If-Match": resource.etag} if resource.etag else None
    conn.patch(resource.path, data=data, headers=headers)
