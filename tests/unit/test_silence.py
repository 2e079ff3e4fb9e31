"""Silent BMCs (bmaas.silence): noted, probed in the background on a
doubling schedule, confirmed only by a probe of their own, cleared by any
answer; and the pool's part (bmaas.pool): what it notes, what a probe does.
No threads and no real time: probes are collected and run by the test."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from bmaas import policy
from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCBusy, BMCTimeout, BMCUnreachable
from bmaas.pool import DriverPool
from bmaas.silence import STALE_SLACK, SilentBMCs
from tests.unit.test_pool import SessionDriver, key, read

NO_ANSWER = BMCTimeout("no answer", node="n1")


def _now(logout: Callable[[], None]) -> None:
    """The pool's background logouts, run at once (deterministic here;
    tests/unit/test_pool.py holds that they are in the background)."""
    logout()


class Probes:
    """Collects what the book starts; the test runs them."""

    def __init__(self) -> None:
        self.started: list[Callable[[], None]] = []

    def __call__(self, probe: Callable[[], None]) -> None:
        self.started.append(probe)

    def run_all(self) -> int:
        ran, self.started = self.started, []
        for probe in ran:
            probe()
        return len(ran)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=0.0)


def _book(clock: FakeClock, probes: Probes) -> SilentBMCs:
    return SilentBMCs(first=10.0, cap=40.0, clock=clock, start=probes)


def test_a_silence_is_confirmed_by_a_probe_and_probed_at_doubling_gaps(clock: FakeClock) -> None:
    probes, asked = Probes(), []
    book = _book(clock, probes)

    def probe() -> None:  # the BMC still gives no answer
        asked.append(clock())
        book.silent("n1", NO_ANSWER, probe)

    book.silent("n1", NO_ANSWER, probe)
    assert book.evidence("n1") is None  # one command unanswered: not yet known silent
    assert book.run_due() is None  # the probe started at once; nothing else waits
    assert probes.run_all() == 1
    known = book.evidence("n1")
    assert known is not None
    assert known.confirmed
    assert known.probes == 1
    for _ in range(6):
        wait = book.run_due()
        assert wait is not None
        clock.advance(wait)
        book.run_due()
        assert probes.run_all() == 1
    assert asked == [0.0, 10.0, 30.0, 70.0, 110.0, 150.0, 190.0]  # gaps 10, 20, 40, then the cap
    book.heard("n1")
    assert book.evidence("n1") is None
    assert len(book) == 0


def test_a_bmc_that_answers_the_probe_is_not_silent(clock: FakeClock) -> None:
    """A BMC that hung on one command (a power action) but answers a read
    is never reported silent: the probe's answer clears it."""
    probes = Probes()
    book = _book(clock, probes)
    book.silent("n1", NO_ANSWER, lambda: book.heard("n1"))
    book.run_due()
    probes.run_all()
    assert book.evidence("n1") is None
    assert len(book) == 0


def test_a_probe_without_a_verdict_is_tried_again_after_the_gap(clock: FakeClock) -> None:
    probes, tries = Probes(), []
    book = _book(clock, probes)

    def probe() -> None:  # e.g. the node was in use: neither silent() nor heard()
        tries.append(clock())
        if len(tries) == 1:
            raise RuntimeError("a broken probe")

    book.silent("n1", NO_ANSWER, probe)
    book.run_due()
    probes.run_all()  # raised: logged, the schedule survives
    assert book.run_due() == 10.0
    clock.advance(10)
    book.run_due()
    probes.run_all()
    assert tries == [0.0, 10.0]
    assert book.evidence("n1") is None  # never confirmed


def test_evidence_goes_stale_when_the_probes_fall_behind(clock: FakeClock) -> None:
    probes = Probes()
    book = _book(clock, probes)
    book.silent("n1", NO_ANSWER, lambda: book.silent("n1", NO_ANSWER, lambda: None))
    book.run_due()
    probes.run_all()
    known = book.evidence("n1")
    assert known is not None
    assert known.gap == 20.0
    clock.advance(2 * 20.0 + STALE_SLACK - 1)
    assert book.evidence("n1") is not None
    clock.advance(2)  # no probe ran meanwhile: nothing is known any more
    assert book.evidence("n1") is None


def test_the_no_answer_column_is_timeout_and_unreachable_only() -> None:
    """What the pool notes as silence comes from the policy table; every
    other fault is an answer (busy, auth, internal error, a bad reply)."""
    no_answer = {r.fault for r in policy.POLICY if r.no_answer}
    assert no_answer == policy.NO_ANSWER == {BMCTimeout, BMCUnreachable}


# -- the pool's part ---------------------------------------------------------------------


class Flaky(SessionDriver):
    """A node whose BMC answers or not, as ``bmc`` says (shared by every
    driver built for it, as a real BMC is)."""

    def __init__(self, node: str, bmc: dict[str, Exception | None]) -> None:
        super().__init__(node)
        self.bmc = bmc

    def get_power_state(self, *, deadline: Deadline) -> PowerState:
        self.fail = self.bmc["fail"]
        return super().get_power_state(deadline=deadline)


def test_the_pool_notes_silence_and_its_probe_leaves_a_session_behind(clock: FakeClock) -> None:
    probes = Probes()
    book = _book(clock, probes)
    pool = DriverPool(clock=clock, silence=book, start=_now)
    bmc: dict[str, Exception | None] = {"fail": BMCUnreachable("no answer to the login")}
    built: list[Flaky] = []

    def build(node: str) -> Flaky:
        built.append(Flaky(node, bmc))
        return built[-1]

    k = key("n1")
    with pytest.raises(BMCUnreachable):
        read(pool, build, k)
    assert pool.open_sessions() == 0  # dropped (policy.DROPS_SESSION)
    book.run_due()
    probes.run_all()  # the probe: a read through the pool, no answer either
    known = book.evidence(k)
    assert known is not None
    assert isinstance(known.fault, BMCUnreachable)
    assert len(built) == 2

    bmc["fail"] = None  # the BMC is back
    clock.advance(10)
    book.run_due()
    probes.run_all()
    assert book.evidence(k) is None
    assert pool.open_sessions() == 1  # the probe's session, kept for the next user
    logins = pool.stats.logins
    assert read(pool, build, k) is PowerState.ON
    assert pool.stats.logins == logins  # no login: the probe's session served it
    assert len(built) == 3


def _silent_node(
    clock: FakeClock,
) -> tuple[Probes, SilentBMCs, DriverPool, dict[str, Exception | None]]:
    """A pool noting silence in a book whose probes the test runs, and one
    node's BMC (``fail``: what it does), silent to start with."""
    probes = Probes()
    book = _book(clock, probes)
    return probes, book, DriverPool(clock=clock, silence=book, start=_now), {"fail": NO_ANSWER}


def test_an_answer_that_is_a_fault_is_still_an_answer(clock: FakeClock) -> None:
    probes, book, pool, bmc = _silent_node(clock)
    k = key("n1")
    with pytest.raises(BMCTimeout):
        read(pool, lambda n: Flaky(n, bmc), k)
    bmc["fail"] = BMCBusy("later", node="n1")
    book.run_due()
    probes.run_all()  # the probe is told "busy": the BMC answers
    assert len(book) == 0


def test_a_probe_for_settings_that_changed_is_forgotten(clock: FakeClock) -> None:
    probes, book, pool, bmc = _silent_node(clock)
    old, new = key("n1", address="10.0.0.1"), key("n1", address="10.0.0.2")
    with pytest.raises(BMCTimeout):
        read(pool, lambda n: Flaky(n, bmc), old)
    bmc["fail"] = None
    read(pool, lambda n: Flaky(n, bmc), new)  # the operator fixed it
    book.run_due()
    probes.run_all()  # the old address is not asked: its silence is forgotten
    assert len(book) == 0
    assert pool.open_sessions() == 1


def test_a_read_waits_for_the_first_probes_verdict_not_for_its_session(clock: FakeClock) -> None:
    """settle(): the read about to ask the BMC waits for the running first
    probe's verdict (here: no answer), then knows the BMC is silent."""
    probes = Probes()
    book = _book(clock, probes)
    book.silent("n1", NO_ANSWER, lambda: None)
    book.run_due()  # the first probe is running (collected, not yet run)
    settled = threading.Event()

    def read() -> None:
        book.settle("n1", Deadline.after(30.0))
        settled.set()

    reader = threading.Thread(target=read)
    reader.start()
    assert not settled.wait(0.3)  # still waiting for the verdict
    book.silent("n1", NO_ANSWER, lambda: None)  # the probe's verdict: no answer either
    reader.join(5.0)
    assert settled.is_set()
    assert book.evidence("n1") is not None
    book.settle("n1", Deadline.after(30.0))  # confirmed: nothing to wait for


def test_a_clean_use_that_may_not_have_asked_the_bmc_clears_nothing(clock: FakeClock) -> None:
    probes = Probes()
    book = _book(clock, probes)
    pool = DriverPool(clock=clock, silence=book, start=_now)
    k = key("n1")
    book.silent(k, NO_ANSWER, lambda: book.silent(k, NO_ANSWER, lambda: None))
    book.run_due()
    probes.run_all()
    with pool.session(k, lambda: SessionDriver("n1"), deadline=Deadline.after(5.0, clock=clock)):
        pass  # e.g. Ironic asking which power states the driver supports: no BMC call
    assert book.evidence(k) is not None
