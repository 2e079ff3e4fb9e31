"""FencedReads' schedule on a fake clock: back-off, reset on a good read,
forgetting nodes that are no longer fenced (reads run inline, no threads
waited on beyond their end)."""

from __future__ import annotations

import dataclasses

import pytest

from bmaas.fakes.clock import FakeClock
from bmaas.fenced import FencedBackoff, FencedReads
from bmaas.store import POWER_FAILURE


@dataclasses.dataclass(frozen=True)
class Rec:
    name: str
    fault: str | None = POWER_FAILURE


def test_backoff_schedule_and_validation() -> None:
    assert FencedBackoff().schedule(7) == [30, 90, 210, 450, 930, 1530, 2130]
    assert FencedBackoff(first=5, factor=3, cap=20).schedule(4) == [5, 20, 40, 60]
    with pytest.raises(ValueError, match="first > 0"):
        FencedBackoff(first=0)
    with pytest.raises(ValueError, match="first > 0"):
        FencedBackoff(first=10, cap=5)


def test_a_good_read_resets_the_back_off_and_a_recovered_node_is_forgotten() -> None:
    clock = FakeClock(start=0.0)
    fenced: FencedReads[tuple[str, bool]] = FencedReads(
        FencedBackoff(first=10, factor=2, cap=100), fault=POWER_FAILURE, clock=clock
    )
    answers = iter([False, True, True])
    node = Rec("n1")
    try:

        def step(records: list[Rec]) -> list[str]:
            healthy, dead = fenced.split(records)  # type: ignore[arg-type]
            assert [r.name for r in healthy] == [r.name for r in records if r.fault is None]
            started = fenced.start_due(dead, lambda r: (r.name, next(answers)))
            assert fenced.wait(timeout=10)
            fenced.collect(lambda result: result[1])
            clock.advance(10)
            return started

        assert step([node]) == []  # t=0: fenced now, first read at 10
        assert step([node]) == ["n1"]  # t=10: bad, next at 30
        assert step([node]) == []  # t=20
        assert step([node]) == ["n1"]  # t=30: good: read every pass again
        assert step([node]) == ["n1"]  # t=40: good again
        assert step([Rec("n1", None)]) == []  # recovered: not fenced, forgotten
        assert fenced.started == [("n1", 10.0), ("n1", 30.0), ("n1", 40.0)]
    finally:
        fenced.close()
