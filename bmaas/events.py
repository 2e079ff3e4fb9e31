"""Power state from the BMC's own word: event streams feed the sync.

A :class:`EventWatch` keeps one listener per BMC service that offers an
event stream (the protocol's edge is the driver's ``bmaas.events`` entry
point, :func:`bmaas.registry.capability`, loaded when a node of that driver
is seen, so the core imports no protocol code): all of them on one thread
(:mod:`bmaas.reactor`, opens on a pool of 8): an SSE stream's socket, or a
push subscription's inbox that the push listener fills. Listeners only *receive*: each
piece of news goes on a queue, and the sync applies it to the store in its
own thread (:meth:`EventWatch.wait`, which the loop waits on between
passes), so the store has one writer, as before.

The poll becomes the safety net (:meth:`EventWatch.to_read`): a node whose
stream is up is read once its last read is ``safety`` seconds old
(:data:`SAFETY_INTERVAL`), a time bound so the BMC's load does not depend
on the pass interval; a node whose stream is down or absent is read every
pass; a node whose read failed is read every pass until one is good
(:meth:`EventWatch.recheck`), and a live stream proves the stream, not the
API, so a streamed node is also read every ``liveness`` seconds
(:mod:`bmaas.liveness`). The defaults, the reconcile rules and what a
streamed node costs its BMC: docs/operator.md, "Events first, polling as
the safety net".

::

    listener (one per service: the reactor)     sync thread
    ---------------------------------           -----------
    open (bounded by a Deadline: bmc_timeout)
      ok   -> nodes "up", marked to reconcile
      any exception -> nodes "down"; wait       to_read(names, now) -> reads
               (the policy's stream column)     pass: record reads
    read (idle limit) -> news -> bucket         wait(until): apply news at
      over the rate  -> dropped, nodes marked     once (source=event, age),
                        to reconcile              until the next pass

**Whose word is believed** (docs/operator.md): news on a stream bmaas
opened itself is the BMC's word and is written at once; news POSTed to the
push listener (:attr:`News.pushed`) only says *when* to look
(:meth:`EventWatch.to_look`): one authenticated read, paced per node
(:meth:`~bmaas.reactor.Pacing.look_at`), and only its answer is written.

Every host runs the same listener decisions on a reactor,
:class:`~bmaas.reactor.Listening`: after any exception the stream is
closed, its nodes polled, and it is opened again when the policy table's
``stream`` column says (:class:`~bmaas.policy.Reopen`, :class:`Backoff`). A
listener never dies and never gives up; a flood beyond ``rate`` events per
second is dropped and its nodes read at the next pass.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from bmaas import registry
from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.liveness import LIVENESS_INTERVAL, Liveness
from bmaas.reactor import (
    LOOK_EVERY,
    Backoff,
    Listening,
    News,
    Pacing,
    Reactor,
    Sink,
    Stream,
    TokenBucket,
    fd_room,
)

if TYPE_CHECKING:  # the command's token; importing bmaas.provision here would load it all
    from bmaas.provision.cancel import CancelToken

__all__ = [
    "SAFETY_INTERVAL",
    "Applied",
    "Backoff",
    "EventWatch",
    "Listening",
    "News",
    "Pacing",
    "PushSettings",
    "Sink",
    "Stream",
    "TokenBucket",
    "edge_streams",
    "record_news",
]

LOG = logging.getLogger(__name__)

#: seconds: a node whose stream is up is read once its last read is this old
#: (40 minutes: 1.5 reads per node-hour, under 2 with a reconnect every few hours)
SAFETY_INTERVAL = 2400.0
#: news kept for reports and tests (the count is exact)
KEPT = 1024
#: the listeners' default back-off
_BACKOFF = Backoff()


#: records -> (streams, nodes left out with why), per driver name
StreamsOf = Callable[[Sequence[Any]], tuple[Sequence[Stream], dict[str, str]]]


@dataclasses.dataclass(frozen=True)
class PushSettings:
    """Where bmaas listens for pushed events (Redfish ``EventDestination``
    POSTs) and what it tells the BMCs: ``url`` (default
    ``http(s)://host:port/bmaas/events``); a certificate (``certfile``,
    ``keyfile``) makes it HTTPS. ``prefer``: push even where SSE is offered."""

    host: str = "127.0.0.1"
    port: int = 0
    url: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    prefer: bool = False


def edge_listener(driver: str, settings: PushSettings) -> Any | None:
    """A started push listener of ``driver``'s push edge (the
    ``bmaas.events.push`` entry point's ``listener(settings)``), None when
    that driver takes no pushed events."""
    edge = registry.capability(registry.PUSH_GROUP, driver)
    make = getattr(edge, "listener", None)
    return make(settings) if callable(make) else None


def edge_push_streams(driver: str, listener: Any, prefer: bool) -> StreamsOf | None:
    """``driver``'s push edge's ``services`` bound to ``listener``."""
    found = getattr(registry.capability(registry.PUSH_GROUP, driver), "services", None)
    if not callable(found):
        return None

    def streams(records: Sequence[Any]) -> tuple[Sequence[Stream], dict[str, str]]:
        out: tuple[Sequence[Stream], dict[str, str]] = found(
            records, push=listener, prefer_push=prefer
        )
        return out

    return streams


def edge_streams(driver: str) -> StreamsOf | None:
    """``driver``'s event streams (the ``bmaas.events`` entry point named by
    the driver: :func:`bmaas.registry.capability`), None when it offers none
    (IPMI: polling as today)."""
    found = registry.capability(registry.EVENTS_GROUP, driver)
    return found if callable(found) else None


@dataclasses.dataclass
class _Node:
    up: bool = False
    reconcile: bool = True
    last_read: float | None = None  # when the pass that last read it began
    looked: float | None = None  # when pushed news last had it read (the spacing's)


@dataclasses.dataclass
class Applied:
    """One piece of news as the sync applied it."""

    node: str
    power: PowerState
    message_id: str
    #: seconds between the BMC's EventTimestamp and the store write (None: no stamp)
    age: float | None


class EventWatch:
    """Listeners for every event-capable service of a fleet, and the book
    the sync reads: which nodes' streams are up, what to read this pass.

    ``safety``: seconds after its last read a streamed node is read again;
    ``liveness``: seconds between its API's liveness reads (0: none);
    ``look_every``: the spacing of the reads pushed news asks for.
    ``streams_of`` (tests) replaces :func:`edge_streams`; ``reactor`` the
    one the listeners ride (tests step their own; default: one built at
    the first stream, its thread started), ``clock`` their clock; ``wall``
    the clock EventTimestamps are compared to."""

    def __init__(
        self,
        *,
        safety: float = SAFETY_INTERVAL,
        liveness: float = LIVENESS_INTERVAL,
        bmc_timeout: float = 10.0,
        idle: float = 300.0,
        backoff: Backoff = _BACKOFF,
        absent_retry: float = 600.0,
        rate: float = 20.0,
        burst: float = 100.0,
        look_every: float = LOOK_EVERY,
        streams_of: Callable[[str], StreamsOf | None] = edge_streams,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        stop: CancelToken | None = None,
        push: PushSettings | None = None,
        reactor: Reactor | None = None,
    ) -> None:
        if not safety > 0:
            raise ValueError("safety must be a positive number of seconds")
        self.safety = safety
        self.liveness = Liveness(liveness)
        self.pacing = Pacing(bmc_timeout, idle, backoff, absent_retry, rate, burst, look_every)
        self._streams_of, self._clock, self._wall = streams_of, clock, wall
        #: push listeners, one per driver that takes pushed events (``push``)
        self.push = push
        self._listeners: dict[str, Any] = {}
        self._stop = threading.Event()
        #: the command's own stop (a signal): ends waits and listeners too
        self._outer = threading.Event()
        if stop is not None:
            self.bind_stop(stop)
        self._cond = threading.Condition()
        self._news: collections.deque[tuple[News, float]] = collections.deque()
        self._nodes: dict[str, _Node] = {}
        self._streams: dict[str, Stream] = {}
        #: every stream on one thread (bmaas.reactor)
        self._reactor = reactor
        self._entries: dict[str, Any] = {}
        self._fingerprint: int | None = None
        self._known: dict[str, PowerState] = {}
        #: nodes pushed news asked to be read (in order, each once) -> from when
        self._look: dict[str, float] = {}
        #: counters for the report and the bench
        self.opened_count = 0
        self.faults = 0
        self.flooded = 0
        #: pushed news taken (each a reason to read), and reads it caused
        self.pushed = 0
        self.looked = 0
        #: the latest news applied (the count is :attr:`applied_total`)
        self.applied: collections.deque[Applied] = collections.deque(maxlen=KEPT)
        self.applied_total = 0

    # -- the fleet ---------------------------------------------------------------

    def watch(self, records: Sequence[Any], fingerprint: int | None = None) -> None:
        """Listen to the services of ``records`` (this worker's nodes): start
        a listener for each new one, stop those no longer wanted (their
        nodes went to another worker, or left the store). Cheap when
        nothing changed: the edge is asked only when the nodes' names or
        driver_info differ from the last call (``fingerprint``: the
        caller's digest of exactly that, when it has one)."""
        if fingerprint is None:
            fingerprint = hash(
                tuple(
                    (r.name, r.driver, json.dumps(r.driver_info, sort_keys=True, default=str))
                    for r in records
                )
            )
        if fingerprint == self._fingerprint:
            return
        self._fingerprint = fingerprint
        by_driver: dict[str, list[Any]] = collections.defaultdict(list)
        for record in records:
            by_driver[record.driver].append(record)
        wanted: dict[str, Stream] = {}
        for driver, group in by_driver.items():
            edge = self._edge(driver)
            if edge is None:
                continue
            streams, left_out = edge(group)
            for node, why in left_out.items():
                LOG.info("%s: no event stream (%s); polled", node, why)
            wanted.update((stream.key, stream) for stream in streams)
        for key in list(self._streams):
            old = self._streams[key]
            if key not in wanted or wanted[key].nodes != old.nodes:
                self._drop(key)
        new = [stream for key, stream in wanted.items() if key not in self._streams]
        self._fit(new)
        for stream in new:
            self._start(stream)

    def _fit(self, new: list[Stream]) -> None:
        """Keep to the open-file limit (a descriptor a stream, the soft
        limit raised to the hard one if needed: :func:`bmaas.reactor.fd_room`):
        the streams that do not fit are refused, in one line, and their
        nodes polled."""
        room = fd_room(len(new))
        if room < len(new):
            refused = new[room:]
            del new[room:]
            LOG.warning("%d event streams refused: the open-file limit has room for %d more; "
                        "their %d nodes are polled", len(refused), room,
                        sum(len(set(s.nodes.values())) for s in refused))  # fmt: skip

    def _edge(self, driver: str) -> StreamsOf | None:
        """The driver's streams: with push settings, the push edge where the
        driver has one (its listener started on first use)."""
        edge = self._streams_of(driver)
        if edge is None or self.push is None or self._streams_of is not edge_streams:
            return edge
        if driver not in self._listeners:
            self._listeners[driver] = edge_listener(driver, self.push)
        listener = self._listeners[driver]
        if listener is None:
            return edge
        return edge_push_streams(driver, listener, self.push.prefer) or edge

    def listener_urls(self) -> dict[str, str]:
        """Where each push listener takes events (driver -> URL)."""
        return {d: str(lst.url) for d, lst in self._listeners.items() if lst is not None}

    def _start(self, stream: Stream) -> None:
        with self._cond:
            for node in set(stream.nodes.values()):
                self._nodes.setdefault(node, _Node())
        self._streams[stream.key] = stream
        if self._reactor is None:
            self._reactor = Reactor(clock=self._clock)
        self._reactor.start()  # once
        self._entries[stream.key] = self._reactor.add(
            stream, stream, self, self.pacing, stopped=self._stopped
        )

    def _drop(self, key: str) -> None:
        """Stop one listener: the reactor's thread closes its stream."""
        stream = self._streams.pop(key)
        entry = self._entries.pop(key)
        if self._reactor is not None:
            self._reactor.drop(entry)
        with self._cond:
            for node in set(stream.nodes.values()):
                self._nodes.pop(node, None)
                self._known.pop(node, None)
                self._look.pop(node, None)

    def bind_stop(self, token: CancelToken) -> None:
        """End waits and listeners when ``token`` is cancelled (the command's
        signal): the token wakes :meth:`wait` itself, so a wait between
        passes sleeps its whole length -- no looks at the clock in slices,
        which were most of an idle sync's CPU once the streams kept quiet."""
        self._outer = token.event
        token.on_cancel(self.wake)

    def wake(self) -> None:
        """End the :meth:`wait` in progress (it returns if stopped, else
        goes on waiting for what is left of its time)."""
        with self._cond:
            self._cond.notify_all()

    def summary(self) -> dict[str, Any]:
        """Streams and nodes up, news applied, faults and floods so far."""
        with self._cond:
            up = sum(1 for b in self._nodes.values() if b.up)
            return {
                "streams": len(self._streams),
                "nodes_up": up,
                "nodes": len(self._nodes),
                "opened": self.opened_count,
                "faults": self.faults,
                "applied": self.applied_total,
                "flooded": self.flooded,
                "pushed": self.pushed,
                "looked": self.looked,
                **self._push_summary(),
            }

    def _push_summary(self) -> dict[str, Any]:
        live = {d: lst for d, lst in self._listeners.items() if lst is not None}
        if not live:
            return {}
        return {
            "push": {
                d: {"url": lst.url, "received": lst.received, "refused": lst.refused}
                for d, lst in live.items()
            }
        }

    def summary_line(self) -> str:
        s = self.summary()
        return (
            f"{s['nodes_up']}/{s['nodes']} nodes streamed, {s['applied']} applied since start, "
            f"{s['faults']} stream faults since start"
            + (f", {s['looked']} read for pushed events" if s["pushed"] else "")
        )

    def close(self, timeout: float = 5.0) -> None:
        """Stop every listener (each closes its stream) and wait ``timeout``
        at most in all: the reactor's thread, then the push listeners'
        pending subscription DELETEs (a courtesy; an earlier run's
        subscriptions are swept at the next start)."""
        deadline = Deadline.after(timeout)
        self._stop.set()
        if self._reactor is not None:
            self._reactor.close(deadline.left())  # it closes its streams
        for listener in self._listeners.values():
            if listener is not None:
                listener.close(deadline.left())
        with self._cond:
            self._cond.notify_all()

    def __enter__(self) -> EventWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what its listeners tell (their Sink) --------------------------------------

    def opened(self, stream: Stream) -> None:
        self.opened_count += 1
        self._mark(stream.nodes.values(), up=True)

    def lost(self, stream: Stream, fault: Exception, wait: float, *, opening: bool) -> None:
        self.faults += 1
        self._mark(stream.nodes.values(), up=False)
        what = "no event stream" if opening else "event stream lost"
        # a live stream lost is a WARNING, once a loss; its failed re-opens are INFO
        LOG.log(logging.INFO if opening else logging.WARNING,
                "%s: %s (%s); its nodes are polled, next try in %.0f s",
                stream.key, what, fault, wait)  # fmt: skip

    def news(self, stream: Stream, trusted: Sequence[News], flood: Sequence[News]) -> None:
        for news in trusted:
            if not news.pushed:  # the BMC's word, on bmaas's own connection
                self._offer(news)
        self._ask([news.node for news in trusted if news.pushed])
        self.flooded += len(flood)
        self._mark([news.node for news in flood], up=True)  # up, but read them

    def _ask(self, nodes: Sequence[str]) -> None:
        """Pushed news about ``nodes``: read them now (the sync's wait ends),
        or, within the window of a node's last such read, at its edge
        (:meth:`~bmaas.reactor.Pacing.look_at`; the wait ends then)."""
        if not nodes:
            return
        now = self._clock()
        with self._cond:
            self.pushed += len(nodes)
            for node in nodes:
                book = self._nodes.get(node)
                if book is not None:  # else no longer watched: not ours to read
                    at = self.pacing.look_at(book.looked, now)
                    self._look[node] = min(self._look.get(node, at), at)
            self._cond.notify_all()

    def _mark(self, nodes: Iterable[str], *, up: bool) -> None:
        with self._cond:
            for node in nodes:
                book = self._nodes.get(node)
                if book is not None:  # None: no longer watched (another worker's now)
                    book.up = up
                    book.reconcile = True

    def _offer(self, news: News) -> None:
        with self._cond:
            self._news.append((news, self._wall()))
            self._cond.notify_all()

    # -- the sync's side ---------------------------------------------------------

    def up(self, node: str) -> bool:
        with self._cond:
            book = self._nodes.get(node)
            return book is not None and book.up

    def to_read(self, names: Sequence[str], now: float) -> list[str]:
        """The nodes the pass beginning at ``now`` (the sync's clock) reads:
        every node without a live stream, every node to reconcile, each
        streamed node whose last read is ``safety`` seconds old, and each
        due its liveness read (:class:`~bmaas.liveness.Liveness`)."""
        out = []
        with self._cond:
            for name in names:
                book = self._nodes.get(name)
                if (
                    book is None
                    or not book.up
                    or book.reconcile
                    or book.last_read is None
                    or now - book.last_read >= self.safety
                    or self.liveness.due(name, book.last_read, now)
                ):
                    out.append(name)
                    self._look.pop(name, None)  # this read is after the news: it looks
                    if book is not None:
                        book.reconcile = False
                        book.last_read = now
        return out

    @property
    def read_every(self) -> float:
        """The longest a streamed node goes unread: the safety or the liveness interval."""
        return min(self.safety, self.liveness.interval or self.safety)

    def streamed(self, names: Sequence[str]) -> list[str]:
        """Those of ``names`` whose stream is up (their reads are the safety net's)."""
        with self._cond:
            return [n for n in names if (book := self._nodes.get(n)) is not None and book.up]

    def recheck(self, nodes: Iterable[str]) -> None:
        """Nodes whose read failed: read again at the next pass, and every
        pass until one is good (a BMC whose stream is up but whose reads
        fail must reach ``fault_after`` as fast as without events)."""
        with self._cond:
            for node in nodes:
                book = self._nodes.get(node)
                if book is not None:
                    book.reconcile = True

    def looking(self) -> bool:
        """Pushed news asked for reads that are due and have not run yet."""
        with self._cond:
            return self._looking()

    def _looking(self) -> bool:
        due = self._look_due()
        return due is not None and due <= self._clock()

    def look_due(self) -> float | None:
        """When the next read pushed news asked for is due (None: none asked)."""
        with self._cond:
            return self._look_due()

    def _look_due(self) -> float | None:
        return min(self._look.values(), default=None)

    def to_look(self, now: float) -> list[str]:
        """The nodes pushed news named whose read is due at ``now`` (the
        sync's clock; each once, however many pieces named it), to be read
        now by the sync; the others wait for their window's edge. That read
        is the node's pass read too: it reconciles, and the safety net and
        the spacing count from it."""
        with self._cond:
            out = [node for node, at in self._look.items() if at <= now and node in self._nodes]
            for node in [n for n, at in self._look.items() if at <= now or n not in self._nodes]:
                del self._look[node]
            for node in out:
                book = self._nodes[node]
                book.reconcile = False
                book.last_read = book.looked = now
            self.looked += len(out)
            return out

    def learn(self, reads: Iterable[tuple[str, PowerState]]) -> None:
        """What a pass read: news repeating it is not written again."""
        with self._cond:
            for node, state in reads:
                self._known[node] = state

    def pending(self) -> int:
        with self._cond:
            return len(self._news)

    def wait(self, seconds: float, apply: Callable[[list[Applied]], None]) -> None:
        """Wait up to ``seconds`` (or until :meth:`close`), handing news to
        ``apply`` as it arrives (in this thread: the store's writer). Returns
        early when reads pushed news asked for are due (:meth:`to_look`):
        at once, or at a deferred one's window edge."""
        deadline = Deadline.after(max(0.0, seconds), clock=self._clock)
        while True:
            with self._cond:
                if not self._news and not self._looking() and not self._stopped():
                    # woken by news (_offer, _ask), close(), the command's stop
                    # (wake), or a deferred look's edge
                    left, due = deadline.left(), self._look_due()
                    if due is not None:
                        left = max(0.0, min(left, due - self._clock()))
                    self._cond.wait(left)
                batch = list(self._news)
                self._news.clear()
                look = self._looking()
            if batch:
                applied = self._fresh(batch)
                if applied:
                    # counted before the store has them: whoever sees the
                    # store changed also sees the count (tests, the bench)
                    self.applied.extend(applied)
                    self.applied_total += len(applied)
                    apply(applied)
            if look or self._stopped() or deadline.expired:
                return

    def _stopped(self) -> bool:
        return self._stop.is_set() or self._outer.is_set()

    def _fresh(self, batch: list[tuple[News, float]]) -> list[Applied]:
        out: list[Applied] = []
        with self._cond:
            for news, _received in batch:
                book = self._nodes.get(news.node)
                if book is None:
                    continue  # no longer watched: not ours to write
                if news.power is None or news.power not in (PowerState.ON, PowerState.OFF):
                    if book is not None:
                        book.reconcile = True  # something changed: read it
                    continue
                if self._known.get(news.node) == news.power:
                    continue  # a duplicate, or what a read already saw
                self._known[news.node] = news.power
                age = None if news.at is None else max(0.0, self._wall() - news.at)
                out.append(Applied(news.node, news.power, news.message_id, age))
        return out


def record_news(store: Any, applied: Sequence[Applied], health_rule: Any) -> None:
    """Write news to the store at once: the power state (a good read for
    the node's health), and an event in its history naming the source and
    the news's age (``power_event``)."""
    notes = []
    for a in applied:
        age = "age unknown" if a.age is None else f"{a.age:.3f} s old"
        notes.append(
            (a.node, "power_event", f"power {a.power} (source: event {a.message_id}, {age})")
        )
    # one write: the state and its history line (a change costs the sync
    # what a changed read does, plus the line)
    store.health.record_power_reads(
        [(a.node, a.power) for a in applied], health_rule=health_rule, notes=notes
    )
