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

An owner that must join what it started (a host's runtime,
:class:`bmaas.runtime.Runtime`) starts through a :class:`ThreadGroup`: the
same threads and pools, each remembered, so its close stops the pools and
joins every thread within one deadline.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when a pool is made: the CLI's start-up stays light
    import concurrent.futures

    from bmaas.deadline import Deadline

__all__ = ["ThreadGroup", "pool", "spawn"]


def spawn(target: Callable[..., object], name: str, *args: Any) -> threading.Thread:
    """A started daemon thread running ``target(*args)``, called ``name``."""
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    thread.start()
    return thread


def pool(workers: int, name: str) -> concurrent.futures.ThreadPoolExecutor:
    """A pool of at most ``workers`` threads called ``name_N``, started as
    work arrives. Shut it down when done; at interpreter exit, work still
    queued in it is cancelled (:func:`_cancel_queued_at_exit`)."""
    return _executor(workers, name)


def _executor(
    workers: int, name: str, initializer: Callable[[], object] | None = None
) -> concurrent.futures.ThreadPoolExecutor:
    from concurrent.futures import ThreadPoolExecutor

    made = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name, initializer=initializer)
    with _POOLS_LOCK:
        if not _HOOKED.is_set():
            threading._register_atexit(_cancel_queued_at_exit)  # type: ignore[attr-defined]
            _HOOKED.set()
        _POOLS.add(made)
    return made


def _cancel_queued_at_exit() -> None:
    """At interpreter exit, cancel the work still queued in every pool bmaas
    made. ``concurrent.futures`` joins its workers at exit only once each
    has drained its pool's whole queue, and ``atexit`` hooks run after that
    join: a conductor stopping with a queue of probes and logouts to silent
    BMCs took minutes to exit (issue 48). ``threading._register_atexit``
    hooks run before it (last registered first; a private but long-standing
    CPython hook, listed in :mod:`bmaas.drivers.private_api`)."""
    with _POOLS_LOCK:
        pools = list(_POOLS)
    for made in pools:
        made.shutdown(wait=False, cancel_futures=True)


#: every pool bmaas made and has not dropped (weakly: a pool shut down and
#: dropped leaves the set by itself)
_POOLS: weakref.WeakSet[concurrent.futures.ThreadPoolExecutor] = weakref.WeakSet()
_POOLS_LOCK = threading.Lock()
#: the exit hook is registered (once a process)
_HOOKED = threading.Event()


class ThreadGroup:
    """The threads one owner starts (:func:`spawn`, :func:`pool`, each
    remembered), joined by :meth:`join` within a deadline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def spawn(self, target: Callable[..., object], name: str, *args: Any) -> threading.Thread:
        """:func:`spawn`, remembered."""
        thread = spawn(target, name, *args)
        self._adopt(thread)
        return thread

    def pool(self, workers: int, name: str) -> concurrent.futures.ThreadPoolExecutor:
        """:func:`pool`, its threads remembered as each starts."""
        return _executor(workers, name, self._adopt)

    def _adopt(self, thread: threading.Thread | None = None) -> None:
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread or threading.current_thread())

    def alive(self) -> list[threading.Thread]:
        """The group's threads still running."""
        with self._lock:
            return [t for t in self._threads if t.is_alive()]

    def join(self, deadline: Deadline) -> list[str]:
        """Join every thread until ``deadline`` (their owners have told them
        to stop, and shut their pools down); the names of those still
        running then (each bounded by its own deadline: a daemon)."""
        for thread in self.alive():
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline.left()))
        return [t.name for t in self.alive() if t is not threading.current_thread()]
