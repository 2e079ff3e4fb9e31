"""Run one BMC operation on many nodes at once, and say how each went.

:func:`run_on_nodes` is the engine behind ``bmaas power``, ``boot-device``,
``vmedia`` and ``sync``: a bounded pool of worker threads, one driver per node
(built by an injectable :data:`DriverFactory`, so tests hand in a fake
fleet), one :class:`NodeResult` per node in the order asked. Workers talk to
BMCs only; results come back to the calling thread (``on_result``), which is
where the store is written, so database transactions never wait on a BMC.

With a :class:`~bmaas.pool.DriverPool` (``pool=``), drivers and their BMC
sessions are kept between operations and sweeps instead (``bmaas sync
--interval`` keeps one for its whole life): one login per BMC, not one per
operation.

A caller's budget is a :class:`~bmaas.deadline.Deadline` (``deadline=``, the
whole command's): the sweep returns by then, whatever is still running, and
the nodes it did not hear from are timeouts. The operation receives the same
Deadline from its caller and hands each BMC call a share of it, so nothing a
worker started outlives it either.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from bmaas import threads
from bmaas.deadline import Deadline
from bmaas.driver import DEFAULT_BMC_TIMEOUT, BMCDriver, PowerState
from bmaas.failover import FailoverRecord, build_failover
from bmaas.faults import BmaasError, BMCTimeout, SlotTimeout, UnclassifiedFault

if TYPE_CHECKING:  # a command's options read DEFAULT_WORKERS before its deadline is made
    from bmaas.pool import DriverPool
    from bmaas.retry import RetryLimits
    from bmaas.runtime import Runtime
    from bmaas.store.records import NodeRecord

__all__ = [
    "DEFAULT_WORKERS",
    "DriverFactory",
    "NodeResult",
    "PowerReader",
    "driver_factory",
    "run_on_nodes",
]

LOG = logging.getLogger(__name__)

#: worker threads when the caller does not say; BMC calls mostly wait on the network
DEFAULT_WORKERS = 32
#: seconds between looks at the deadline's clock while waiting on workers: the
#: injected clock (a test's FakeClock) decides when time is up, not the wait
DEADLINE_POLL = 0.1
#: seconds between wake-ups while waiting for results without a deadline (so
#: Ctrl-C is seen promptly)
WAIT_SLICE = 0.5
#: seconds the calls in flight at the overall deadline get to hand back their
#: own result: each is bounded by that same deadline, so it ends within a
#: moment of it (a call refused because the budget was spent says so itself,
#: "nothing sent", instead of being taken for a BMC that did not answer).
#: Only nodes whose operation had begun are waited for: a node still waiting
#: for its pooled driver or building its driver (importing pyghmi or sushy,
#: which nothing interrupts: 0.2 s on a quiet 2-core box, 0.5 s and more
#: under load) has sent nothing, and is not waited for (issue 36)
IN_FLIGHT_GRACE = 0.5

T = TypeVar("T")
#: builds the driver for one node record (the seam tests replace)
DriverFactory = Callable[["NodeRecord"], BMCDriver]


@dataclasses.dataclass(frozen=True)
class NodeResult(Generic[T]):
    """How one node's operation went: a value, or the fault that stopped it."""

    node: str
    driver: str
    value: T | None = None
    error: BmaasError | None = None
    elapsed: float = 0.0
    #: False when the deadline came before a worker was free to start this node
    started: bool = True
    #: what the node's driver knew about its BMC after the operation
    #: (:class:`bmaas.driver.Quirk` values, such as a cipher suite 3
    #: downgrade): carried with the result so that whoever writes the store
    #: records them, even when the driver lived in another process
    #: (:mod:`bmaas.sweep`; :func:`bmaas.sync.sync_pass` records them)
    quirks: frozenset[str] = frozenset()

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.node, "ok": self.ok, "elapsed": round(self.elapsed, 3)}
        if self.error is not None:
            out["fault"] = self.error.to_dict()
        else:
            out["result"] = _jsonable(self.value)
        return out


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, dict):  # a BIOS's attributes, a fault's details
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):  # a firmware inventory, an inventory's parts
        return [_jsonable(v) for v in value]
    return str(value)


def driver_factory(
    *,
    bmc_timeout: float = DEFAULT_BMC_TIMEOUT,
    environ: Mapping[str, str] | None = None,
    failover: bool = False,
    on_failover: Callable[[FailoverRecord], None] | None = None,
    **options: Any,
) -> DriverFactory:
    """The real factory: resolve the node's password references, then build
    its driver through the ``bmaas.drivers`` entry points. ``failover``: a
    node whose driver_info configures both IPMI and Redfish falls through to
    the other protocol (:mod:`bmaas.failover`; off by default), each failover
    passed to ``on_failover`` (``SyncMetrics.observe_failover``)."""

    # the entry points (importlib.metadata) load with the first driver, not
    # before a command's deadline check (issue 36)
    from bmaas import credentials, registry

    def build(record: NodeRecord) -> BMCDriver:
        info = credentials.resolve_driver_info(
            record.driver_info, node=record.name, environ=environ
        )
        if failover:
            return build_failover(
                record.name,
                record.driver,
                info,
                build=registry.build_driver,
                on_failover=on_failover,
                bmc_timeout=bmc_timeout,
                **options,
            )
        return registry.build_driver(
            record.name, record.driver, info, bmc_timeout=bmc_timeout, **options
        )

    return build


def _unclassified(record: NodeRecord, exc: Exception, elapsed: float) -> NodeResult[Any]:
    """A driver broke its contract. One node must not sink a 1000-node sweep:
    count it as unclassified (the metric that says "fix a mapping table") and
    keep the traceback in the log."""
    LOG.error(
        "%s: driver %s raised a non-bmaas exception",
        record.name,
        record.driver,
        exc_info=exc,
    )
    fault = UnclassifiedFault(
        f"{type(exc).__name__}: {exc}",
        node=record.name,
        driver=record.driver,
        elapsed=elapsed,
        cause=exc,
    )
    return NodeResult(record.name, record.driver, error=fault, elapsed=elapsed)


def _run_pooled(
    record: NodeRecord,
    operation: Callable[[BMCDriver], T],
    factory: DriverFactory,
    clock: Callable[[], float],
    pool: DriverPool,
    deadline: Deadline,
    on_call: Callable[[], None] = lambda: None,
) -> NodeResult[T]:
    start = clock()
    key = pool.key_for(record.driver, record.name, record.driver_info)
    learned: list[frozenset[str]] = []

    def run(driver: BMCDriver) -> T:
        on_call()
        try:
            return operation(driver)
        finally:
            learned.append(_quirks_of(driver))

    def done(**kw: Any) -> NodeResult[T]:
        quirks = learned[-1] if learned else frozenset()
        return NodeResult(record.name, record.driver, elapsed=clock() - start, quirks=quirks, **kw)

    try:
        return done(value=pool.run(key, lambda: factory(record), run, deadline=deadline))
    except BmaasError as exc:
        return done(error=exc)
    except Exception as exc:  # the pool has dropped the session
        return dataclasses.replace(
            _unclassified(record, exc, clock() - start),
            quirks=learned[-1] if learned else frozenset(),
        )


def _quirks_of(driver: BMCDriver) -> frozenset[str]:
    """The driver's quirks as text (a picklable, comparable value)."""
    return frozenset(str(q) for q in getattr(driver, "quirks", ()))


def _run_one(
    record: NodeRecord,
    operation: Callable[[BMCDriver], T],
    factory: DriverFactory,
    clock: Callable[[], float],
    pool: DriverPool | None = None,
    deadline: Deadline | None = None,
    on_call: Callable[[], None] = lambda: None,
) -> NodeResult[T]:
    """One node's turn. ``on_call`` is called once its driver is built and
    held, just before ``operation`` begins: from then on the BMC may have
    been asked something; before, nothing was sent."""
    if pool is not None:
        assert deadline is not None  # run_on_nodes checked it
        return _run_pooled(record, operation, factory, clock, pool, deadline, on_call)
    start = clock()
    try:
        driver = factory(record)
    except BmaasError as exc:  # bad driver_info, unset password variable, missing driver
        return NodeResult(record.name, record.driver, error=exc, elapsed=clock() - start)
    try:
        on_call()
        value = operation(driver)
        return NodeResult(
            record.name,
            record.driver,
            value=value,
            elapsed=clock() - start,
            quirks=_quirks_of(driver),
        )
    except BmaasError as exc:
        return NodeResult(
            record.name,
            record.driver,
            error=exc,
            elapsed=clock() - start,
            quirks=_quirks_of(driver),
        )
    except Exception as exc:
        return _unclassified(record, exc, clock() - start)
    finally:
        try:
            driver.close()
        except Exception:  # closing must never hide the result
            LOG.warning("%s: closing the driver failed", record.name, exc_info=True)


@dataclasses.dataclass(frozen=True)
class PowerReader:
    """One node's power read within the pass's ``deadline``: one attempt, or
    through the operation retry, each BMC call at most the driver's
    ``bmc_timeout`` -- on a pooled driver of ``rt`` (the host's runtime), at
    most its BMC's silence bound (as Ironic's periodic read): the first pass
    after a BMC hangs is not held ``--bmc-timeout`` by it (issue 48).
    Picklable, for sharded sweeps (without ``rt``: see :meth:`in_runtime`)."""

    deadline: Deadline
    retry: RetryLimits | None = None
    rt: Runtime | None = dataclasses.field(default=None, compare=False)

    def __reduce__(self) -> tuple[type[PowerReader], tuple[Deadline, RetryLimits | None]]:
        return (PowerReader, (self.deadline, self.retry))

    def in_runtime(self, rt: Runtime) -> PowerReader:
        """This reader in ``rt`` (a sweep worker's own)."""
        return dataclasses.replace(self, rt=rt)

    def __call__(self, driver: BMCDriver) -> PowerState:
        key = None if self.rt is None else self.rt.pool.key_of(driver)
        if self.rt is None or key is None:
            return self._read(driver, driver.bmc_timeout)
        with self.rt.silence.bounded(key, driver.bmc_timeout) as wait:
            state = self._read(driver, wait)
        self.rt.silence.heard(key)
        return state

    def _read(self, driver: BMCDriver, wait: float) -> PowerState:
        if self.retry is None:
            each = driver.call_deadline(self.deadline).share(cap=wait)
            return driver.get_power_state(deadline=each)
        from bmaas import retry as _retry  # tenacity: loaded once a read is retried

        return _retry.call(
            self.retry, driver.get_power_state, deadline=self.deadline, bmc_timeout=wait
        )


def run_on_nodes(
    records: Sequence[NodeRecord],
    operation: Callable[[BMCDriver], T],
    *,
    factory: DriverFactory,
    workers: int = DEFAULT_WORKERS,
    on_result: Callable[[NodeResult[T]], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    deadline: Deadline | None = None,
    pool: DriverPool | None = None,
) -> list[NodeResult[T]]:
    """Run ``operation(driver)`` for every node, at most ``workers`` at once.

    Returns one result per node, in the order of ``records``. ``on_result``
    runs in the calling thread once for every node (progress, store writes):
    as each finishes, and at the end for those the deadline cut off.
    Ctrl-C cancels the nodes not yet started and waits for the running ones,
    which are bounded by their deadline.

    ``deadline`` is when the caller stops waiting: nodes not started are
    cancelled, nodes whose operation had begun get :data:`IN_FLIGHT_GRACE`
    to hand back their own result, and the call returns without waiting
    for any worker thread. A node still out then whose operation had begun
    gets a ``BMCTimeout``; one no worker reached (``started=False``) or
    whose turn had not got past waiting for or building its driver (nothing
    sent) a ``SlotTimeout``, never counted against it. The workers left
    running end by the same deadline when ``operation`` hands its calls
    shares of it (as every bmaas command does); nothing joins them.

    ``pool``: run on the nodes' pooled drivers (kept open afterwards) instead
    of building and closing one per node; needs ``deadline`` (how long a
    node's turn may wait for its pooled driver: the caller's budget).
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    if pool is not None and deadline is None:
        raise TypeError("run_on_nodes(pool=...) needs the caller's deadline")
    if not records:
        return []
    sweep = _Sweep(records, operation, factory, clock, deadline, pool, on_result)
    node_threads = threads.pool(min(workers, len(records)), "bmaas-node")
    cut_off = False
    try:
        for record in records:
            node_threads.submit(sweep.one, record).add_done_callback(sweep.finished.put)
        cut_off = sweep.collect(node_threads)
    finally:
        node_threads.shutdown(wait=not cut_off, cancel_futures=True)
    return sweep.report()


class _Sweep(Generic[T]):
    """One :func:`run_on_nodes` call: what its workers run, the results as
    they come back to the calling thread, and the cut-off at the deadline."""

    def __init__(
        self,
        records: Sequence[NodeRecord],
        operation: Callable[[BMCDriver], T],
        factory: DriverFactory,
        clock: Callable[[], float],
        deadline: Deadline | None,
        pool: DriverPool | None,
        on_result: Callable[[NodeResult[T]], None] | None,
    ) -> None:
        self.records, self.operation, self.factory = records, operation, factory
        self.clock, self.deadline, self.pool, self.on_result = clock, deadline, pool, on_result
        self.results: dict[str, NodeResult[T]] = {}
        self.begun = clock()
        self.started: set[str] = set()
        #: nodes whose operation began (the BMC may have been asked): only these
        #: are waited for past the deadline; workers add, the caller reads
        self.calling: set[str] = set()
        self.lock = threading.Lock()
        # Finished futures arrive on a queue: waiting on the whole pending set
        # (concurrent.futures.wait) costs O(pending) per wake-up, O(N^2) a sweep.
        self.finished: queue.SimpleQueue[concurrent.futures.Future[NodeResult[T]]] = (
            queue.SimpleQueue()
        )
        self.remaining = len(records)

    def one(self, record: NodeRecord) -> NodeResult[T]:
        """One node's turn, on a worker thread."""
        if self.deadline is not None and self.deadline.left() <= 0:
            # the budget went before this node's turn (start-up, the store's
            # opening, the nodes before it): never started, so its driver is
            # not even built -- loading pyghmi or sushy is not interruptible
            return _cut_off(record, False, self.clock() - self.begun)
        self.started.add(record.name)

        def on_call() -> None:
            with self.lock:
                self.calling.add(record.name)

        return _run_one(
            record, self.operation, self.factory, self.clock, self.pool, self.deadline, on_call
        )

    def collect(self, node_threads: concurrent.futures.ThreadPoolExecutor) -> bool:
        """Take results until every node's is in or the deadline comes;
        True if it was cut off with nodes still out."""
        while self.remaining:
            timeout = WAIT_SLICE
            if self.deadline is not None:
                if self.deadline.expired:
                    return self._cut_off_at_deadline(node_threads)
                timeout = min(self.deadline.left(), DEADLINE_POLL)
            self._take_next(timeout)
        return False

    def _cut_off_at_deadline(self, node_threads: concurrent.futures.ThreadPoolExecutor) -> bool:
        """Nodes no worker reached are never started; the calls in flight,
        bounded by this same deadline, hand back their own results within a
        moment of it; only what is still out then "did not finish" (a
        BMCTimeout). True if any node is still out."""
        node_threads.shutdown(wait=False, cancel_futures=True)
        grace = time.monotonic() + IN_FLIGHT_GRACE
        self._take([])
        # only for calls that began: a turn still building its driver (an
        # import nothing interrupts) sent nothing
        while self.remaining and self._in_flight() and time.monotonic() < grace:
            self._take_next(min(grace - time.monotonic(), DEADLINE_POLL))
        return bool(self.remaining)

    def _in_flight(self) -> bool:
        """Is any node whose operation began still out?"""
        with self.lock:
            return any(name not in self.results for name in self.calling)

    def _take_next(self, timeout: float) -> None:
        try:
            first = self.finished.get(timeout=timeout)
        except queue.Empty:
            return
        self._take([first])

    def _take(self, ready: list[concurrent.futures.Future[NodeResult[T]]]) -> None:
        # Everything already finished counts, even if the deadline passed meanwhile.
        while True:
            try:
                ready.append(self.finished.get_nowait())
            except queue.Empty:
                break
        self.remaining -= len(ready)
        for future in ready:
            if future.cancelled():  # never started: reported as such below
                continue
            result = future.result()
            self.results[result.node] = result
            if self.on_result is not None:
                self.on_result(result)

    def report(self) -> list[NodeResult[T]]:
        """One result per node, in the order asked: a node not heard from is
        cut off (:func:`_cut_off`)."""
        with self.lock:
            asked = set(self.calling)
        for record in self.records:
            if record.name not in self.results:
                result = self.results[record.name] = _cut_off(
                    record,
                    record.name in self.started,
                    self.clock() - self.begun,
                    asked=record.name in asked,
                )
                if self.on_result is not None:
                    self.on_result(result)
        return [self.results[record.name] for record in self.records]


def _cut_off(
    record: NodeRecord, started: bool, elapsed: float, *, asked: bool = True
) -> NodeResult[Any]:
    """The result of a node the deadline came before: its outcome is unknown.

    Asked: its call was in flight (``BMCTimeout``: the BMC had it and did
    not answer by the deadline). Not started: no worker reached it, the BMC
    was never asked -- bmaas's own shortage of workers, a ``SlotTimeout``,
    never counted against the node (a sync pass once fenced nodes that only
    sat at the end of an over-long queue). Started but not asked: its turn
    was still waiting for its pooled driver or building it (loading the
    protocol library) -- nothing sent, a ``SlotTimeout`` too."""
    if not started:
        fault: BmaasError = SlotTimeout(
            "not started before the overall deadline (every worker was busy)",
            node=record.name,
            driver=record.driver,
            waited=elapsed,
        )
        return NodeResult(record.name, record.driver, error=fault, elapsed=elapsed, started=False)
    if not asked:
        fault = SlotTimeout(
            "its driver was not ready by the overall deadline: nothing sent",
            node=record.name,
            driver=record.driver,
            waited=elapsed,
        )
        return NodeResult(record.name, record.driver, error=fault, elapsed=elapsed, started=True)
    fault = BMCTimeout(
        "did not finish before the overall deadline",
        node=record.name,
        driver=record.driver,
        elapsed=elapsed,
    )
    return NodeResult(record.name, record.driver, error=fault, elapsed=elapsed, started=True)
