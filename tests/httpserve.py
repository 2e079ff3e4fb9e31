"""A handler class served on 127.0.0.1 (a free port) for one test's span.

The small stateful Redfish fakes of the tests (recorded vendor trees, the
lean read's fake) are ``BaseHTTPRequestHandler`` classes; this is the one way
they are served and stopped.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def send_json(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: Any | None,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Answer ``status`` with ``body`` as JSON (None: no body) and
    ``headers``. A request that asked ``Connection: close`` is told so and the
    connection closed: a client that is not told may put the socket back in
    its pool and find it dead."""
    data = b"" if body is None else json.dumps(body).encode()
    handler.send_response(status)
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    if body is not None:
        handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    if handler.headers.get("Connection", "").lower() == "close":
        handler.send_header("Connection", "close")
        handler.close_connection = True
    handler.end_headers()
    handler.wfile.write(data)


def ironic_versions(host: str) -> dict[str, Any]:
    """Ironic's version document (``GET /``) for a stand-in API at ``host``:
    what openstacksdk reads before its first baremetal call."""
    v1 = {
        "id": "v1",
        "links": [{"href": f"http://{host}/v1/", "rel": "self"}],
        "status": "CURRENT",
        "min_version": "1.1",
        "version": "1.99",
    }
    return {"versions": [v1], "default_version": v1}


@contextlib.contextmanager
def serving_handler(
    handler: type[BaseHTTPRequestHandler], *, before_stop: Callable[[], None] | None = None
) -> Iterator[str]:
    """Serve ``handler`` until the block ends; yields the base URL.
    ``before_stop`` runs first on the way out (e.g. to release a request the
    fake holds hanging, so the shutdown does not wait for it)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        if before_stop is not None:
            before_stop()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
