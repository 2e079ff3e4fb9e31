"""Every thread bmaas starts is started here.

bmaas runs work beside the caller's thread in a handful of places: session
keepalives, lease renewal, signal relays, event listeners, background probes
of silent BMCs, logouts, the deadline watchdog, a fleet command's per-node
workers. Each used to call ``threading.Thread`` or ``ThreadPoolExecutor``
itself, each with its own idea of names and daemon flags (issue 45 counted 15
places in ``bmaas`` and ``drivers``). They all start here now, so one place
says how a bmaas thread is made:

* **named** (``bmaas-...``): ``py-spy dump`` and a conductor's thread list
  say whose each one is;
* **daemon**: no bmaas thread keeps an interpreter alive after its host
  returns (a host's close stops and joins what it owns; a daemon thread is
  the guarantee when a host is killed mid-way);
* **started** when made: nothing is handed out half-made.

A test holds the tree to it: no other module in ``bmaas`` or ``drivers``
constructs a thread or a thread pool.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when a pool is made: the CLI's start-up stays light
    import concurrent.futures

__all__ = ["pool", "spawn"]


def spawn(target: Callable[..., object], name: str, *args: Any) -> threading.Thread:
    """A started daemon thread running ``target(*args)``, called ``name``."""
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    thread.start()
    return thread


def pool(workers: int, name: str) -> concurrent.futures.ThreadPoolExecutor:
    """A pool of at most ``workers`` threads called ``name_N``, started as
    work arrives (``ThreadPoolExecutor``'s threads are daemons already, and
    joined at interpreter exit: shut it down when done)."""
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
