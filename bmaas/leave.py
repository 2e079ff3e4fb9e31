"""Leaving a finished ``bmaas`` process at once.

Once a command has printed its results and closed its store, what the
interpreter still does on a normal exit is nobody's business but its own:
it joins every worker thread still out (``concurrent.futures`` joins them
at exit: a BMC call cut off at the deadline, a logout to a BMC that stopped
answering), runs the finalizers of the drivers left behind (an IPMI
session's logout), and tears down 700-odd modules (SQLAlchemy, sushy,
pyghmi). That took 0.19-0.26 s on a quiet 2-core box after the last
line of the command had run, and two to three times that with four CPU
burners beside it -- all of it after ``--deadline`` (issue 36).

:func:`leave` flushes the output and the log handlers and ends the process
with :func:`os._exit` -- but only when nothing durable can still be
underway (:func:`blockers`): every thread still alive is a daemon or one of
bmaas's BMC threads (which never write the store: results come back to the
calling thread, which writes it), and no child process of
``multiprocessing`` is alive (a sharded sync's workers are joined as
before). Otherwise it returns, and the caller exits the usual way. Every
store write is a committed transaction by then (the command closed its
store), so leaving loses nothing a crash would not also keep.

Only the console script leaves this way (:func:`bmaas.cli.main` without
``argv``); code that calls ``main(argv)`` in-process gets its
``SystemExit`` as before.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn, TextIO

__all__ = ["BMC_THREADS", "blockers", "leave"]

#: name prefixes of bmaas's threads that only talk to BMCs (their results go
#: back to the thread that writes the store): a process may leave without
#: waiting for them (:mod:`bmaas.ops`, :mod:`bmaas.pool`, :mod:`bmaas.silence`,
#: :mod:`bmaas.fenced`)
BMC_THREADS = ("bmaas-node", "bmaas-logout", "bmaas-keepalive", "bmaas-probe", "bmaas-fenced-read")


def _children() -> list[Any]:
    # only if it is loaded: importing multiprocessing to ask costs 10 ms
    mp = sys.modules.get("multiprocessing")
    return list(mp.active_children()) if mp is not None else []


def blockers(
    threads: Iterable[threading.Thread] | None = None,
    children: Callable[[], Sequence[Any]] = _children,
) -> list[str]:
    """What the process must wait for before it may leave at once: a live
    non-daemon thread other than the main thread and bmaas's BMC threads
    (:data:`BMC_THREADS`), or a live ``multiprocessing`` child. Empty: it
    may leave."""
    main = threading.main_thread()
    found = [
        f"thread {thread.name}"
        for thread in (threading.enumerate() if threads is None else threads)
        if thread is not main
        and thread.is_alive()
        and not thread.daemon
        and not thread.name.startswith(BMC_THREADS)
    ]
    found += [f"child process {getattr(child, 'pid', '?')}" for child in children()]
    return found


def leave(
    code: int,
    *,
    streams: Sequence[TextIO | None] | None = None,
    exit: Callable[[int], NoReturn] = os._exit,
    threads: Iterable[threading.Thread] | None = None,
    children: Callable[[], Sequence[Any]] = _children,
) -> None:
    """End the process now with ``code``, its output flushed, if
    :func:`blockers` finds nothing; otherwise return (and let the caller
    exit as usual). A stream that cannot be flushed (a closed pipe) makes
    the exit code 120 where it was 0, as the interpreter's own flush at
    exit does."""
    waiting = blockers(threads, children)
    if waiting:
        logging.getLogger(__name__).debug("leaving the usual way, for %s", ", ".join(waiting))
        return
    logging.shutdown()  # flush and close the log handlers
    for stream in (sys.stdout, sys.stderr) if streams is None else streams:
        if stream is None:
            continue
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: say so by the code
            code = code or 120
    exit(code)
