"""A handler class served on 127.0.0.1 (a free port) for one test's span.

The small stateful Redfish fakes of the tests (recorded vendor trees, the
lean read's fake) are ``BaseHTTPRequestHandler`` classes; this is the one way
they are served and stopped.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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
