"""The hot Redfish read, lean: a few fields of one resource, one GET, little parsing.

A power-state sync reads every node every pass, and through sushy a read is
sushy's ``Connector._op`` (header merging, debug formatting, its retry loop),
``requests.Session.request`` (a fresh ``PreparedRequest``: URL parsing, cookie
and environment merging, hooks) and then the whole ``ComputerSystem`` parsed
into a dict. Measured on hwlab: over half of a pooled read's client CPU, none
of it needed to learn one field. :class:`LeanReader` does the same GET with:

* a ``PreparedRequest`` built once per URL (and auth header) and copied per
  read, sent straight to the connector's :class:`~drivers.redfish.transport.DeadlineAdapter`
  -- so the read still ends by the call's total deadline and its body cap;
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
  socket per service is kept (see :class:`~drivers.redfish.driver.RedfishDriver`).

Failures leave exactly as through sushy, so the one mapping in
:mod:`drivers.redfish.faults` sees what it always saw: a transport error
becomes ``sushy.exceptions.ConnectionError`` from the ``requests`` error, an
HTTP error status goes through ``sushy.exceptions.raise_for_response``, the
deadline and the body cap raise their own. A 401/403 with a session logs in
again and sends the GET once more through sushy, as sushy does on any
request (with basic auth it is final).
Cookies are not sent (BMCs authenticate by token or basic auth).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin

import requests
import sushy.exceptions as sushy_exc

from bmaas.deadline import Deadline
from drivers.redfish.transport import ExchangeDeadline

__all__ = ["LeanReader"]

#: how the lean GET asks for a subset of a resource (Redfish spec, DSP0266 7.3)
SELECT = "$select"
_SELECT_REFUSED = (400, 501)


class LeanReader:
    """Reads a few top-level fields of a resource for one connector.

    ``session`` is the connector's ``requests`` session (its adapter, auth
    and default headers), ``base`` the service URL, ``after_denial`` what the
    connector does on a 401/403 (sushy's re-login and one more GET, or the
    error itself with basic auth). Safe to share between
    threads: the caches are replaced, never mutated in place, under a lock.
    """

    def __init__(
        self,
        session: requests.Session,
        base: str,
        *,
        verify: bool | str,
        after_denial: Callable[[str, sushy_exc.AccessError], requests.Response],
        on_response: Callable[[requests.Response], None] | None = None,
    ) -> None:
        self._session = session
        self._base = base
        self._verify = verify
        self._after_denial = after_denial
        self._on_response = on_response
        self._lock = threading.Lock()
        self._prepared: dict[tuple[str, str | None, int, bool], requests.PreparedRequest] = {}
        #: path -> (ETag, the fields read with it)
        self._etags: dict[str, tuple[str, dict[str, Any]]] = {}
        #: the service advertised $select and has not refused it
        self.select = False
        #: keep the HTTP connection open after the read
        self.keep_alive = False
        #: requests sent, and answers served from the ETag cache (for tests and benches)
        self.sent = 0
        self.not_modified = 0

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
        (absent ones are left out), by ``deadline``."""
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
        url = urljoin(self._base, path)
        if selected:
            url = f"{url}?{SELECT}={','.join(fields)}"
        cached = self._etags.get(path)
        request = self._request(url).copy()
        request.headers.update(headers)
        if cached is not None:
            request.headers["If-None-Match"] = cached[0]
        if pace is not None:
            pace(deadline)
        self.sent += 1
        adapter = self._session.get_adapter(url)
        try:
            response = adapter.send(
                request,
                timeout=ExchangeDeadline(deadline),  # type: ignore[arg-type]  # DeadlineAdapter reads it
                verify=self._verify,
            )
        except requests.RequestException as exc:
            raise sushy_exc.ConnectionError(url=url, error=exc) from exc
        if self._on_response is not None:
            self._on_response(response)
        status = response.status_code
        if status == 304 and cached is not None:
            self.not_modified += 1
            return cached[1]
        if selected and status in _SELECT_REFUSED:
            return None
        try:
            sushy_exc.raise_for_response("GET", url, response)
        except sushy_exc.AccessError as exc:
            exc.response = response
            response = self._after_denial(path, exc)  # sushy's: log in again, send once more
        except sushy_exc.HTTPError as exc:
            exc.response = response  # as the connector does: for its headers and URL
            raise
        body = json.loads(response.content)  # not JSON: ValueError, mapped at the edge
        if not isinstance(body, dict):
            raise ValueError(f"GET {path}: the answer is not a JSON object")
        found = {name: body[name] for name in fields if name in body}
        if selected and len(found) < len(fields):
            return None  # $select honoured wrongly: read the whole resource
        etag = response.headers.get("ETag")
        with self._lock:
            etags = dict(self._etags)
            if etag:
                etags[path] = (etag, found)
            else:
                etags.pop(path, None)
            self._etags = etags
        return found

    def _request(self, url: str) -> requests.PreparedRequest:
        """The prepared GET of ``url`` with the session's headers and auth
        (built once per URL and auth token; copied by the caller)."""
        session = self._session
        token = session.headers.get("X-Auth-Token")
        key = (url, token if isinstance(token, str) else None, id(session.auth), self.keep_alive)
        prepared = self._prepared.get(key)
        if prepared is None:
            # sushy's per-request defaults too: identity encoding keeps ETags strong
            headers = {**session.headers, "OData-Version": "4.0", "Accept-Encoding": "identity"}
            if self.keep_alive:
                headers.pop("Connection", None)
            prepared = requests.PreparedRequest()
            prepared.prepare(method="GET", url=url, headers=headers, auth=session.auth)
            with self._lock:
                cache = {k: v for k, v in self._prepared.items() if k[0] != url}
                cache[key] = prepared
                self._prepared = cache
        return prepared
