"""The client's own lateness (issue 50, finding 1): a no-answer fault whose
call's thread waited for a CPU a large share of the call's bound is the
client's, and the policy table neither counts it nor fences on it."""

from __future__ import annotations

import pickle
import threading

import pytest

from bmaas import lateness
from bmaas.faults import BMCBusy, BMCTimeout, BMCUnreachable, PowerFailure
from bmaas.policy import CheckFinding, policy_for
from bmaas.retry import RetryLimits


def timeout(late: float | None = None) -> BMCTimeout:
    fault = BMCTimeout("GET /redfish/v1/ was not over by the deadline", node="n1", elapsed=0.21)
    if late is not None:
        fault.late = late
    return fault


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The thread's run-queue wait as the next reads give it."""
    given: list[float] = []
    monkeypatch.setattr(lateness, "run_queue_wait", lambda: given.pop(0))
    return given


def test_a_call_that_waited_a_quarter_of_its_bound_for_a_cpu_is_late(waits: list[float]) -> None:
    waits += [10.0, 10.06]
    fault = timeout()
    lateness.judge(fault, lateness.mark(), 0.2, elapsed=0.21)
    assert fault.late == pytest.approx(0.06)
    assert "the client was late: 0.06s waiting for a CPU" in str(fault)


def test_a_call_that_slept_on_its_socket_is_the_bmcs(waits: list[float]) -> None:
    waits += [10.0, 10.01]  # a dead BMC: its caller sleeps on a socket, it does not wait for a CPU
    fault = timeout()
    lateness.judge(fault, lateness.mark(), 0.2, elapsed=0.2)
    assert fault.late is None
    assert "late" not in str(fault)


@pytest.mark.parametrize("answer", [BMCBusy("later"), PowerFailure("never on")])
def test_an_answer_is_never_late(waits: list[float], answer: BMCBusy | PowerFailure) -> None:
    waits += [10.0, 11.0]
    lateness.judge(answer, lateness.mark(), 0.2, elapsed=1.2)
    assert answer.late is None


def test_without_a_run_queue_figure_the_overrun_stands_in(waits: list[float]) -> None:
    waits += [None, None]  # type: ignore[list-item] # not Linux
    late, on_time = timeout(), timeout()
    lateness.judge(late, lateness.mark(), 0.2, elapsed=0.3)
    lateness.judge(on_time, lateness.mark(), 0.2, elapsed=0.21)
    assert late.late == pytest.approx(0.1)
    assert on_time.late is None


@pytest.mark.parametrize("cls", [BMCTimeout, BMCUnreachable])
def test_the_table_neither_counts_nor_fences_a_late_no_answer(
    cls: type[BMCTimeout] | type[BMCUnreachable],
) -> None:
    on_time, late = cls("silent"), cls("silent")
    late.late = 0.1
    assert policy_for(on_time).counts_for_health
    assert policy_for(on_time).fences
    row = policy_for(late)
    assert not row.counts_for_health
    assert not row.fences
    # still the class's own row otherwise: retried as it, a fleet command's word
    assert row.same_node is policy_for(cls).same_node
    assert row.fleet is policy_for(cls).fleet
    # status check: a Warning that says so, never the BMC's Failure
    assert row.check is CheckFinding.LATE
    assert row.check.warning
    assert not policy_for(cls).check.warning
    assert policy_for(cls).counts_for_health  # the class's row is untouched


def test_a_sync_read_retries_a_late_timeout_and_fails_at_once_on_a_counted_one() -> None:
    limits = RetryLimits(sync=True, timeout_attempts=3)
    assert limits.limit_for(timeout(), idempotent=True) == 1
    assert limits.limit_for(timeout(late=0.1), idempotent=True) == 3


def test_lateness_survives_pickling() -> None:
    """Sharded sweeps ship results from worker processes."""
    fault = pickle.loads(pickle.dumps(timeout(late=0.1)))
    assert fault.late == 0.1
    assert not policy_for(fault).counts_for_health
    assert fault.to_dict()["late"] == 0.1
    assert "late" not in timeout().to_dict()


def test_the_run_queue_wait_is_this_threads_and_grows() -> None:
    first = lateness.run_queue_wait()
    if first is None:
        pytest.skip("this system does not say how long a thread waited for a CPU")
    seen: list[float | None] = []
    thread = threading.Thread(target=lambda: seen.append(lateness.run_queue_wait()))
    thread.start()
    thread.join()
    again = lateness.run_queue_wait()
    assert again is not None
    assert again >= first >= 0
    assert seen[0] is not None
    assert seen[0] >= 0
