"""What pyghmi's process-wide client state looked like when an IPMI test
failed for silence: read the next time a login gets no answer in CI.

CI at 9587f02 saw three IPMI tests in a row on one worker get no answer to
their logins (an in-process BMC, a proxied one and a lab in a process of its
own), while the tests that worker ran later passed: the client side went
deaf for a while. The report a failed test gets names where pyghmi's one IO
thread was and the state of its sockets, so the next occurrence says why.
"""

from __future__ import annotations

import sys
import traceback

from pyghmi.ipmi.private import session as _ps


def describe() -> str:
    """pyghmi's IO thread (alive, where it is) and its sockets (descriptor,
    local port, blocking mode, sessions pooled on it)."""
    lines = []
    thread = _ps.iothread
    if thread is None:
        return "pyghmi's IO thread was never started in this process"
    lines.append(f"IO thread {thread.name}: alive={thread.is_alive()}")
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is not None:
        lines.extend("  " + line.rstrip() for line in traceback.format_stack(frame)[-4:])
    for sock in list(_ps.iosockets):
        fd = sock.fileno()
        try:
            port, blocking = sock.getsockname()[1], sock.getblocking()
        except OSError as exc:
            port, blocking = f"({exc})", "?"
        pooled = _ps.Session.socketpool.get(sock)
        lines.append(f"socket fd={fd} port={port} blocking={blocking} pooled={pooled}")
    routes = sum(len(ports) for ports in list(_ps.Session.bmc_handlers.values()))
    lines.append(
        f"routes={routes} waiting_sessions={len(_ps.Session.waiting_sessions)} "
        f"sessionqueue={len(_ps.sessionqueue)}"
    )
    return "\n".join(lines)
