"""Sessions kept alive between a host's calls: the keeper of a runtime
(:class:`bmaas.runtime.Runtime`): ``bmaas sync --interval``'s (and each of
its sweep workers'), Ironic's conductor's. Without one, each IPMI session
sits idle between two reads past what its BMC is trusted to keep
(``session_idle``, 20 s): Ironic's power sync reads each node once every
``[conductor]sync_power_state_interval`` (120 s by default), so every sync
cycle logged in to every BMC again (a login is four exchanges and the most
CPU of a read; measured in a 1000-node Ironic: two BMC requests a node a
cycle where one would do).

A :class:`SessionKeeper` is one daemon thread per pool. Each round it logs
out sessions idle past their limit (:meth:`DriverPool.expire_idle`) and
sends the keepalives that are due (:meth:`DriverPool.keepalive`, each
within its driver's ``bmc_timeout``, the round within ``round_budget``),
then sleeps until the next session is due, never longer than ``tick``
(60 s): a session given back that is due sooner wakes it
(:meth:`DriverPool.on_sooner`), so a host whose sessions are all held
(an events sync's streamed nodes) is not woken every few seconds to learn
that nothing is due (issue 46: on this 2-core VM a wake from an idle wait
costs a thread some 0.2-0.7 ms of CPU before its work runs warm).
:meth:`SessionKeeper.stop` ends the sleep at once::

    keeper = SessionKeeper(pool)
    keeper.start()          # idempotent: call it on first use
    ...
    keeper.stop()

The clock and the wait are injected, so :meth:`step` runs on a
:class:`~bmaas.fakes.clock.FakeClock` in tests.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from bmaas import threads
from bmaas.deadline import Deadline
from bmaas.pool import DriverPool

__all__ = ["LOGIN_EXCHANGES", "SessionKeeper", "keepalives_pay"]

LOG = logging.getLogger(__name__)

#: BMC exchanges of an IPMI 2.0 login: Get Channel Authentication
#: Capabilities, Open Session, RAKP 1, RAKP 3, Set Session Privilege Level.
#: Its client CPU is about as many keepalives' too (measured on hwlab: a
#: login 2.2 ms, a keepalive 0.45 ms).
LOGIN_EXCHANGES = 5


def keepalives_pay(interval: float, every: float, *, login: int = LOGIN_EXCHANGES) -> bool:
    """Whether keeping a session alive through ``interval`` idle seconds
    (a keepalive each ``every`` seconds of idleness) costs no more than one
    login at its end. Keepalives are not free: across Ironic's default
    120 s a 10 s keepalive is sent 11 times, twice a login's exchanges and
    CPU, so there logging in again each cycle is the cheaper way. An
    unknown interval (0 or less) keeps sessions alive."""
    if interval <= 0 or every <= 0:
        return True
    needed = max(0, math.ceil(interval / every) - 1)
    return needed <= login


class SessionKeeper:
    """Keeps ``pool``'s idle sessions alive from a background thread."""

    def __init__(
        self,
        pool: DriverPool,
        *,
        tick: float = 60.0,
        round_budget: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        group: threads.ThreadGroup | None = None,
    ) -> None:
        """``group``: whose thread it is (default: the pool's)."""
        if tick <= 0 or round_budget <= 0:
            raise ValueError("tick and round_budget must be positive")
        self.pool = pool
        self.tick = tick
        self.round_budget = round_budget
        self._clock = clock
        self._group = group or pool.group
        self._stop = threading.Event()
        #: set by stop() and by the pool when a session is due sooner
        self._wake = threading.Event()
        pool.on_sooner(self._wake.set)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def step(self) -> float:
        """One round: expire idle sessions, send the keepalives due now;
        returns the seconds to sleep before the next round (at most ``tick``).
        A round with nothing due walks no session (:meth:`DriverPool.due_in`)."""
        self.pool.expire_idle()
        if self.pool.due_in() == 0.0:  # what is due now is a keepalive: the expired are gone
            self.pool.keepalive(Deadline.after(self.round_budget, clock=self._clock))
            self.pool.expire_idle()
        return min(self.tick, self.pool.due_in())

    def start(self) -> None:
        """Start the thread unless it runs (safe from many threads at once)."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop.clear()
            self._thread = self._group.spawn(self._run, "bmaas-session-keeper")

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        """Wake the thread and wait up to ``timeout`` seconds for it to end
        (a keepalive in flight ends within its driver's ``bmc_timeout``)."""
        self._stop.set()
        self._wake.set()
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()  # before the round asks: a sooner session after it wakes us
            try:
                wait = self.step()
            except Exception:  # a keeper that dies silently is worse: log, go on
                LOG.exception("session keeper: a round failed; next in %.0f s", self.tick)
                wait = self.tick
            self._wake.wait(wait)
