"""Silent BMCs (ones that stopped answering), re-probed in the background, so that a caller
with no loop of its own is not held by them again and again.

Inside Ironic's conductor every power-sync read of a silent BMC held one of
the sync's 8 workers for the whole ``[bmaas]call_deadline``, every cycle
until Ironic fenced the node (49 silent BMCs among 1000 stretched a 5.1 s
cycle to 27 s). ``bmaas sync`` has its own answer (:mod:`bmaas.fenced`);
this is the one for a host that only calls bmaas when it needs an answer.

A :class:`SilentBMCs` remembers, per pooled node, that its BMC gave no
answer (the policy table's :data:`~bmaas.policy.NO_ANSWER` column: a
read's, an action's, a keepalive's), and probes
it in the background through a probe the pool hands over (a power read
through the pool, so an answer leaves a logged-in session behind): at once,
then at gaps of ``first`` seconds doubling up to ``cap``. Once a probe got
no answer either, the silence is *confirmed* and
:meth:`SilentBMCs.evidence` says so: the caller may fail at once instead of
waiting out the timeout again, on evidence at most one probe gap old. Any
answer clears it (a busy or an error answer is an answer), so a BMC that
hung on one command but answers a read is never taken for silent.

Probes run on at most ``threads`` daemon threads, each bounded by the
probe's own deadline; the schedule is kept by one daemon thread, started on
the first silence. The clock and the way a probe is started are injected,
so :meth:`SilentBMCs.run_due` runs on a fake clock in tests.

**The silence bound** (:meth:`SilentBMCs.bound`; docs/ironic.md has the
rules and the field numbers, issue 35): one read at a time, the first reads
of newly hung BMCs held the sync's workers for the whole call deadline
each. So a periodic read of a BMC whose answer times are known waits at most
:data:`BOUND_FACTOR` times the slowest of its last :data:`BOUND_HISTORY`
answers (within :data:`BOUND_FLOOR` and the call deadline; the whole
deadline below :data:`BOUND_MIN_ANSWERS` answers). A cut read is a
no-answer that starts a background probe at once, in parallel with the
others, and owes the BMC's next read the whole deadline: a healthy but slow
BMC is cut at most once in a row, so never fenced for slowness.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterator

from bmaas.deadline import Deadline
from bmaas.faults import BMCFault
from bmaas.policy import policy_for
from bmaas.threads import ThreadGroup

__all__ = [
    "BOUND_FACTOR",
    "BOUND_FLOOR",
    "BOUND_HISTORY",
    "BOUND_MIN_ANSWERS",
    "STALE_SLACK",
    "Silence",
    "SilentBMCs",
]

LOG = logging.getLogger(__name__)

#: seconds past two probe gaps after which a silence is no longer known
STALE_SLACK = 30.0

#: a periodic read waits this many times the BMC's slowest recent answer ...
BOUND_FACTOR = 4.0
#: ... but never less than this many seconds (a fast BMC's bound: a loaded
#: conductor's own delays stay well inside it) ...
BOUND_FLOOR = 0.5
#: ... over its last this many answers ...
BOUND_HISTORY = 8
#: ... once it has this many (fewer: the whole call deadline)
BOUND_MIN_ANSWERS = 2

#: a probe: asks the BMC once, within its own deadline; it reports what it
#: saw back through :meth:`SilentBMCs.silent` or :meth:`SilentBMCs.heard`
Probe = Callable[[], None]


@dataclasses.dataclass
class Silence:
    """What is known about one silent BMC (times on the book's clock)."""

    #: whose BMC: the pool's key for the node (new settings, a new key)
    key: Hashable
    #: the latest no-answer
    fault: BMCFault
    #: the first no-answer of this silence, and the latest
    since: float
    last: float
    #: the next background probe, and the gap after it
    next_probe: float
    gap: float
    probe: Probe = dataclasses.field(repr=False)
    probes: int = 0
    probing: bool = False
    #: a background probe got no answer either (not just one command)
    confirmed: bool = False


class SilentBMCs:
    """The silent BMCs of one process, by pool key. See the module docstring."""

    def __init__(
        self,
        *,
        first: float = 10.0,
        cap: float = 120.0,
        threads: int = 16,
        clock: Callable[[], float] = time.monotonic,
        start: Callable[[Callable[[], None]], object] | None = None,
        floor: float = BOUND_FLOOR,
        factor: float = BOUND_FACTOR,
        history: int = BOUND_HISTORY,
        group: ThreadGroup | None = None,
        probe: bool = True,
    ) -> None:
        """``probe``: False for a host with a read schedule of its own (the
        book then only bounds reads: :class:`bmaas.runtime.Runtime`)."""
        if first <= 0 or cap < first or threads < 1:
            raise ValueError("need 0 < first <= cap and threads >= 1")
        if floor <= 0 or factor < 1 or history < BOUND_MIN_ANSWERS:
            raise ValueError(f"need floor > 0, factor >= 1 and history >= {BOUND_MIN_ANSWERS}")
        self.first, self.cap, self.threads = first, cap, threads
        self.floor, self.factor, self.history = floor, factor, history
        #: each BMC's latest answer times (seconds), for its silence bound
        self._answers: dict[Hashable, collections.deque[float]] = {}
        #: BMCs whose last read was cut at the bound: the next waits the whole deadline
        self._owed: set[Hashable] = set()
        self._clock = clock
        self._start = start
        self.probe = probe
        #: the probes' and the schedule's threads (a runtime's, joined at its close)
        self.group = group or ThreadGroup()
        self._book: dict[Hashable, Silence] = {}
        self._cond = threading.Condition()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._scheduler: threading.Thread | None = None
        self._stopped = False

    def silent(self, key: Hashable, fault: BMCFault, probe: Probe) -> None:
        """``key``'s BMC gave no answer (``fault``); ``probe`` asks it again.
        The first no-answer starts a probe at once; only the probe's own
        no-answer makes the silence *confirmed* (a BMC that hung on one
        command may well answer a read)."""
        now = self._clock()
        with self._cond:
            known = self._book.get(key)
            if known is None:
                LOG.info("%s: no answer from the BMC; probing it in the background", fault.node)
                self._book[key] = Silence(key, fault, now, now, now, self.first, probe)
            else:
                known.fault, known.last, known.probe = fault, now, probe
                if known.probing:  # the probe's own no-answer: confirmed, next after a gap
                    known.probing = False
                    known.confirmed = True
                    known.next_probe = now + known.gap
                    known.gap = min(self.cap, known.gap * 2)
            self._cond.notify_all()
        if self._start is None and self.probe:
            self._ensure_scheduler()

    def heard(self, key: Hashable) -> None:
        """``key``'s BMC answered (or its node's settings changed): not silent."""
        with self._cond:
            gone = self._book.pop(key, None)
            if gone is not None:
                self._cond.notify_all()
        if gone is not None:
            quiet = self._clock() - gone.since
            LOG.info("%s: the BMC answers again (silent for %.0f s)", gone.fault.node, quiet)

    def evidence(self, key: Hashable) -> Silence | None:
        """What is known about ``key``'s confirmed silence (a copy): None if
        it answers, if no background probe has confirmed it yet, or if the
        last no-answer is older than two probe gaps and
        :data:`STALE_SLACK` (probes lagging behind): then nothing is known,
        and the caller asks the BMC itself."""
        now = self._clock()
        with self._cond:
            known = self._book.get(key)
            if known is None or not known.confirmed:
                return None
            if now - known.last > 2 * known.gap + STALE_SLACK:
                return None
            return dataclasses.replace(known)

    def settle(self, key: Hashable, deadline: Deadline) -> None:
        """Wait (up to ``deadline``) for the verdict of ``key``'s first probe
        if it is running: a caller about to ask the BMC itself would
        otherwise wait for the probe's session, then for its own timeout."""
        with self._cond:
            while True:
                known = self._book.get(key)
                if known is None or known.confirmed or not known.probing:
                    return
                left = deadline.left()
                if left <= 0:
                    return
                self._cond.wait(min(left, 0.1))

    # -- the silence bound ---------------------------------------------------------

    def answered(self, key: Hashable, seconds: float) -> None:
        """``key``'s BMC answered a periodic read in ``seconds`` (the read's
        whole time: busy retries make it longer, never the bound shorter)."""
        with self._cond:
            times = self._answers.get(key)
            if times is None:
                times = self._answers[key] = collections.deque(maxlen=self.history)
            times.append(max(0.0, seconds))
            self._owed.discard(key)

    def bound(self, key: Hashable, call: float) -> float:
        """Seconds a periodic read of ``key``'s BMC waits for an answer:
        ``call`` (the call deadline) until :data:`BOUND_MIN_ANSWERS` of its
        answer times are known, and for the read after one cut at the bound;
        else ``factor`` times the slowest of them, at least ``floor``, at
        most ``call`` (see the module docstring)."""
        with self._cond:
            times = self._answers.get(key)
            if times is None or len(times) < BOUND_MIN_ANSWERS or key in self._owed:
                return call
            slowest = max(times)
        return min(call, max(self.floor, self.factor * slowest))

    @contextlib.contextmanager
    def bounded(self, key: Hashable, call: float) -> Iterator[float]:
        """One periodic read of ``key``'s BMC: yields the seconds its request
        may wait for an answer (:meth:`bound`). A clean end records the
        answer's time (:meth:`answered`). A no-answer (the policy table's
        ``NO_ANSWER``) that came when the bound, shorter than ``call``, ran
        out is raised again as the same fault saying so, and owes the next
        read the whole deadline; the caller's pool notes it (:meth:`silent`:
        a probe at once, with the whole deadline). A read given the whole
        deadline pays that debt, answered or not."""
        wait = self.bound(key, call)
        started = self._clock()
        try:
            yield wait
        except BMCFault as fault:
            took = self._clock() - started
            if wait < call and took >= wait and policy_for(fault).no_answer:
                with self._cond:
                    self._owed.add(key)
                raise self._cut(fault, wait, call) from fault
            if wait >= call:
                with self._cond:
                    self._owed.discard(key)
            raise
        self.answered(key, self._clock() - started)

    def _cut(self, fault: BMCFault, wait: float, call: float) -> BMCFault:
        again = "in the background" if self.probe else "by its next read"
        return type(fault)(
            f"no answer within this BMC's silence bound of {wait:.2f}s ({self.factor:g}x its "
            f"slowest recent answer, at least {self.floor:g}s; the call deadline is {call:g}s): "
            f"asked again {again} with the whole deadline. {fault.message}",
            node=fault.node,
            driver=fault.driver,
            operation=fault.operation,
            address=fault.address,
            elapsed=fault.elapsed,
            status=fault.status,
        )

    def __len__(self) -> int:
        with self._cond:
            return len(self._book)

    # -- the background probes -----------------------------------------------------

    def run_due(self) -> float | None:
        """Start every probe that is due; returns the seconds until the next
        one (None: nothing is silent)."""
        now = self._clock()
        with self._cond:
            due = [s for s in self._book.values() if not s.probing and s.next_probe <= now]
            for entry in due:
                entry.probing = True
                entry.probes += 1
            waiting = [s.next_probe for s in self._book.values() if not s.probing]
        for entry in due:
            self._launch(entry)
        return max(0.0, min(waiting) - now) if waiting else None

    def _launch(self, entry: Silence) -> None:
        probe = entry.probe

        def guarded() -> None:
            try:
                probe()
            except Exception:  # a probe must never take the schedule down: log, go on
                LOG.warning("a background BMC probe failed", exc_info=True)
            finally:
                self._probed(entry)

        if self._start is not None:
            self._start(guarded)
            return
        with self._cond:
            if self._executor is None:
                self._executor = self.group.pool(self.threads, "bmaas-probe")
            executor = self._executor
        executor.submit(guarded)

    def _probed(self, entry: Silence) -> None:
        """A probe ended without a verdict (the node was in use, an error):
        the same gap again, so the silence is never left unwatched."""
        with self._cond:
            if entry.probing and self._book.get(entry.key) is entry:
                entry.probing = False
                entry.next_probe = self._clock() + entry.gap
                self._cond.notify_all()

    def _ensure_scheduler(self) -> None:
        with self._cond:
            if self._stopped or (self._scheduler is not None and self._scheduler.is_alive()):
                return
            self._scheduler = self.group.spawn(self._schedule, "bmaas-silent-bmcs")

    def _schedule(self) -> None:
        while True:
            wait = self.run_due()
            with self._cond:
                if self._stopped:
                    return
                # woken early by a new silence; a finished probe reschedules through silent()
                self._cond.wait(self.cap if wait is None else max(wait, 0.05))
                if self._stopped:
                    return

    def stop(self) -> None:
        """End the schedule and let running probes finish on their own (they
        are bounded by their deadlines); nothing new starts."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
