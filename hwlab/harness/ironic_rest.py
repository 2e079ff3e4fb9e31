"""Ironic's REST API, bare, for enrolling and watching thousands of nodes.

openstacksdk is what the tests and the retry library use against Ironic;
for 10,000 nodes its per-call cost (resource objects, microversion
negotiation, a ``wait`` that polls each node on its own) is the client's
bottleneck on a 2-core machine shared with the conductor. Here: one
``requests`` session per thread, a JSON body, the API version in a header,
and one paginated list to learn every node's state at once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import requests

from bmaas.hwlab.harness.ironic import IronicError

__all__ = ["IronicRest"]

#: node history and everything the benches read are in this version
API_VERSION = "1.78"
#: seconds one API call may take before the bench calls Ironic silent
CALL_TIMEOUT = 60.0
#: seconds a call is retried for (503, and a GET that timed out)
RETRY_FOR = 120.0
#: Ironic's default [api]max_limit: the longest page a list returns
PAGE = 1000


class IronicRest:
    """A thin client of one Ironic's ``/v1`` API (thread-safe: a session per thread)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._local = threading.local()

    def _session(self) -> requests.Session:
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.headers["X-OpenStack-Ironic-API-Version"] = API_VERSION
            self._local.session = session
        return session

    def call(self, method: str, path: str, body: Any = None) -> requests.Response:
        """One call. 503 (no free conductor worker) is retried for up to a
        minute, and so is a GET that timed out or lost its connection (a
        loaded 2-core box: SQLite serialises the API's writes behind the
        conductor's); anything else that is not 2xx raises :class:`IronicError`."""
        end = time.monotonic() + RETRY_FOR
        pause = 0.2
        while True:
            try:
                answer = self._session().request(
                    method, f"{self.url}/v1{path}", json=body, timeout=CALL_TIMEOUT
                )
            except (requests.Timeout, requests.ConnectionError) as exc:
                if method != "GET" or time.monotonic() + pause > end:
                    raise IronicError(f"{method} {path}: {exc}") from exc
            else:
                if answer.status_code != 503 or time.monotonic() + pause > end:
                    break
            time.sleep(pause)
            pause = min(2.0, pause * 2)
        if not answer.ok:
            raise IronicError(f"{method} {path}: HTTP {answer.status_code}: {answer.text[:300]}")
        return answer

    def create_node(self, **fields: Any) -> str:
        """A new node (named: a create that timed out is looked up by its
        name before it is tried again, so none is made twice); its UUID."""
        name = fields["name"]
        for _ in range(3):
            try:
                return str(self.call("POST", "/nodes", fields).json()["uuid"])
            except IronicError:
                with contextlib.suppress(IronicError):  # not there: create it again
                    return str(self.node(name)["uuid"])
        raise IronicError(f"could not create node {name}")

    def provision(self, node: str, target: str) -> None:
        """Ask for a provision state change (``manage``, ``provide``); returns at once."""
        self.call("PUT", f"/nodes/{node}/states/provision", {"target": target})

    def node(self, node: str, fields: tuple[str, ...] = ()) -> dict[str, Any]:
        """One node (only ``fields`` when given)."""
        query = f"?fields={','.join(fields)}" if fields else ""
        return dict(self.call("GET", f"/nodes/{node}{query}").json())

    def nodes(
        self, fields: tuple[str, ...], *, maintenance: bool | None = None
    ) -> Iterator[Mapping[str, Any]]:
        """Every node (or those in or out of ``maintenance``: Ironic filters),
        page by page, with ``fields`` (``uuid`` always included)."""
        wanted = ",".join(dict.fromkeys(("uuid", *fields)))
        only = "" if maintenance is None else f"&maintenance={str(maintenance).lower()}"
        marker = None
        while True:
            path = f"/nodes?fields={wanted}&limit={PAGE}{only}"
            if marker:
                path += f"&marker={marker}"
            page = self.call("GET", path).json().get("nodes", [])
            yield from page
            if len(page) < PAGE:
                return
            marker = page[-1]["uuid"]
