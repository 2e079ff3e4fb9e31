"""The one listener loop of a host: every event stream on one thread, and
every decision about them (issue 45).

``bmaas sync``'s :class:`~bmaas.events.EventWatch` and Ironic's conductor
(``bmaas.drivers.ironic.streams``) listen the same way: each holds one
:class:`Reactor`, and each stream it adds drives one :class:`Listening`,
which decides what to do with news (trusted within :class:`Pacing`'s
rate, the rest a flood; the reads pushed news asks for spaced per node,
:meth:`Pacing.look_at`), with a stream that ended or failed (closed, its
nodes polled) and when to open it again -- the policy table's ``stream``
column (:class:`~bmaas.policy.Reopen`): ``soon``, paced by
:class:`Backoff`, or ``late`` (a rejected password: accounts lock). A
listener never dies and never gives up. The loop and its decisions are
one module, so an event crosses three modules on its way to a host: this
loop, the stream's protocol (:meth:`Stream.read_ready`), the host's
:class:`Sink`.

A thread per stream cost ``bmaas sync`` 1,003 threads and 1,017 file
descriptors on 1,000 Redfish services (issue 46, finding 7); that loop is
gone. A :class:`Reactor` waits on every open stream's socket at once
(:class:`selectors.DefaultSelector`: epoll on Linux) in ONE thread, and
hands a readable stream's bytes to its SSE parser without blocking
(:meth:`Stream.read_ready`). Opening a stream -- the EventService read
and the SSE request, each bounded by the open's Deadline, the BMC's
request gate -- blocks, so opens run on a small pool (:data:`OPENS`
threads): one slow BMC never holds the others, and the host's threads
are ``1 + OPENS`` whatever its fleet.

Times are a heap of deadlines on the host's clock: a stream's idle limit
(silence past it is the stream's :meth:`Stream.silent` fault,
:class:`~bmaas.faults.BMCTimeout`, for that stream alone; any byte, a
keepalive too, starts it over; a stream that never sent a keepalive is
silent at rest by design and gets the long limit,
:meth:`Pacing.silence_limit`) and its wait before re-opening.

Only the reactor's thread reads, registers and closes a registered stream
(a socket closed elsewhere could hand its descriptor number to another
while the selector still holds it): a host drops a stream with
:meth:`Reactor.drop`, from any thread.

A push subscription has no socket of its own: the BMC POSTs to the push
listener (one thread for every peer), which hands each body to its
subscription's :class:`Inbox`. An open stream whose
:meth:`Stream.selectable` is an Inbox rides the reactor
too: a body put there wakes the reactor, which reads the stream as if
its socket were readable; silence is what a push subscription promises
while nothing happens, so instead of an idle limit its Inbox names a
check (one GET that the BMC still has it) every :attr:`Inbox.quiet`
seconds, run on the opens' pool. N push-subscribed
services cost no thread each.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import heapq
import itertools
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from bmaas import threads
from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.faults import BmaasError
from bmaas.policy import Reopen, policy_for

__all__ = [
    "LOOK_EVERY",
    "OPENS",
    "RESERVE",
    "Backoff",
    "Inbox",
    "Listening",
    "News",
    "Pacing",
    "Reactor",
    "Sink",
    "Stream",
    "TokenBucket",
    "fd_room",
]

LOG = logging.getLogger(__name__)

#: the listeners' decisions log as the events they serve (an operator filters on it)
EVENTS_LOG = logging.getLogger("bmaas.events")

#: seconds: pushed news has one node read at most once a window (:meth:`Pacing.look_at`)
LOOK_EVERY = 10.0


class News(Protocol):
    """What a stream's edge reports (``bmaas.drivers.redfish.events.PowerNews``)."""

    @property
    def node(self) -> str: ...
    @property
    def message_id(self) -> str: ...
    @property
    def power(self) -> PowerState | None: ...
    @property
    def at(self) -> float | None: ...
    @property
    def pushed(self) -> bool:
        """POSTed to the push listener: a reason to read the node, not its state."""
        ...


class Stream(Protocol):
    """One service's event stream at the protocol's edge, as the reactor
    reads it (``bmaas.drivers.redfish.events.ServiceStream``)."""

    nodes: dict[str, str]

    @property
    def key(self) -> str: ...
    def open(self, deadline: Deadline) -> None: ...
    def close(self) -> None: ...

    def selectable(self) -> Any | None:
        """The open stream's ``fileno()`` holder (or an :class:`Inbox`),
        None when closed."""
        ...

    def read_ready(self) -> Sequence[News] | None:
        """The news in what has arrived, without waiting; None: no byte yet."""
        ...

    def silent(self, idle: float) -> Exception:
        """The fault of a stream silent for ``idle`` seconds (closed)."""
        ...

    @property
    def keeps_alive(self) -> bool:
        """The service has sent a keepalive on this stream since it opened:
        its silence past :attr:`Pacing.idle` is a lost stream. One that
        never has is silent at rest by design (:attr:`Pacing.quiet`)."""
        ...


@dataclasses.dataclass(frozen=True)
class Backoff:
    """Seconds before reconnect ``n`` (0-based): ``first * factor**n``, at most ``cap``."""

    first: float = 1.0
    factor: float = 2.0
    cap: float = 60.0

    def __call__(self, n: int) -> float:
        # n is capped: a BMC down for days must not overflow a float (2.0**1024)
        return min(self.cap, self.first * self.factor ** min(n, 64))


class TokenBucket:
    """``rate`` per second, ``burst`` at once, on an injected clock."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float]) -> None:
        self.rate, self.burst, self._clock = rate, burst, clock
        self._tokens, self._at = burst, clock()

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False


@dataclasses.dataclass(frozen=True)
class Pacing:
    """The numbers of a listener: how long it opens, reads and waits. Which
    wait a fault takes is the policy table's ``stream`` column
    (:class:`~bmaas.policy.Reopen`), never decided here."""

    #: seconds the open (the EventService read and the stream's request) may take
    open_deadline: float = 15.0
    #: seconds of silence before a stream that sends keepalives counts as
    #: lost (TCP keepalive notices a vanished BMC sooner:
    #: bmaas.drivers.redfish.wirestream)
    idle: float = 300.0
    #: the wait before re-opening ``soon``
    backoff: Backoff = Backoff()
    #: seconds before re-opening ``late`` (no EventService, a rejected password)
    absent_retry: float = 600.0
    #: news trusted per second, and at once
    rate: float = 20.0
    burst: float = 100.0
    #: seconds between two reads of one node that pushed news asks for: a
    #: POST proves only that its sender knows the Context, so however many
    #: arrive, one node's BMC is read for them at most once a window
    look_every: float = LOOK_EVERY
    #: seconds of silence before a stream that never sent a keepalive is
    #: opened again (at least ``idle``). Such a service (OpenBMC's bmcweb,
    #: hwlab ``--sse-keepalive 0``) sends nothing while nothing happens:
    #: dropped after ``idle``, its streams cost some 36 requests a node-hour
    #: at rest. A BMC that vanished is TCP keepalive's to notice; a change a
    #: hung stream missed, the node's liveness read's (bmaas.liveness)
    quiet: float = 3600.0

    def silence_limit(self, keeps_alive: bool) -> float:
        """Seconds of silence a stream may keep: ``idle`` once it has sent
        a keepalive (the promise broken past it), else ``quiet``."""
        return self.idle if keeps_alive else max(self.idle, self.quiet)

    def look_at(self, looked: float | None, now: float) -> float:
        """When pushed news arriving at ``now`` may have its node read:
        at once, or ``look_every`` after the last read pushed news caused
        (``looked``); the news in between waits for that one read, so a
        real change among it is seen within the window."""
        return now if looked is None else max(now, looked + self.look_every)

    def wait(self, fault: BaseException, failures: int) -> float:
        """Seconds before the next open after ``fault``, the ``failures``-th in a row."""
        if policy_for(fault).stream is Reopen.SOON:
            return self.backoff(failures)
        return self.absent_retry


W = TypeVar("W", contravariant=True)


class Sink(Protocol[W]):
    """What a listener tells its host (``who``: the host's handle on it)."""

    def opened(self, who: W) -> None: ...
    def lost(self, who: W, fault: Exception, wait: float, *, opening: bool) -> None: ...
    def news(self, who: W, trusted: Sequence[News], flood: Sequence[News]) -> None: ...


class Listening(Generic[W]):
    """The decisions of one listener, which :class:`bmaas.reactor.Reactor`
    drives (every stream on one thread). One set of decisions: news through the
    bucket (beyond its rate: a flood), after any exception the stream
    closed, the wait the policy table's ``stream`` column says (the back-off
    starting over after a stream that stayed up), the fault logged and told."""

    def __init__(
        self,
        who: W,
        stream: Stream,
        sink: Sink[W],
        pacing: Pacing,
        clock: Callable[[], float],
    ) -> None:
        self.who, self.stream, self.sink, self.pacing = who, stream, sink, pacing
        self._clock = clock
        self.failures = 0
        self.bucket = TokenBucket(pacing.rate, pacing.burst, clock)
        #: when the stream last opened (None: not open)
        self.opened_at: float | None = None

    def deadline(self) -> Deadline:
        """The open's deadline, from now."""
        return Deadline.after(self.pacing.open_deadline, clock=self._clock)

    def began(self) -> None:
        """The stream opened (not yet told: the host may have dropped it meanwhile)."""
        self.opened_at = self._clock()

    def opened(self) -> None:
        self.sink.opened(self.who)

    def arrived(self, items: Iterable[News]) -> None:
        """News read off the stream; beyond the bucket's rate, a flood: not trusted."""
        trusted: list[News] = []
        flood: list[News] = []
        for news in items:
            (trusted if self.bucket.take() else flood).append(news)
        self.sink.news(self.who, trusted, flood)

    def close(self) -> None:
        """Nothing of ours stays open (the stream, if it opened)."""
        if self.opened_at is not None:
            with contextlib.suppress(Exception):
                self.stream.close()

    def failed(self, fault: Exception) -> float:
        """``fault`` ended the stream (or its open): its nodes are polled;
        the seconds before the next open."""
        opened_at, self.opened_at = self.opened_at, None
        if opened_at is not None and self._clock() - opened_at > self.pacing.backoff.cap:
            self.failures = 0  # it stayed up: the back-off starts over
        wait = self.pacing.wait(fault, self.failures)
        self.failures += 1
        key = self.stream.key
        if not isinstance(fault, BmaasError):  # a bug, not the BMC: say where
            EVENTS_LOG.error("%s: the event listener met %s: %s; its nodes are polled, "
                      "re-opened in %.0f s", key, type(fault).__name__, fault, wait,
                      exc_info=fault)  # fmt: skip
        try:
            self.sink.lost(self.who, fault, wait, opening=opened_at is None)
        except Exception:
            EVENTS_LOG.exception("%s: the event listener's host failed to take a lost stream", key)
        return wait


#: opens in flight at once, each on a pool thread (an open blocks up to its
#: deadline); the others wait in the reactor's queue, their deadlines not begun
OPENS = 8
#: file descriptors kept for everything but the streams (the store, the
#: pass's BMC sessions, the opens in flight, logs)
RESERVE = 256


def fd_room(wanted: int, *, reserve: int = RESERVE) -> int:
    """How many of ``wanted`` more streams (a descriptor each) fit in this
    process's open-file limit, ``reserve`` kept for the rest. The soft
    limit is raised to the hard one first when they would not fit (said at
    INFO, once a raise); what still does not fit is the caller's to refuse."""
    try:
        import resource
    except ImportError:  # not POSIX: no limit to read
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    used = _open_fds()
    need = used + wanted + reserve
    if (
        soft != resource.RLIM_INFINITY
        and need > soft
        and (hard == resource.RLIM_INFINITY or hard > soft)
    ):
        new = need if hard == resource.RLIM_INFINITY else hard
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            LOG.info("bmaas: the open-file limit raised from %d to %d for %d event streams",
                     soft, new, wanted)  # fmt: skip
            soft = new
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(0, min(wanted, soft - used - reserve))


def _open_fds() -> int:
    with contextlib.suppress(OSError):
        import os

        return len(os.listdir("/proc/self/fd"))
    return 0


class Inbox:
    """What another thread hands a stream without a socket (a push
    subscription's bodies, from the push listener's thread): :meth:`put`
    from any thread wakes the reactor reading it, :meth:`take` is the
    stream's. ``quiet``: seconds between the stream's ``check`` (a
    blocking request, run on the reactor's pool) while it is open. At most
    ``cap`` items are held; past it :meth:`take` says so (``overflowed``:
    the stream's nodes are to be read, not its items trusted one by one)."""

    def __init__(self, quiet: float, check: Callable[[Deadline], None], cap: int = 256) -> None:
        self.quiet, self.check, self.cap = quiet, check, cap
        self._lock = threading.Lock()
        self._items: collections.deque[Any] = collections.deque()
        self._wake: Callable[[], None] | None = None
        self.overflowed = False

    def bind(self, wake: Callable[[], None] | None) -> None:
        """The reactor's wake-up (None: nobody reads it any more)."""
        with self._lock:
            self._wake = wake
            pending = bool(self._items) or self.overflowed
        if wake is not None and pending:
            wake()

    def put(self, item: Any) -> None:
        with self._lock:
            wake = self._wake if not self._items and not self.overflowed else None
            if len(self._items) >= self.cap:
                self._items.clear()
                self.overflowed = True
            else:
                self._items.append(item)
        if wake is not None:  # empty before: one wake for a burst
            wake()

    def take(self) -> tuple[list[Any], bool]:
        """Everything put since the last take, and whether some was lost."""
        with self._lock:
            items, self._items = list(self._items), collections.deque()
            overflowed, self.overflowed = self.overflowed, False
        return items, overflowed


@dataclasses.dataclass(eq=False)
class _Entry:
    state: Listening[Any]
    stopped: Callable[[], bool]
    #: "new", "queued" (for an open's turn), "opening", "open", "waiting"
    #: (to open again), "ended"
    phase: str = "new"
    dropped: bool = False
    fileobj: Any = None
    #: when the stream last delivered a byte
    last: float = 0.0
    #: the timer that counts (older ones in the heap are stale)
    timer: int = -1

    @property
    def stream(self) -> Stream:
        return self.state.stream


class Reactor:
    """Streams on one thread (the module doc). ``clock`` is the hosts';
    ``submit`` runs an open elsewhere (default: a pool of ``opens``
    threads); ``spawn`` starts the reactor's thread (:meth:`start`).
    Tests drive :meth:`step` themselves on a fake clock."""

    def __init__(
        self,
        *,
        opens: int = OPENS,
        clock: Callable[[], float] = time.monotonic,
        submit: Callable[[Callable[[], None]], object] | None = None,
        spawn: Callable[..., Any] = threads.spawn,
        name: str = "bmaas-events",
    ) -> None:
        self._clock, self._spawn, self._name, self._opens = clock, spawn, name, opens
        self._submit = submit
        self._pool: Any = None
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._inbox: collections.deque[Callable[[], None]] = collections.deque()
        self._timers: list[tuple[float, int, _Entry]] = []
        self._seq = itertools.count()
        self._entries: set[_Entry] = set()
        #: streams waiting for an open's turn (first come, first opened), and opens in flight
        self._queue: collections.deque[_Entry] = collections.deque()
        self._opening = 0
        self._stop = False
        self._started = False
        self.thread: Any = None

    # -- the hosts' side (any thread) -------------------------------------------------

    def add(
        self,
        who: Any,
        stream: Stream,
        sink: Sink[Any],
        pacing: Pacing,
        *,
        stopped: Callable[[], bool] = lambda: False,
    ) -> _Entry:
        """Listen to ``stream`` (opened at once) until :meth:`drop`; its
        host hears through ``sink`` (:class:`Listening`)."""
        entry = _Entry(Listening(who, stream, sink, pacing, self._clock), stopped)
        self._post(lambda: self._open(entry))
        return entry

    def drop(self, entry: _Entry) -> None:
        """Stop listening to ``entry``'s stream: the reactor closes it."""
        entry.dropped = True
        self._post(lambda: self._end(entry))

    def start(self) -> None:
        """The reactor's thread (once: a host calls it at each stream it adds)."""
        if not self._started and not self._stop:
            self._started = True
            self.thread = self._spawn(self.run, self._name)

    def count(self) -> int:
        """Streams listened to (open, opening or waiting to open again)."""
        return len(self._entries)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread (joined within ``timeout``) and close every stream."""
        self._stop = True
        self._wake()
        join = getattr(self.thread, "join", None)
        if join is not None:
            join(timeout)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._queue.clear()
        for entry in list(self._entries):
            entry.dropped = True
            self._end(entry)
        with contextlib.suppress(Exception):
            self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    # -- the reactor's thread -------------------------------------------------------

    def run(self) -> None:
        """Steps until :meth:`close`; a bug in one step is logged, never the end."""
        while not self._stop:
            try:
                self.step(self._timeout())
            except Exception:
                LOG.exception("bmaas: the event streams' reactor met a bug; it goes on")

    def step(self, timeout: float | None = 0.0) -> None:
        """Wait up to ``timeout`` for a readable stream, then handle what is
        readable, what the hosts asked for, and the timers that are due."""
        for key, _ in self._selector.select(timeout):
            if key.data is None:
                with contextlib.suppress(OSError):
                    while self._wake_r.recv(4096):
                        pass
            else:
                self._readable(key.data)
        while self._inbox:
            self._inbox.popleft()()
        self._due()

    def _timeout(self) -> float | None:
        if self._inbox:
            return 0.0
        if not self._timers:
            return None
        return max(0.0, self._timers[0][0] - self._clock())

    def _post(self, work: Callable[[], None]) -> None:
        self._inbox.append(work)
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full: a wake is pending anyway; closed: stopped
            self._wake_w.send(b"\0")

    def _arm(self, entry: _Entry, at: float) -> None:
        entry.timer = next(self._seq)
        heapq.heappush(self._timers, (at, entry.timer, entry))

    def _due(self) -> None:
        now = self._clock()
        while self._timers and self._timers[0][0] <= now:
            _, seq, entry = heapq.heappop(self._timers)
            if seq != entry.timer or entry.phase == "ended":
                continue  # stale: the entry moved on
            if entry.phase == "waiting":
                self._open(entry)
            elif entry.phase == "open" and isinstance(entry.fileobj, Inbox):
                self._check(entry, entry.fileobj)
            elif entry.phase == "open":
                pacing = entry.state.pacing
                limit = pacing.silence_limit(entry.stream.keeps_alive)
                if now - entry.last >= limit:
                    self._fail(entry, entry.stream.silent(limit))
                else:  # looked at again within idle: a first keepalive arms the short limit
                    self._arm(entry, min(entry.last + limit, now + pacing.idle))

    def _open(self, entry: _Entry) -> None:
        """Queue ``entry`` for its open (:meth:`_next` starts it)."""
        if entry.dropped or entry.stopped() or self._stop:
            self._end(entry)
            return
        self._entries.add(entry)
        entry.phase = "queued"
        self._queue.append(entry)
        self._next()

    def _next(self) -> None:
        """Start queued opens while fewer than ``opens`` are in flight. Each
        open's Deadline counts from its start, not from its queueing: a
        queue of thousands drains at the rate the BMCs answer, none spent
        waiting for its turn (issue 46: they expired in the pool's queue,
        backed off together and came back as one herd, a burst a minute)."""
        while self._opening < self._opens and self._queue:
            entry = self._queue.popleft()
            if entry.phase != "queued":
                continue  # ended while it waited
            if entry.dropped or entry.stopped() or self._stop:
                self._end(entry)
                continue
            entry.phase = "opening"
            self._opening += 1
            if not self._run(functools.partial(self._opening_of, entry)):  # closing
                self._opening -= 1
                self._end(entry)

    def _opening_of(self, entry: _Entry) -> None:
        """One open, on the pool: bounded by its Deadline, from now."""
        fault: Exception | None = None
        try:
            entry.stream.open(entry.state.deadline())
        except Exception as exc:
            fault = exc
        if self._stop:  # closed meanwhile: nobody will register it
            entry.state.began()
            entry.state.close()
            return
        self._post(lambda: self._opened(entry, fault))

    def _run(self, work: Callable[[], None]) -> bool:
        """``work`` on the opens' pool (it blocks); False when closing."""
        submit = self._submit
        if submit is None:
            if self._pool is None:
                self._pool = threads.pool(self._opens, f"{self._name}-open")
            submit = self._pool.submit
        try:
            submit(work)
        except RuntimeError:
            return False
        return True

    def _check(self, entry: _Entry, inbox: Inbox) -> None:
        """A quiet Inbox stream's check, on the pool (the next timer is armed
        when it is over: one check at a time)."""

        def checking() -> None:
            fault: Exception | None = None
            try:
                inbox.check(entry.state.deadline())  # from its start on the pool
            except Exception as exc:
                fault = exc
            self._post(lambda: self._checked(entry, inbox, fault))

        self._run(checking)

    def _checked(self, entry: _Entry, inbox: Inbox, fault: Exception | None) -> None:
        if entry.fileobj is not inbox or entry.phase != "open":
            return  # it moved on meanwhile
        if fault is not None:
            self._fail(entry, fault)
        else:
            self._arm(entry, self._clock() + inbox.quiet)

    def _opened(self, entry: _Entry, fault: Exception | None) -> None:
        self._opening -= 1
        try:
            self._took(entry, fault)
        finally:
            self._next()  # the freed turn: the next queued open

    def _took(self, entry: _Entry, fault: Exception | None) -> None:
        state = entry.state
        if fault is None:
            state.began()
        if entry.dropped or entry.stopped() or self._stop:
            state.close()
            self._end(entry)
            return
        if fault is not None:
            self._fail(entry, fault)
            return
        try:
            state.opened()
            fileobj = entry.stream.selectable()
            if fileobj is None:
                raise RuntimeError("an opened stream has nothing to select on")
            if not isinstance(fileobj, Inbox):
                self._selector.register(fileobj, selectors.EVENT_READ, entry)
        except Exception as exc:
            self._fail(entry, exc)
            return
        entry.fileobj, entry.phase, entry.last = fileobj, "open", self._clock()
        if isinstance(fileobj, Inbox):  # woken by a put, checked when quiet
            self._arm(entry, entry.last + fileobj.quiet)
            fileobj.bind(lambda: self._post(lambda: self._readable(entry)))
            return
        self._arm(entry, entry.last + state.pacing.idle)
        self._readable(entry)  # what came with the stream's head

    def _readable(self, entry: _Entry) -> None:
        if entry.phase != "open":
            return
        if entry.dropped or entry.stopped():
            self._end(entry)
            return
        try:
            items = entry.stream.read_ready()
            if items is None:
                return  # no byte yet (a partial TLS record)
            entry.last = self._clock()
            entry.state.arrived(items)
        except Exception as exc:  # every one: a stream never dies in silence
            self._fail(entry, exc)

    def _unregister(self, entry: _Entry) -> None:
        fileobj, entry.fileobj = entry.fileobj, None
        if isinstance(fileobj, Inbox):
            fileobj.bind(None)
        elif fileobj is not None:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(fileobj)

    def _fail(self, entry: _Entry, fault: Exception) -> None:
        """The one path after any exception (:meth:`Listening.failed`)."""
        self._unregister(entry)
        entry.state.close()
        if entry.dropped or entry.stopped() or self._stop:
            self._end(entry)
            return
        wait = entry.state.failed(fault)
        entry.phase = "waiting"
        self._arm(entry, self._clock() + wait)

    def _end(self, entry: _Entry) -> None:
        if entry.phase == "ended":
            return
        was_opening = entry.phase == "opening"
        self._unregister(entry)
        entry.phase = "ended"
        self._entries.discard(entry)
        if not was_opening:  # an open in flight closes what it opened (_opened)
            with contextlib.suppress(Exception):
                entry.stream.close()
