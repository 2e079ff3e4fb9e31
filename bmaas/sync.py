"""Power-state sync: read every node's power state, count faults, act on streaks.

One pass (:func:`sync_pass`):

1. reclaim what dead processes held (expired leases) - the sync is the one
   long-running bmaas process, so it is the natural janitor;
2. read every node's power state in parallel (``bmaas.ops``);
   nodes the sync itself fenced (``power failure``) are read on a back-off
   schedule, in the background, never waited for (:mod:`bmaas.fenced`);
3. record the reads in the store with hysteresis (:mod:`bmaas.health`): a
   node whose reads fault ``fault_after`` times in a row goes into
   maintenance with ``fault="power failure"`` (by "system"); it comes out
   after ``recover_after`` good reads in a row; a person's maintenance stays.

Each read goes through the operation retry (:mod:`bmaas.retry`) when the
settings give a ``retry`` policy, so a BMC that is busy for a moment is asked
again, not written down as a fault.

Only faults that say something about the node count toward a power failure:
the policy table's "health" column (:mod:`bmaas.policy`) — timeouts,
unreachable BMCs, internal and protocol errors, power and boot failures. The
rest leave the streaks alone and only set ``last_error``: a BMC still busy
after the retries (it said "later", nothing is known about the node), rejected
credentials (a credentials problem, never fenced; :class:`SyncReport`'s
``auth_failed`` and the ``bmaas_sync_auth_failures_total`` metric say which),
and a node that cannot even be asked (a password variable unset, a driver not
installed). Their last-seen power state is kept, with its old timestamp: we
learnt nothing new about the node, so nothing is overwritten (a counted fault
records ``unknown``, never "off").

:func:`sync_loop` repeats passes every ``interval`` seconds (measured start to
start, never sleeping a negative time) until stopped. Both take the run's
:class:`~bmaas.sync_settings.SyncSettings` and :class:`~bmaas.sync_settings.SyncParts`
whole. Given the host's :class:`~bmaas.runtime.Runtime` (``parts.rt``), passes read through
its pool: one login per BMC for as long as the loop runs (the loop raises the pool's
``idle`` to :func:`~bmaas.pool.idle_for_interval`, twice the interval, so a
session used every pass is not logged out between passes; one idle longer
than its driver trusts, ``session_idle``, is logged out and logged in again
next pass; drivers that keep sessions alive, as IPMI's, get keepalives
from the runtime's keeper, so their sessions last any interval),
and every report carries the pool's counters (``sessions``), reads per
login among them.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.events import Applied, EventWatch, record_news
from bmaas.faults import BmaasError
from bmaas.fenced import FencedReads
from bmaas.health import Change, HealthRule
from bmaas.heap import HeapSettler
from bmaas.ops import NodeResult, PowerReader, run_on_nodes
from bmaas.policy import policy_for
from bmaas.pool import idle_for_interval
from bmaas.provision.reclaim import reclaim
from bmaas.quirks import record_results
from bmaas.store.records import QUIRKS_KEY, NodeRecord, updating
from bmaas.sync_report import SyncReport
from bmaas.sync_settings import SyncParts, SyncSettings

if TYPE_CHECKING:  # the caller's store: imported here, SQLAlchemy
    from bmaas.store import HealthChange, Store

__all__ = ["SyncParts", "SyncReport", "SyncSettings", "sync_loop", "sync_pass"]

LOG = logging.getLogger(__name__)


def sync_pass(
    store: Store,
    settings: SyncSettings,
    parts: SyncParts,
    *,
    deadline: Deadline,
    names: Sequence[str] | None = None,
    records: Sequence[NodeRecord] | None = None,
    on_result: Callable[[NodeResult[PowerState]], None] | None = None,
) -> SyncReport:
    """One pass over every node (or ``names``), each read retried under
    ``settings.retry`` (None: one attempt). See the module docstring, and
    :class:`~bmaas.sync_settings.SyncParts` for what each part changes.

    ``deadline`` bounds the pass: each read gets a share of it, and nodes
    not read by then are timeouts. ``records``: the fleet as the caller read
    it (default: read now); the store is written here, by this process
    alone. Fenced nodes whose background reads finished are recorded without
    waiting for the others (:mod:`bmaas.fenced`)."""
    start = parts.clock()
    # Nodes taken back from dead clients are powered off before they are used.
    reclaimed, _cleaned = reclaim(store, parts.rt, driver_factory=parts.factory, deadline=deadline)
    if names is not None:
        records = store.nodes.require(names)
    elif records is None:
        records = store.nodes.find()
    if parts.share is not None:
        records = parts.share.take(records)
    reader = PowerReader(deadline, settings.retry, parts.rt)
    todo, backed_off = _start_fenced(records, settings, parts)
    results = _read(todo, reader, settings, parts, deadline, on_result)
    if parts.fenced is not None:  # what finished meanwhile; never waits for the rest
        results = results + parts.fenced.collect(lambda r: r.error is None)
        backed_off = [n for n in backed_off if n not in {r.node for r in results}]
    # what the drivers learned (a cipher suite 3 downgrade), wherever they ran:
    # a sharded worker's driver never reaches this process, its result does
    record_results(store.nodes, results, {r.name: r.extra.get(QUIRKS_KEY) for r in records})
    changes = _record_reads(store, results, settings.health_rule, _updating(store, results))
    sessions = None if parts.pool is None else dataclasses.replace(parts.pool.stats)
    if parts.sweeper is not None:
        sessions = parts.sweeper.stats
    report = SyncReport(
        results, changes, reclaimed, parts.clock() - start, store.clock(), sessions, backed_off
    )
    if parts.metrics is not None:
        parts.metrics.observe_pass(report, store.nodes.counts())
    return report


def _start_fenced(
    records: Sequence[NodeRecord], settings: SyncSettings, parts: SyncParts
) -> tuple[Sequence[NodeRecord], list[str]]:
    """The records the pass reads itself, and the fenced nodes not read this
    pass (not due); the due ones are read in the background."""
    if parts.fenced is None:
        return records, []
    records, fenced_records = parts.fenced.split(records)
    started = parts.fenced.start_due(
        fenced_records, _background_read(settings, parts, parts.fenced.backoff.timeout)
    )
    return records, [r.name for r in fenced_records if r.name not in started]


def _read(
    records: Sequence[NodeRecord],
    reader: PowerReader,
    settings: SyncSettings,
    parts: SyncParts,
    deadline: Deadline,
    on_result: Callable[[NodeResult[PowerState]], None] | None = None,
) -> list[NodeResult[PowerState]]:
    """Every record's power read: sharded over the sweeper's processes (the
    reader carries the deadline into them), else here on the parts' pool."""
    if parts.sweeper is not None:
        return parts.sweeper.run(records, reader, deadline=deadline, on_result=on_result)
    return run_on_nodes(
        records,
        reader,
        factory=parts.factory,
        workers=settings.workers,
        on_result=on_result,
        clock=parts.clock,
        deadline=deadline,
        pool=parts.pool,
    )


def _updating(store: Store, results: Sequence[NodeResult[PowerState]]) -> set[str]:
    """The failed reads' nodes a firmware update runs on (issue 51: its BMC
    reboots under it), read afresh: a loop's records are cached, marks come
    and go between passes. No failed read: no query."""
    failed = [r.node for r in results if r.error is not None]
    if not failed:
        return set()
    now = store.clock()
    return {r.name for r in store.nodes.find(failed) if updating(r, now)}


def _record_reads(
    store: Store,
    results: Sequence[NodeResult[PowerState]],
    rule: HealthRule,
    updating: Collection[str] = (),
) -> list[HealthChange]:
    """Write the pass's reads with hysteresis: only faults that say something
    about the node count (the policy table's "health" column), and none of a
    node in ``updating`` (a firmware update runs on it: its BMC reboots)."""
    reads: list[tuple[str, PowerState | BmaasError]] = []
    uncounted: dict[str, str] = {}
    for result in results:
        if result.error is None:
            assert result.value is not None
            reads.append((result.node, result.value))
        elif result.node in updating:
            uncounted[result.node] = f"firmware update in progress: {result.error}"
        elif policy_for(result.error).counts_for_health:
            reads.append((result.node, result.error))
        else:  # busy, credentials, configuration: says nothing about the node
            uncounted[result.node] = str(result.error)
    changes = store.health.record_power_reads(reads, health_rule=rule)
    if uncounted:
        store.health.note_power(errors=uncounted)
    for change in changes:
        if change.change is Change.FAULTED:
            LOG.warning("%s: put into maintenance (%s)", change.node, rule.fault)
        elif change.change is Change.RECOVERED:
            LOG.warning("%s: %s cleared", change.node, rule.fault)
    return changes


def _background_read(
    settings: SyncSettings, parts: SyncParts, timeout: float
) -> Callable[[NodeRecord], NodeResult[PowerState]]:
    """One fenced node's read, in this process, bounded by its own
    ``timeout`` deadline (made when it starts, not the pass's: the pass does
    not wait for it)."""

    def read(record: NodeRecord) -> NodeResult[PowerState]:
        deadline = Deadline.after(timeout, clock=parts.clock)
        (result,) = run_on_nodes(
            [record],
            PowerReader(deadline, settings.retry, parts.rt),
            factory=parts.factory,
            workers=1,
            clock=parts.clock,
            deadline=deadline,
            pool=parts.pool,
        )
        return result

    return read


def sync_loop(
    store: Store,
    settings: SyncSettings,
    parts: SyncParts,
    *,
    stop: threading.Event | None = None,
    on_pass: Callable[[SyncReport], None] | None = None,
    wait: Callable[[float], object] | None = None,
    heap: HeapSettler | None = None,
) -> int:
    """Run passes every ``settings.interval`` seconds until ``stop`` is set
    (or ``settings.count`` passes ran). Returns the number of passes run.
    Each pass may take ``settings.deadline`` seconds (a Deadline made when
    the pass starts; inf, the default: no bound on a pass, only each BMC
    call's ``bmc_timeout``).

    Between passes it waits on ``stop`` (so a signal ends the wait at once);
    tests pass ``wait=fake_clock.sleep`` and a fake ``parts.clock``.

    ``heap``: settle this process's heap after each pass that changed the
    pool (:mod:`bmaas.heap`); only for a process the caller owns (the CLI).

    ``parts.events``: an :class:`~bmaas.events.EventWatch`: nodes whose BMC
    streams events are read only as a safety net (once their last read is
    ``events.safety`` seconds old; their pooled sessions are held until
    then), and news is written as it arrives, between passes
    (:mod:`bmaas.events`); pushed news is not written: it ends the wait,
    and the nodes it named are read then (one read a node however much
    news named it). The caller closes it.

    Fenced nodes are read on a back-off (:mod:`bmaas.fenced`): give
    ``parts.fenced`` to choose the schedule; by default the loop makes one
    with :class:`~bmaas.fenced.FencedBackoff`'s defaults for the
    ``health_rule``'s fault, and stops it when the loop ends.
    """
    if settings.interval is None or settings.interval <= 0:
        raise ValueError("interval must be positive")
    if parts.pool is not None:
        # sessions used once a pass must outlive the wait between passes
        parts.pool.idle = max(parts.pool.idle, idle_for_interval(settings.interval))
    stop = stop or threading.Event()
    if parts.events is not None:  # news is written as it comes, between passes
        wait = _news_writer(store, parts.events, settings.health_rule, wait)
    owned: FencedReads[NodeResult[PowerState]] | None = None
    if parts.fenced is None:
        owned = FencedReads(fault=settings.health_rule.fault, clock=parts.clock)
        parts = dataclasses.replace(parts, fenced=owned)
    try:
        return _passes(store, settings, parts, stop, wait or stop.wait, on_pass, heap)
    finally:
        if owned is not None:
            owned.close()


def _passes(
    store: Store,
    settings: SyncSettings,
    parts: SyncParts,
    stop: threading.Event,
    wait: Callable[[float], object],
    on_pass: Callable[[SyncReport], None] | None,
    heap: HeapSettler | None,
) -> int:
    assert settings.interval is not None
    passes = 0
    fleet = _Fleet(store)
    while not stop.is_set():
        started = parts.clock()
        report = _one_pass(store, settings, parts, fleet, started)
        passes += 1
        if parts.pool is not None:
            parts.pool.expire_idle()
            if heap is not None:
                heap.after_pass(parts.pool.stats)
        if on_pass is not None:
            on_pass(report)
        if settings.count is not None and passes >= settings.count:
            break
        _wait_between_passes(store, settings, parts, started + settings.interval, stop, wait)
    return passes


def _pass_deadline(settings: SyncSettings, clock: Callable[[], float]) -> Deadline:
    """A loop's pass's (or look's) budget, made as it starts."""
    return Deadline.after(settings.deadline, clock=clock)


def _one_pass(
    store: Store, settings: SyncSettings, parts: SyncParts, fleet: _Fleet, started: float
) -> SyncReport:
    """A loop's pass: every node (the records of the last pass, if still
    true), or with events the nodes the poll is the safety net of."""
    budget = _pass_deadline(settings, parts.clock)
    events = parts.events
    if events is None:
        return sync_pass(store, settings, parts, deadline=budget, records=fleet.records())
    records = fleet.records()
    if parts.share is not None:  # this worker's nodes: their streams are its own
        records = parts.share.take(records)
    events.watch(records, hash((fleet.key, tuple(r.name for r in records))))
    every = [r.name for r in records]
    names = events.to_read(every, started)
    # a streamed node's session waits for its next safety or liveness read
    held = (events.streamed(every), events.read_every + 2 * (settings.interval or 0.0))
    for keeper in (parts.pool, parts.sweeper):
        if keeper is not None:
            keeper.hold(*held)
    # the share was taken above: the pass reads exactly ``names``
    whole = dataclasses.replace(parts, share=None)
    report = sync_pass(store, settings, whole, deadline=budget, names=names)
    events.learn((r.node, r.value) for r in report.results if r.value is not None)
    events.recheck(r.node for r in report.results if r.error is not None)
    return report


def _wait_between_passes(
    store: Store,
    settings: SyncSettings,
    parts: SyncParts,
    until: float,
    stop: threading.Event,
    wait: Callable[[float], object],
) -> None:
    """Wait until ``until``; each time pushed news ends the wait early
    (:meth:`EventWatch.to_look`), read the nodes it named, then wait on."""
    events = parts.events
    while True:
        wait(max(0.0, until - parts.clock()))
        if events is None or stop.is_set() or not events.looking():
            return
        _look(store, settings, parts, events)


def _look(store: Store, settings: SyncSettings, parts: SyncParts, events: EventWatch) -> None:
    """One authenticated read of each node pushed news named: the news says
    when to look, this read what is (:mod:`bmaas.events`). A good read is
    written as a pass's is; a failed one counts toward no fence (whoever
    knows a subscription's Context must not hurry a flaky BMC's fencing):
    its error is noted and the node is read, and counted, at the next pass.
    Fenced nodes keep their back-off schedule."""
    names = events.to_look(parts.clock())
    if not names:
        return
    fenced = parts.fenced
    records = [r for r in store.nodes.find(names) if fenced is None or r.fault != fenced.fault]
    if not records:
        return
    budget = _pass_deadline(settings, parts.clock)
    results = _read(records, PowerReader(budget, settings.retry, parts.rt), settings, parts, budget)
    record_results(store.nodes, results, {r.name: r.extra.get(QUIRKS_KEY) for r in records})
    good = [(r.node, r.value) for r in results if r.error is None and r.value is not None]
    failed = {r.node: str(r.error) for r in results if r.error is not None}
    store.health.record_power_reads(list(good), health_rule=settings.health_rule)
    if failed:
        store.health.note_power(errors=failed)
    events.learn(good)
    events.recheck(failed)


class _Fleet:
    """The fleet's records as a pass needs them: names, drivers, driver_info
    (how to read a node, its services, who holds it) and faults (who is
    fenced). Built again only when those changed (one light query a pass,
    :meth:`~bmaas.store.nodes.NodesRepo.identities`), not a record per node
    per pass; nothing else of a record is read by a pass."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._key: int | None = None
        self._records: list[NodeRecord] = []

    def records(self) -> list[NodeRecord]:
        key = hash(tuple(self._store.nodes.identities()))
        if key != self._key:
            self._records, self._key = self._store.nodes.find(), key
        return self._records

    @property
    def key(self) -> int | None:
        """The digest of the fleet's names, drivers and driver_info."""
        return self._key


def _news_writer(
    store: Store,
    events: EventWatch,
    rule: HealthRule,
    given: Callable[[float], object] | None,
) -> Callable[[float], object]:
    """A wait between passes that writes news in this thread (the store's
    one writer): as it arrives (woken by it), or, around a ``given`` wait
    (a test's fake clock), what arrived before and during it."""

    def write(news: Sequence[Applied]) -> None:
        record_news(store, news, rule)

    def wait(seconds: float) -> None:
        if given is None:
            events.wait(seconds, write)
            return
        events.wait(0.0, write)
        given(seconds)
        events.wait(0.0, write)

    return wait
