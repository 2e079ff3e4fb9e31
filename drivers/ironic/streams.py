"""Redfish event streams inside Ironic's conductor: the periodic reads
answered from the BMC's own word, the BMC read as the safety net.

Ironic reads every node's power (and, since 34.0, its health) on every
``_sync_power_states`` pass. For a ``bmaas-redfish`` node whose service
streams its events (SSE, :mod:`bmaas.drivers.redfish.events`), this
conductor keeps one listener per service (address + credentials + TLS
setting) and a cached power state and health per node, kept current by the
stream. A periodic read (a shared lock, :mod:`bmaas.drivers.ironic.rules`)
is answered from that cache while the stream is up; an action's read (an
exclusive lock) always asks the BMC.

::

    Ironic's sync thread (shared lock)          listener (one per service: all
                                                on one reactor thread, bmaas.reactor)
    ----------------------------------          ---------------------------------
    answer(node): registers it (lazily,         open (bounded: a Deadline)
      only if this conductor owns it)             ok    -> up, epoch + 1: its nodes
      cached power -> no BMC request                       read at their next pass
      None -> read the BMC, then                  fault -> down; paced back-off
        reading()/learned(): the cache        read (idle limit) -> news -> cache
        holds what the BMC said                   over the rate -> not trusted:
    health(node): with the cached power,                       node read next pass
      the cached health                         nobody left (moved, deleted) -> ends

**When the BMC is read anyway** (:meth:`Streams.answer` returns None): the
node's stream is absent, down, or opened after the node's last read (what
happened in between is not known: the first pass reconciles); news said
"something changed" without saying what (``ResourceChanged``, a transition,
a flood); news came in a POST to the push listener (whoever knows the
subscription's Context can send one: it says when to ask the BMC, never
what to answer; several before the read make one read, and a node is read
for it at most once a window, :meth:`~bmaas.reactor.Pacing.look_at`, as
``bmaas sync``'s: news within the window waits for the first pass after
its edge); a power action
ran on the node since (:meth:`Streams.acted`);
and, as the safety net for a lost event, at the first pass after the
node's last BMC read is ``safety`` seconds old
(``[bmaas]events_safety_interval``, default :data:`SAFETY_INTERVAL`, 40
minutes, as ``bmaas sync``'s): a time bound, not a number of passes, so a
streamed node costs its BMC the same whatever Ironic's sync interval. A
live stream proves the stream, not the API: the node's API is also read
every ``liveness`` seconds (``[bmaas]events_liveness_interval``, default
300: 12 reads per node-hour), each node at its own phase
(:mod:`bmaas.liveness`, the sync's rule); each sweep tells ``hold`` (the
conductor's :meth:`~bmaas.pool.DriverPool.hold`) the streamed nodes, whose
sessions then wait for their next read, as ``bmaas sync``'s do, rather than
idling out after two sync intervals and logging in again at every liveness
read (three requests for one). A read that fails leaves the
node due, so it is read every pass until one is good: Ironic counts the
failures (``power_state_sync_max_retries``) and fences a hung API behind a
live stream as it fences a polled one.

**One subscription per service, on the conductor that owns the nodes.**
Only the periodic reads register a node, and Ironic makes them only for the
nodes its hash ring maps to this conductor; the ``owner`` check (the hash
ring) is asked again at each sweep, and a node not read for ``expire``
seconds leaves -- once the sync has read three times as many nodes here as
are streamed since (three passes' worth), or has read none at all for
``expire``: a pass over 10,000 nodes outlasts any interval (one conductor's
first pass opened some 700 streams a minute on 2 cores), and a node let go
before the pass came back to it had its stream closed and opened again at
every read, for ever; a sweeper thread (:meth:`Streams.run_sweeper`) sweeps as
well, so a conductor left with no streamed node to read still lets go. A
service with no node left is closed (its SSE subscription ends with the
connection; a push subscription is deleted); after a takeover or a restart
the conductor that now reads the nodes subscribes at its first pass.

No Ironic import here: the Ironic side (options, hash ring, the task) is
:mod:`bmaas.drivers.ironic.host`, which builds the streams as a part of the
conductor's runtime (their threads are the runtime's).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from bmaas import clock as _clock
from bmaas import faulttext, threads
from bmaas.driver import PowerState
from bmaas.drivers.ironic.answers import Answer, Miss, NodeRef, fingerprint
from bmaas.drivers.ironic.listener import Listener, Service, service_stream
from bmaas.events import SAFETY_INTERVAL, News, Pacing, Stream
from bmaas.faults import BmaasError
from bmaas.liveness import LIVENESS_INTERVAL, Liveness
from bmaas.policy import Reopen, policy_for
from bmaas.reactor import Reactor

__all__ = [
    "HEALTH_WITH_POWER",
    "MAX_STREAMS",
    "SAFETY_INTERVAL",
    "Answer",
    "Miss",
    "NodeRef",
    "Streams",
    "fingerprint",
]

LOG = logging.getLogger(__name__)

#: seconds a cached power answer carries the node's cached health: Ironic
#: reads health right after the power read of the same pass
HEALTH_WITH_POWER = 10.0
#: event streams open at once: far above a conductor's fleet (Ironic's
#: reference architecture: 300 nodes; 10,000 measured), a bound, not a plan;
#: SSE streams share one reactor thread (a descriptor each)
MAX_STREAMS = 20000
_ON_OFF = (PowerState.ON, PowerState.OFF)


@dataclasses.dataclass
class _Book:
    ref: NodeRef
    service: str
    system: str
    power: PowerState | None = None
    source: str = "read"
    learned_at: float = 0.0
    health: str | None = None
    health_known: bool = False
    read_at: float | None = None
    read_epoch: int = -1
    reconcile: bool = True
    #: pushed news named it since its last read: the next read asks the BMC
    #: (once the window of the last read it asked for is over: ``looked``)
    pushed: bool = False
    looked: float | None = None
    #: bumped by every piece of news (a read that overlapped news is not kept)
    seq: int = 0
    seen_at: float = 0.0
    #: the registry's read count at its last read (:meth:`Streams.sweep`)
    seen_tick: int = 0
    answered_at: float | None = None


@dataclasses.dataclass(frozen=True)
class _Reading:
    seq: int
    epoch: int


StreamOf = Callable[[Service, dict[str, str]], Stream]


class Streams:
    """The conductor's listeners and the cache they keep (the module doc).

    ``safety``: seconds after its last BMC read a streamed node is read
    again; ``liveness``: seconds between its API's liveness reads (0:
    none). ``interval`` is Ironic's sync interval: a node not read for
    ``expire`` seconds (default three intervals, at least a minute) leaves,
    once three passes' worth of reads went by without it, or none at all.
    ``hold(labels, idle)`` is told the streamed nodes at each sweep.
    ``stream_of``, ``owner``, ``spawn``, ``sleep`` (the sweeper's:
    ``sleep(stop, seconds)``, ending early when ``stop`` is set),
    ``reactor`` (tests step their own), ``clock`` are seams for tests."""

    def __init__(
        self,
        *,
        safety: float = SAFETY_INTERVAL,
        liveness: float = LIVENESS_INTERVAL,
        interval: float = 120.0,
        expire: float | None = None,
        max_streams: int = MAX_STREAMS,
        pacing: Pacing | None = None,
        stream_of: StreamOf = service_stream,
        owner: Callable[[NodeRef], bool] = lambda ref: True,
        hold: Callable[[Iterable[str], float], object] = lambda labels, idle: None,
        spawn: Callable[[Callable[[], None], str], Any] = threads.spawn,
        sleep: Callable[[threading.Event, float], object] = threading.Event.wait,
        clock: _clock.ClockFn = _clock.monotonic,
        reactor: Reactor | None = None,
    ) -> None:
        if not safety > 0:
            raise ValueError("safety must be a positive number of seconds")
        self.safety, self.interval, self.max_streams = safety, interval, max_streams
        self.liveness = Liveness(liveness)
        self.expire = expire if expire is not None else max(3 * interval, 60.0)
        self.pacing = pacing or Pacing()
        self._stream_of, self._owner, self._spawn, self._hold = stream_of, owner, spawn, hold
        self._sleep, self._clock = sleep, clock
        self._lock = threading.RLock()
        #: woken when trusted news marks a node changed, and at close
        #: (:meth:`wait_news`: the news periodic records it as it comes)
        self._news_came = threading.Condition(self._lock)
        #: how many times trusted news marked nodes changed (:meth:`news_mark`)
        self._news_count = 0
        self._books: dict[str, _Book] = {}
        self._listeners: dict[str, Listener] = {}
        self._swept = clock()
        #: periodic reads seen (every node's, answered or not), and the last one's time
        self._ticks = 0
        self._last_read = clock()
        self._closed = False
        #: set by close(): ends the sweeper (run_sweeper)
        self._stopped = threading.Event()
        self._full_warned = False
        self._reactor = reactor
        #: nodes trusted news named since :meth:`changed` last looked
        self._changed: set[str] = set()
        #: counters (tests, logs)
        self.opened_count = self.faults = self.flooded = self.answered = self.pushed = 0

    # -- the sync's side -----------------------------------------------------------

    def answer(self, ref: NodeRef) -> Answer | Miss:
        """A periodic read of ``ref`` answered from its stream, or a
        :class:`Miss` saying why the BMC is read (then :meth:`reading` /
        :meth:`learned`). Registers the node (starting its service's
        listener) on first sight."""
        self.sweep()
        now = self._clock()
        with self._lock:
            book = self._books.get(ref.uuid)
            if book is not None and book.ref.fingerprint != ref.fingerprint:
                self._forget(ref.uuid)  # new driver_info: maybe another service
                book = None
        if book is None:
            if not self._owner(ref):  # outside the lock: the hash ring may load
                return Miss("not this conductor's node (hash ring)")
            with self._lock:
                book = self._books.get(ref.uuid) or self._register(ref, now)
                if book is None:
                    return Miss("no stream: streams closed or no redfish_address")
        with self._lock:
            self._ticks += 1
            book.seen_at, book.seen_tick, self._last_read = now, self._ticks, now
            listener = self._listeners.get(book.service)
            if listener is None and not self._closed and book.ref.uuid in self._books:
                service = Service.of(book.ref.info)
                if service is not None:
                    self._attach(book, service)  # room again (another service closed)
                listener = self._listeners.get(book.service)
            why = self._why_read(book, listener, now)
            if why is not None:
                return Miss(why)
            self.answered += 1
            return self._answered(book, now)

    def vouched(self, uuid: str, driver_info: str) -> Answer | None:
        """What ``uuid``'s stream says now, when it vouches for it, else
        None; ``driver_info`` is the node's :func:`fingerprint`. The answer
        the sync's next read would get, less the reads that probe the BMC
        (safety, liveness: they doubt the API, not the news): news recorded
        between passes (:mod:`bmaas.drivers.ironic.news`). The health rides
        with it (:meth:`health`), as with a pass's answer."""
        now = self._clock()
        with self._lock:
            book = self._books.get(uuid)
            if book is None or book.ref.fingerprint != driver_info:
                return None  # unknown here, or new driver_info: the pass sees to it
            if book.pushed or self._doubt(book, self._listeners.get(book.service)) is not None:
                return None
            return self._answered(book, now)

    def _answered(self, book: _Book, now: float) -> Answer:
        assert book.power is not None
        assert book.read_at is not None
        book.answered_at = now
        return Answer(
            book.power,
            book.source,
            now - book.learned_at,
            now - book.read_at,
            min(book.read_at + self.safety, self.liveness.next(book.ref.uuid, book.read_at)) - now,
        )

    def _why_read(self, book: _Book, listener: Listener | None, now: float) -> str | None:
        """Why ``book``'s cache may not answer now (the module doc's list), or None."""
        why = self._doubt(book, listener)
        if why is not None:
            return why
        if book.pushed and now >= self.pacing.look_at(book.looked, now):
            book.looked = now  # news until the window's edge waits for the pass after it
            return "pushed news (an Event POSTed to the listener: the BMC says what is)"
        assert book.read_at is not None
        if now - book.read_at >= self.safety:
            return f"safety read (last read {now - book.read_at:.0f} s ago)"
        if self.liveness.due(book.ref.uuid, book.read_at, now):
            return f"liveness read (its API, every {self.liveness.interval:.0f} s)"
        return None

    def _doubt(self, book: _Book, listener: Listener | None) -> str | None:
        """Why the stream cannot vouch for ``book``'s cache, or None."""
        if listener is None:
            return "no stream ([bmaas]events_max_streams reached)"
        if listener.nodes.get(book.system) != book.ref.uuid:
            return "no redfish_system_id on a service with several nodes"
        if not listener.up:
            return "its event stream is down"
        if book.reconcile or book.power is None or book.read_at is None:
            return "reconcile (first read, news without a state, or a power action)"
        if book.read_epoch != listener.epoch:
            return "reconcile (the stream opened since its last read)"
        return None

    def health(self, uuid: str) -> tuple[bool, str | None]:
        """(True, health) when this pass's power came from the stream and the
        health is known (the BMC's last word or an event); else (False, None):
        read it."""
        now = self._clock()
        with self._lock:
            book = self._books.get(uuid)
            if (
                book is None
                or not book.health_known
                or book.answered_at is None
                or now - book.answered_at > HEALTH_WITH_POWER
            ):
                return False, None
            return True, book.health

    def reading(self, uuid: str) -> _Reading | None:
        """Before a periodic BMC read of ``uuid``: what :meth:`learned` checks."""
        with self._lock:
            book = self._books.get(uuid)
            if book is None:
                return None
            listener = self._listeners.get(book.service)
            epoch = listener.epoch if listener is not None and listener.up else -1
            return _Reading(book.seq, epoch)

    def learned(self, uuid: str, token: _Reading | None, power: PowerState) -> None:
        """What the BMC said to the periodic read :meth:`reading` began. Kept
        unless news arrived meanwhile (then the next pass reads again)."""
        if token is None:
            return
        now = self._clock()
        with self._lock:
            book = self._books.get(uuid)
            if book is None or book.seq != token.seq:
                return
            if power not in _ON_OFF:
                book.reconcile = True  # in transition: read it again
                return
            book.power, book.source, book.learned_at = power, "read", now
            book.read_at, book.read_epoch = now, token.epoch
            book.reconcile = book.pushed = False
            book.answered_at = None

    def learned_health(self, uuid: str, health: str | None) -> None:
        """The health the BMC read of this pass carried."""
        with self._lock:
            book = self._books.get(uuid)
            if book is not None:
                book.health, book.health_known = health, True

    def changed(self) -> set[str]:
        """The nodes whose trusted news (a power state, a health) came since
        the last call, taken: what :mod:`bmaas.drivers.ironic.news` records on
        Ironic's node between passes; it gives back with :meth:`again` those
        it could not record yet. Empty for a fleet at rest."""
        with self._lock:
            taken, self._changed = self._changed, set()
            return taken

    def again(self, uuids: set[str]) -> None:
        """Nodes :meth:`changed` gave whose news waits for the next look
        (not news: :meth:`wait_news` is not woken for them)."""
        with self._lock:
            self._changed |= uuids & self._books.keys()

    def news_mark(self) -> int:
        """Where the news stands now: :meth:`wait_news` waits for news after it."""
        with self._lock:
            return self._news_count

    def wait_news(self, mark: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for trusted news after ``mark``
        (:meth:`news_mark`); True when it came (perhaps before the call),
        False at the timeout or once the streams are closed. Nodes given
        back by :meth:`again` are no news: a node that stays locked is
        looked at again with the next news, not in a loop."""
        with self._news_came:
            self._news_came.wait_for(
                lambda: self._news_count != mark or self._closed, max(0.0, timeout)
            )
            return self._news_count != mark and not self._closed

    def acted(self, uuid: str) -> None:
        """A power action ran on ``uuid``: its next periodic read asks the BMC."""
        with self._lock:
            book = self._books.get(uuid)
            if book is not None:
                book.reconcile = True

    # -- the fleet -----------------------------------------------------------------

    def _register(self, ref: NodeRef, now: float) -> _Book | None:
        if self._closed:
            return None
        service = Service.of(ref.info)
        if service is None:
            return None
        system = ref.info.redfish_system_id or "*"
        if system != "*" and not system.startswith("/"):
            system = f"/redfish/v1/Systems/{system}"
        book = self._books[ref.uuid] = _Book(ref, service.key, system.rstrip("/"), seen_at=now)
        self._attach(book, service)
        return book

    def _attach(self, book: _Book, service: Service) -> None:
        """Put ``book`` on its service's listener, starting one if there is
        room (``max_streams``); without room the node is read every pass."""
        listener = self._listeners.get(service.key)
        if listener is not None:
            self._join(listener, book)
            return
        if len(self._listeners) >= self.max_streams:
            if not self._full_warned:
                LOG.warning(
                    "bmaas: %d event streams open ([bmaas]events_max_streams): nodes of "
                    "more Redfish services are read from their BMCs every pass",
                    len(self._listeners),
                )
                self._full_warned = True
            return
        nodes: dict[str, str] = {}
        listener = Listener(service, nodes, self._stream_of(service, nodes))
        self._listeners[service.key] = listener
        self._join(listener, book)
        listener.reactor = self._reactor_started()
        listener.entry = listener.reactor.add(
            listener, listener.stream, self, self.pacing, stopped=listener.own.is_set
        )

    def _reactor_started(self) -> Reactor:
        """The streams' reactor (its thread started by ``spawn``: the runtime's)."""
        if self._reactor is None:
            self._reactor = Reactor(clock=self._clock, spawn=self._spawn)
        self._reactor.start()  # once
        return self._reactor

    def _join(self, listener: Listener, book: _Book) -> None:
        """Map ``book``'s system on the stream. A node without a system path
        is streamed only while it is alone on its service (no one could tell
        whose event it is); otherwise it is read every pass."""
        nodes = listener.nodes
        if book.system == "*" and nodes:
            return
        nodes.pop("*", None)
        nodes[book.system] = book.ref.uuid

    def _forget(self, uuid: str) -> None:
        book = self._books.pop(uuid, None)
        if book is None:
            return
        listener = self._listeners.get(book.service)
        if listener is None:
            return
        if listener.nodes.get(book.system) == uuid:
            del listener.nodes[book.system]
        if not listener.nodes:
            self._drop(listener)

    def _drop(self, listener: Listener) -> None:
        """End a listener: its thread stops, its stream (and subscription) closes."""
        self._listeners.pop(listener.service.key, None)
        listener.drop()
        LOG.info(
            "bmaas: event stream of %s closed: no node of it left here", listener.service.address
        )

    def sweep(self, *, force: bool = False) -> None:
        """At most once per sync interval: nodes this conductor no longer
        owns (the hash ring) or no longer reads (``expire``) leave, a
        service without nodes closes, and ``hold`` keeps the sessions of
        the nodes whose stream is up until their next safety or liveness
        read (plus two sync intervals: a late pass)."""
        now = self._clock()
        with self._lock:
            if not force and now - self._swept < min(self.interval, 60.0):
                return
            self._swept = now
            books = list(self._books.values())
            ticks, idle = self._ticks, now - self._last_read > self.expire
        # not read for ``expire`` while three passes' worth of other reads
        # went by (a long pass has not come back to it yet otherwise), or
        # while nothing at all was read here
        passes = 3 * len(books)
        stale = [
            b.ref.uuid
            for b in books
            if now - b.seen_at > self.expire and (idle or ticks - b.seen_tick > passes)
        ]
        moved = [b.ref.uuid for b in books if b.ref.uuid not in stale and not self._owner(b.ref)]
        with self._lock:
            for uuid in stale + moved:
                self._forget(uuid)
            up = {key for key, listener in self._listeners.items() if listener.up}
            held = [b.ref.label for b in self._books.values() if b.service in up]
        read_every = min(self.safety, self.liveness.interval or self.safety)
        self._hold(held, read_every + 2 * self.interval)
        if moved:
            LOG.info(
                "bmaas: %d nodes now belong to another conductor: not streamed here", len(moved)
            )

    def run_sweeper(self) -> None:
        """A thread of its own: :meth:`sweep` once a period (the sync
        interval, at most a minute) until :meth:`close`. The sync's reads
        sweep too, but only while this conductor still reads a streamed
        node: one whose nodes all moved to another conductor (the hash
        ring, a conductor group) or were deleted would keep their streams
        (and the BMCs' subscriptions) open for good."""
        period = min(self.interval, 60.0)
        while not self._sleep(self._stopped, period) and not self._stopped.is_set():
            try:
                self.sweep()
            except Exception:  # the hash ring's database, say: next period
                LOG.exception("bmaas: sweeping the event streams failed; trying again")

    def summary(self) -> dict[str, int]:
        with self._lock:
            return {
                "streams": len(self._listeners),
                "up": sum(1 for s in self._listeners.values() if s.up),
                "nodes": len(self._books),
                "opened": self.opened_count,
                "faults": self.faults,
                "answered": self.answered,
                "flooded": self.flooded,
                "pushed": self.pushed,
            }

    def close(self, timeout: float = 5.0) -> None:
        """Stop every listener (the reactor closes each stream) within ``timeout``."""
        with self._lock:
            self._closed = True
            self._stopped.set()
            listeners = list(self._listeners.values())
            for listener in listeners:
                self._listeners.pop(listener.service.key, None)
                listener.drop()
            self._books.clear()
            self._changed.clear()
            self._news_came.notify_all()
        if self._reactor is not None:
            self._reactor.close(timeout)

    # -- what the listeners tell (their bmaas.events.Sink) --------------------------

    def opened(self, listener: Listener) -> None:
        with self._lock:
            if self._listeners.get(listener.service.key) is not listener:
                return  # dropped meanwhile
            listener.up = True
            listener.told_late = False  # its next lasting fault is news again
            listener.epoch += 1  # every node's last read predates it: each reconciles
            self.opened_count += 1
            count = len(listener.nodes)
        via = getattr(listener.stream, "mode", None) or "sse"
        LOG.info(
            "bmaas: event stream of %s up (%s, %d nodes): their periodic power reads are "
            "answered from it after one read each, the BMC read every %.0f s",
            listener.service.address,
            "push subscription" if via == "push" else "SSE",
            count,
            self.safety,
        )

    def lost(self, listener: Listener, fault: Exception, wait: float, *, opening: bool) -> None:
        """How loud is the policy table's ``stream`` column's: a fault opened
        again ``late`` (no EventService, a rejected password, a malformed
        stream) is a lasting state of that BMC, said at INFO once until the
        stream opens again (DEBUG meanwhile: it comes back every 600 s); one
        opened again ``soon`` (unreachable, a timeout, a stream that ended)
        is a WARNING each time."""
        with self._lock:
            listener.up = False
            self.faults += 1
            count = len(listener.nodes)
            late = policy_for(fault).stream is Reopen.LATE
            told, listener.told_late = listener.told_late, listener.told_late or late
        # not a BmaasError: a bug, logged with its traceback by the loop
        what = faulttext.format_fault(fault) if isinstance(fault, BmaasError) else "a bug"
        if late:
            LOG.log(
                logging.DEBUG if told else logging.INFO,
                "bmaas: %s %s (%s): its %d nodes are read from the BMC every pass; "
                "asked again in %.0f s",
                "no event stream at" if opening else "event stream dropped at",
                listener.service.address,
                what,
                count,
                wait,
            )
            return
        LOG.warning(
            "bmaas: event stream of %s %s (%s): its %d nodes are read from the BMC every "
            "pass until it is back; next try in %.1f s",
            listener.service.address,
            "did not open" if opening else "lost",
            what,
            count,
            wait,
        )

    def news(self, listener: Listener, trusted: Sequence[News], flood: Sequence[News]) -> None:
        now = self._clock()
        marked = False
        with self._lock:
            for news in flood:
                book = self._book_of(listener, news)
                if book is not None:
                    self.flooded += 1
                    book.seq += 1
                    book.reconcile = True  # not trusted blindly: read it
            for news in trusted:
                book = self._book_of(listener, news)
                if book is None:
                    continue
                book.seq += 1
                if news.pushed:  # whoever knows the Context: when to read, not what is
                    self.pushed += 1
                    book.pushed = True
                    continue
                health = getattr(news, "health", None)
                if news.power in _ON_OFF:
                    if news.power != book.power:
                        LOG.info(
                            "bmaas: %s: power %s by its BMC's event %s",
                            book.ref.label,
                            news.power,
                            news.message_id,
                        )
                    book.power, book.learned_at = news.power, now
                    book.source = f"event {news.message_id}"
                elif health is None:
                    book.reconcile = True  # a change it does not name, or a transition
                if health is not None:
                    book.health, book.health_known = str(health), True
                if news.power in _ON_OFF or health is not None:
                    self._changed.add(book.ref.uuid)
                    marked = True
            if marked:
                self._news_count += 1
                self._news_came.notify_all()

    def _book_of(self, listener: Listener, news: News) -> _Book | None:
        book = self._books.get(news.node)
        if book is None or book.service != listener.service.key:
            return None  # no longer ours
        return book
