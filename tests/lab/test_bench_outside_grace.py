"""The events bench's outside changes (``bench.outside.outside_changes``): a
change the client records after the row's end is waited for outside the
measured window and counted by its latency, not as missed (CI's run 54: an
Ironic conductor at load ~20 saw the last change after the row ended), and
one never recorded is still missed.

Real time, a fraction of a second: the helper paces itself on the monotonic
clock (a bench, not product code)."""

from __future__ import annotations

import random
import threading
import time

import pytest

from bmaas.hwlab.harness.bench.outside import Measured, late_grace, outside_changes

pytestmark = pytest.mark.lab


class SlowClient:
    """One node whose power the lab flips at once and the client records
    ``lag`` seconds later (``None``: never)."""

    def __init__(self, lag: float | None) -> None:
        self.lag = lag
        self.flipped_at: float | None = None
        self.lock = threading.Lock()

    def power(self, name: str, target: str) -> None:
        with self.lock:
            self.flipped_at = time.monotonic()

    def recorded(self, wanted: list[str]) -> dict[str, str]:
        with self.lock:
            at = self.flipped_at
        late = at is None or self.lag is None or time.monotonic() < at + self.lag
        return dict.fromkeys(wanted, "on" if late else "off")


#: seconds from the call to the row's end, and to its last change: room for a
#: thread that waits for a CPU (at load 28, 0.1 s left no change made at all)
END, LAST_CHANGE = 2.0, 1.5


def run(client: SlowClient, grace: float, events: list[str]) -> tuple[int, Measured]:
    measured = Measured("test")
    now = time.monotonic()
    missed = outside_changes(
        client, ["n1"], random.Random(1), measured, client.recorded,
        every=0.001, end=now + END, last_change=now + LAST_CHANGE, tick=0.01,
        ended=lambda: events.append(f"ended, {len(measured.latencies)} seen"), grace=grace,
    )  # fmt: skip
    return missed, measured


def test_a_change_seen_after_the_end_counts_by_its_latency_not_as_missed() -> None:
    events: list[str] = []
    missed, measured = run(SlowClient(lag=END + 0.5), grace=5.0, events=events)
    assert (missed, measured.changes, len(measured.latencies)) == (0, 1, 1)
    assert events == ["ended, 0 seen"]  # the window closed before the client saw it
    assert END + 0.5 <= measured.latencies[0] < 5.0


def test_a_change_never_seen_is_missed_after_the_grace() -> None:
    events: list[str] = []
    started = time.monotonic()
    missed, measured = run(SlowClient(lag=None), grace=0.3, events=events)
    assert (missed, measured.changes, measured.latencies) == (1, 1, [])
    assert events == ["ended, 0 seen"]
    assert time.monotonic() - started >= END + 0.3  # the end, then the whole grace


def test_the_grace_is_two_intervals_and_ten_seconds() -> None:
    assert late_grace(3.0) == 16.0
    assert late_grace(60.0) == 130.0
