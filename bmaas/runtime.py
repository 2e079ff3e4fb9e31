"""One runtime per host process: what it holds to reach BMCs, and its threads.

A process that reaches BMCs (an Ironic conductor today; the ``bmaas sync``
loop, a fleet command and the provisioner next) builds one
:class:`Runtime`, once, and passes it down to whatever reaches a BMC. Nothing
below it keeps process state of its own: what used to be module globals
(the conductor's pool, keeper, silent-BMC book, request registry and event
streams) are the runtime's attributes and parts::

    Runtime                         one per host process, passed explicitly
    ├── threads  ThreadGroup        every thread below is started through it
    │                               (bmaas.threads) and joined at close
    ├── gates    GateRegistry       per-BMC caps and spacing (bmaas.gate; the
    │                               process's GATES unless given another):
    │                               every driver of the pool takes its gate here
    ├── silence  SilentBMCs         BMCs that gave no answer, probed in the
    │                               background (bmaas.silence): probe threads,
    │                               the schedule's thread
    ├── pool     DriverPool         one driver (one session) per node
    │                               (bmaas.pool): background logouts,
    │                               keepalive rounds
    ├── keeper   SessionKeeper      the pool's keepalives between a host's
    │                               calls (bmaas.keeper): one thread
    ├── requests RequestDeadlines   each task's open request Deadline, which
    │                               the call that follows continues
    └── parts                       what a host adds, built once on first
                                    use (:meth:`Runtime.part`): an Ironic
                                    conductor's event streams and push
                                    listener (listener threads, the sweeper),
                                    the quirks it has told

One lifecycle: :meth:`Runtime.start` (idempotent; parts start lazily) and
:meth:`Runtime.close` within a Deadline: the keeper stops, the parts close
(the last added first: streams before the push listener they subscribe
to), the probes stop, idle sessions are logged out, and every thread of
the group is joined by the deadline. A closed runtime refuses new sessions
(:class:`RuntimeClosed`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from bmaas import clock as _clock
from bmaas.deadline import Deadline
from bmaas.driver import DEFAULT_BMC_TIMEOUT, BMCDriver
from bmaas.gate import GATES, GateRegistry
from bmaas.keeper import SessionKeeper
from bmaas.pool import DEFAULT_IDLE, DriverPool, PoolKey
from bmaas.silence import SilentBMCs
from bmaas.threads import ThreadGroup

__all__ = ["CLOSE_WITHIN", "JOIN", "RequestDeadlines", "Runtime", "RuntimeClosed", "node_driver"]

LOG = logging.getLogger(__name__)
T = TypeVar("T")

#: seconds to close in for a host with no deadline of its own at its end
CLOSE_WITHIN = 10.0

#: seconds between a call's end and the next that continues its request:
#: inside Ironic, what the conductor does between the read before an action
#: and the action (a database write and a notification)
JOIN = 5.0


class RuntimeClosed(RuntimeError):
    """The runtime was closed (its host is shutting down): no new session."""


@dataclasses.dataclass
class _Open:
    deadline: Deadline
    #: when the request's last BMC call ended (on the clock)
    idle_since: float


class RequestDeadlines:
    """Each task's open request Deadline: a call opens one (:meth:`open`),
    the call that follows within ``join`` seconds continues it, the
    request's end closes it (:meth:`close`). Keyed weakly by the task, so a
    task its host dropped takes its entry with it."""

    def __init__(self, *, clock: _clock.ClockFn = _clock.monotonic, join: float = JOIN) -> None:
        self._clock = clock
        self._join = join
        self._lock = threading.Lock()
        self._open: weakref.WeakKeyDictionary[Any, _Open] = weakref.WeakKeyDictionary()

    def open(self, task: Any, seconds: float) -> Deadline:
        """The task's request Deadline when its last call ended less than
        ``join`` seconds ago and time is left, else a new one of ``seconds``."""
        now = self._clock()
        with self._lock:
            known = self._open.get(task)
            joins = known is not None and now - known.idle_since <= self._join
            if known is not None and joins and not known.deadline.expired:
                return known.deadline
            deadline = Deadline.after(seconds, clock=self._clock)
            self._open[task] = _Open(deadline, now)
            return deadline

    def idle(self, task: Any) -> None:
        """The task's call ended: the next one may continue its request."""
        with self._lock:
            known = self._open.get(task)
            if known is not None:
                known.idle_since = self._clock()

    def close(self, task: Any) -> None:
        """The request is over (its action ended, however it ended)."""
        with self._lock:
            self._open.pop(task, None)


class Runtime:
    """A host process's BMC machinery (the module's tree). ``keep``: start
    the session keeper at :meth:`start`; ``idle``: the pool's idle limit;
    ``wait``: a background probe's BMC timeout. ``probe``: probe silent BMCs
    (a conductor); ``bmaas sync`` has its fenced back-off (:mod:`bmaas.fenced`)
    and a fleet command reads once: their book only bounds reads."""

    def __init__(
        self,
        *,
        gates: GateRegistry = GATES,
        idle: float = DEFAULT_IDLE,
        wait: float = DEFAULT_BMC_TIMEOUT,
        keep: bool = False,
        probe: bool = True,
        clock: _clock.ClockFn = _clock.monotonic,
    ) -> None:
        self.threads = ThreadGroup()
        self.gates = gates
        self.silence = SilentBMCs(clock=clock, probe=probe, group=self.threads)
        self.pool = DriverPool(
            idle=idle, wait=wait, clock=clock, silence=self.silence, group=self.threads
        )
        self.keeper = SessionKeeper(self.pool, clock=clock, group=self.threads)
        self.requests = RequestDeadlines(clock=clock)
        self.keep = keep
        self._lock = threading.RLock()
        self._parts: dict[str, object] = {}
        self._closers: list[tuple[str, Callable[[Deadline], object]]] = []
        self._started = self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def start(self) -> None:
        """Start what runs from the beginning (the keeper, when ``keep``);
        a second call does nothing. Parts start when first asked for."""
        with self._lock:
            self._refuse_if_closed()
            if self._started:
                return
            self._started = True
            if self.keep:
                self.keeper.start()

    def part(self, name: str, build: Callable[[], T]) -> T:
        """The part ``name``, built by ``build()`` the first time it is asked
        for (under the runtime's lock: once, however many threads ask)."""
        with self._lock:
            if name not in self._parts:
                self._refuse_if_closed()
                self._parts[name] = build()
            return self._parts[name]  # type: ignore[return-value]

    def on_close(self, name: str, close: Callable[[Deadline], object]) -> None:
        """Run ``close(deadline)`` at :meth:`close`, before what was added earlier."""
        with self._lock:
            self._closers.append((name, close))

    @contextlib.contextmanager
    def session(
        self, key: PoolKey, build: Callable[[], BMCDriver], *, deadline: Deadline
    ) -> Iterator[BMCDriver]:
        """The node's pooled driver (:meth:`DriverPool.session`), its
        requests through this runtime's gates; :class:`RuntimeClosed` once
        closed."""
        self._refuse_if_closed()

        def built() -> BMCDriver:
            driver = build()
            driver.gates = self.gates
            return driver

        with self.pool.session(key, built, deadline=deadline) as driver:
            yield driver

    def close(self, deadline: Deadline) -> list[str]:
        """Stop everything within ``deadline``: the keeper, the parts (last
        added first), the probes, the pool (idle sessions logged out); then
        join every thread. Returns the names of threads still running at the
        deadline (logged; none when everything stopped in time). Safe to
        call twice."""
        with self._lock:
            self._closed = True
            closers, self._closers = self._closers[::-1], []
            self._parts.clear()
        self.keeper.stop(max(0.0, deadline.left()))
        for name, close in closers:
            try:
                close(deadline)
            except Exception:  # one part's failure must not keep the rest running
                LOG.warning("bmaas: closing the runtime's %s failed", name, exc_info=True)
        self.silence.stop()
        self.pool.close(deadline)
        left = self.threads.join(deadline)
        if left:
            LOG.warning("bmaas: runtime closed with threads still running: %s", ", ".join(left))
        return left

    def __enter__(self) -> Runtime:
        """Started; closed at the block's end within :data:`CLOSE_WITHIN`."""
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(Deadline.after(CLOSE_WITHIN))

    def _refuse_if_closed(self) -> None:
        if self._closed:
            raise RuntimeClosed(
                "the bmaas runtime is closed (its host process is shutting down): "
                "no new BMC session or part"
            )


@contextlib.contextmanager
def node_driver(
    rt: Runtime | None, record: Any, factory: Callable[[Any], BMCDriver], *, deadline: Deadline
) -> Iterator[BMCDriver]:
    """``record``'s driver, held until the block ends: ``rt``'s pooled one
    (:meth:`Runtime.session`; ``factory(record)`` builds one when none is
    pooled), or -- a caller without a runtime (a one-shot store command,
    tests) -- one built for the block and closed after."""
    if rt is None:
        driver = factory(record)
        try:
            yield driver
        finally:
            driver.close()
        return
    key = rt.pool.key_for(record.driver, record.name, record.driver_info)
    with rt.session(key, lambda: factory(record), deadline=deadline) as driver:
        yield driver
