"""The hot Redfish read, lean: a few fields of one resource, one GET, little parsing.

A power-state sync reads every node every pass, and through sushy a read is
sushy's ``Connector._op`` (header merging, debug formatting, its retry loop),
``requests.Session.request`` (a fresh ``PreparedRequest``: URL parsing, cookie
and environment merging, hooks) and then the whole ``ComputerSystem`` parsed
into a dict. Measured on hwlab: over half of a pooled read's client CPU, none
of it needed to learn one field. :class:`LeanReader` does the same GET with:

* its own HTTP/1.1 (:mod:`bmaas.drivers.redfish.wire`): the request's bytes built
  once per URL (and auth header), one ``sendall`` on a kept socket, the
  answer's status line and headers split by hand -- requests, urllib3 and
  ``http.client``'s email-parser headers were three quarters of a read's
  CPU. The read still ends by the call's total deadline and its body cap,
  and is one attempt (a reused socket the server had closed is the one
  exception: the GET is sent again on a new connection, same deadline);
* the BMC's gate (``pace``) taken first, as every request of the connector;
* ``$select=<fields>`` when the service root advertises
  ``ProtocolFeaturesSupported.SelectQuery`` (a small body to parse); a service
  that then answers 400/501 or leaves the fields out is marked as not
  supporting it and the read is sent once more without it, within the same
  deadline (once per service: the flag sticks);
* ``If-None-Match`` with the resource's last ``ETag`` when the service sent
  one: a ``304 Not Modified`` answers from the fields kept with that ETag;
* a kept HTTP connection (no ``Connection: close``) when ``keep_alive`` is
  set -- the driver sets it while the process holds few services, since one
  socket per service is kept (see :class:`~bmaas.drivers.redfish.driver.RedfishDriver`)
  -- and the service's reads come often: a read within
  :data:`~bmaas.drivers.redfish.wire.KEEP_FOR` seconds of the last keeps its
  socket, and a kept socket idle that long is closed
  (:class:`~bmaas.drivers.redfish.wire.KeptConnections`).

Failures leave as through sushy, so the one mapping in
:mod:`bmaas.drivers.redfish.faults` sees what it always saw: a transport error
becomes ``sushy.exceptions.ConnectionError`` from the socket, TLS or
``http.client`` error, an HTTP error status goes through
``sushy.exceptions.raise_for_response`` with a ``requests.Response`` built
for it (only then: headers for Retry-After, the request for its path), the
deadline and the body cap raise their own. A 401/403 with a session logs in
again and sends the GET once more through sushy, as sushy does on any
request (with basic auth it is final).
Cookies are not sent (BMCs authenticate by token or basic auth).
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin

import requests
import sushy.exceptions as sushy_exc
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers

from bmaas.deadline import Deadline
from bmaas.driver_info import DEFAULT_MAX_BODY_BYTES
from bmaas.drivers.redfish.faults import ConnectFailed
from bmaas.drivers.redfish.framing import loads_bounded
from bmaas.drivers.redfish.wire import (
    Answer,
    KeptConnections,
    StaleConnection,
    Target,
    header_bytes,
)
from bmaas.tlspolicy import TLSPolicy

__all__ = ["LeanReader"]

#: how the lean GET asks for a subset of a resource (Redfish spec, DSP0266 7.3)
SELECT = "$select"
_SELECT_REFUSED = (400, 501)
#: never sent in a header (they would end it, or start another)
_ILLEGAL = ("\r", "\n", "\0")


class _Prepared:
    """A GET of one URL, ready to send: its head's bytes (request line, Host,
    the session's headers and auth; no repr: they hold credentials) and the
    ``PreparedRequest`` an error answer's ``Response`` points to."""

    __slots__ = ("head", "request", "url", "what")

    def __init__(self, url: str, head: bytes, request: requests.PreparedRequest) -> None:
        self.url = url
        self.head = head
        self.request = request
        #: the request in messages: method and path, never a header
        self.what = f"GET {request.path_url}"


class LeanReader:
    """Reads a few top-level fields of a resource for one connector.

    ``session`` is the connector's ``requests`` session (its auth and default
    headers), ``base`` the service URL, ``verify`` its TLS setting,
    ``max_body`` the body cap, ``after_denial`` what the connector does on a
    401/403 (sushy's re-login and one more GET, or the error itself with
    basic auth). Safe to share between threads: the caches are replaced,
    never mutated in place, under a lock.
    """

    def __init__(
        self,
        session: requests.Session,
        base: str,
        *,
        verify: bool | str,
        after_denial: Callable[[str, sushy_exc.AccessError], requests.Response],
        max_body: int = DEFAULT_MAX_BODY_BYTES,
        tls: TLSPolicy | None = None,
    ) -> None:
        self._session = session
        self._base = base
        self._verify = verify
        self._tls = tls
        self._after_denial = after_denial
        self._max_body = max_body
        self._lock = threading.Lock()
        self._wire: KeptConnections | None = None
        self._prepared: dict[tuple[str, str | None, int, bool], _Prepared] = {}
        #: path -> (ETag, the fields read with it)
        self._etags: dict[str, tuple[str, dict[str, Any]]] = {}
        #: the service advertised $select and has not refused it
        self.select = False
        #: keep the HTTP connection open after the read
        self.keep_alive = False
        #: requests sent, and answers served from the ETag cache (for tests and benches)
        self.sent = 0
        self.not_modified = 0

    def close(self) -> None:
        """Close the kept connections (the connector is closing)."""
        if self._wire is not None:
            self._wire.close()

    def read(
        self,
        path: str,
        fields: tuple[str, ...],
        deadline: Deadline,
        *,
        headers: dict[str, str],
        pace: Callable[[Deadline], None] | None,
    ) -> dict[str, Any]:
        """The ``fields`` of the resource at ``path`` present in its answer
        (absent ones are left out; the first is the one the read is for), by
        ``deadline``."""
        selected = self.select
        result = self._get(path, fields, deadline, headers, pace, selected=selected)
        if result is None:  # $select refused or ignored: never again on this service
            self.select = False
            result = self._get(path, fields, deadline, headers, pace, selected=False)
            assert result is not None
        return result

    def _get(
        self,
        path: str,
        fields: tuple[str, ...],
        deadline: Deadline,
        headers: dict[str, str],
        pace: Callable[[Deadline], None] | None,
        *,
        selected: bool,
    ) -> dict[str, Any] | None:
        target = f"{path}?{SELECT}={','.join(fields)}" if selected else path
        keep = self.keep_alive and self._connections().keeps()
        prepared = self._prepare(target, keep)
        cached = self._etags.get(path)
        extra = [*headers.items(), ("If-None-Match", cached[0])] if cached else headers.items()
        request = prepared.head + header_bytes(extra) + b"\r\n"
        answer = self._send(request, prepared, deadline, pace, keep=keep)
        status = answer.status
        if status == 304 and cached is not None:
            self.not_modified += 1
            return cached[1]
        if selected and status in _SELECT_REFUSED:
            return None
        content, etag = answer.body, answer.headers.get("etag")
        if status >= 400:
            response = _response(answer, prepared)
            try:
                sushy_exc.raise_for_response("GET", prepared.url, response)
            except sushy_exc.AccessError as exc:
                exc.response = response
                response = self._after_denial(path, exc)  # sushy's: log in again, send once more
                content, etag = response.content, response.headers.get("ETag")
            except sushy_exc.HTTPError as exc:
                exc.response = response  # as the connector does: for its headers and URL
                raise
        # not JSON, or nested past framing.MAX_DEPTH: ValueError, mapped at the
        # edge (a 200,000-deep answer would raise RecursionError in json.loads)
        body = loads_bounded(content, limit=self._max_body)
        if not isinstance(body, dict):
            raise ValueError(f"GET {path}: the answer is not a JSON object")
        found = {name: body[name] for name in fields if name in body}
        if selected and fields[0] not in found:
            # $select honoured wrongly: read the whole resource. Only the first
            # field must be there (the one the read is for: PowerState); the
            # rest may be absent from the resource itself (a system without Status)
            return None
        self._keep_etag(path, etag, found)
        return found

    def _send(
        self,
        request: bytes,
        prepared: _Prepared,
        deadline: Deadline,
        pace: Callable[[Deadline], None] | None,
        *,
        keep: bool,
    ) -> Answer:
        """One GET through the gate; once more on a new connection if the
        kept one turns out closed by the server (nothing came back).
        ``keep``: the request asks to keep its socket."""
        wire, url, what = self._connections(), prepared.url, prepared.what
        for fresh in (False, True):
            if pace is not None:
                pace(deadline)
            self.sent += 1
            try:
                return wire.get(
                    request,
                    deadline,
                    what=what,
                    max_body=self._max_body,
                    keep=keep,
                    fresh=fresh,
                )
            except StaleConnection:
                continue
            except (OSError, http.client.HTTPException, ConnectFailed) as exc:
                raise sushy_exc.ConnectionError(url=url, error=exc) from exc
        closed = http.client.RemoteDisconnected(f"{what}: closed without an answer")
        raise sushy_exc.ConnectionError(url=url, error=closed) from closed

    def _connections(self) -> KeptConnections:
        wire = self._wire
        if wire is None:
            with self._lock:
                if self._wire is None:
                    self._wire = KeptConnections(
                        Target.of(self._base, verify=self._verify, tls=self._tls)
                    )
                wire = self._wire
        return wire

    def _keep_etag(self, path: str, etag: str | None, found: dict[str, Any]) -> None:
        if not etag and path not in self._etags:
            return  # nothing kept, nothing to keep: the common case, no copy
        with self._lock:
            etags = dict(self._etags)
            if etag and not any(c in etag for c in _ILLEGAL):
                etags[path] = (etag, found)
            else:
                etags.pop(path, None)
            self._etags = etags

    def _prepare(self, target: str, keep: bool) -> _Prepared:
        """The GET of ``target`` with the session's headers and auth (built
        once per target, auth token and ``keep``: whether it asks to keep
        the connection)."""
        session = self._session
        token = session.headers.get("X-Auth-Token")
        key = (target, token if isinstance(token, str) else None, id(session.auth), keep)
        prepared = self._prepared.get(key)
        if prepared is not None:
            return prepared
        url = urljoin(self._base, target)
        # sushy's per-request defaults too: identity encoding keeps ETags strong
        headers = {**session.headers, "OData-Version": "4.0", "Accept-Encoding": "identity"}
        if keep:
            headers.pop("Connection", None)  # HTTP/1.1's default: kept
        else:
            headers["Connection"] = "close"  # the socket is closed after the answer
        request = requests.PreparedRequest()
        request.prepare(method="GET", url=url, headers=headers, auth=session.auth)
        if any(c in request.path_url for c in (*_ILLEGAL, " ")):
            raise ValueError("the resource path is not a valid request target")
        authority = self._connections().target.authority
        line = f"GET {request.path_url} HTTP/1.1\r\nHost: {authority}\r\n"
        head = line.encode("latin-1") + header_bytes(request.headers.items())
        prepared = _Prepared(url, head, request)
        with self._lock:
            # one per target and keep (a read asks for a close after a long gap)
            cache = {k: v for k, v in self._prepared.items() if (k[0], k[3]) != (target, keep)}
            cache[key] = prepared
            self._prepared = cache
        return prepared


def _response(answer: Answer, prepared: _Prepared) -> requests.Response:
    """The ``requests.Response`` sushy's error classes and the fault mapping
    read (status, JSON body, headers, the request's path): error answers only."""
    response = requests.Response()
    response.status_code = answer.status
    response.reason = answer.reason
    response.headers = CaseInsensitiveDict(answer.headers)
    response._content = answer.body
    response._content_consumed = True
    response.encoding = get_encoding_from_headers(response.headers)
    response.url = prepared.url
    response.request = prepared.request
    return response
