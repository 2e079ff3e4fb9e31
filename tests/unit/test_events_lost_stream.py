"""A lost event stream is a WARNING, once a loss (issue 50, finding 7): the
sync's nodes fall back to polling, which an operator should see; the
failed re-opens that follow stay INFO."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest

from bmaas.deadline import Deadline
from bmaas.events import EventWatch, News
from bmaas.faults import BMCUnreachable


class _Stream:
    nodes = {"node-1": "/redfish/v1/Systems/1"}
    key = "http://127.0.0.1:8000"

    def open(self, deadline: Deadline) -> None: ...
    def read(self, idle: float) -> Sequence[News]:
        return ()

    def close(self) -> None: ...


def test_a_lost_stream_warns_once_and_its_reopens_are_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watch = EventWatch(safety=180.0, streams_of=lambda driver: None)
    stream = _Stream()
    with caplog.at_level(logging.INFO, logger="bmaas.events"):
        watch.opened(stream)
        watch.lost(stream, BMCUnreachable("gone"), 1.0, opening=False)
        watch.lost(stream, BMCUnreachable("refused"), 2.0, opening=True)
        watch.lost(stream, BMCUnreachable("refused"), 4.0, opening=True)
    levels = [(r.levelname, r.getMessage().split(" (")[0]) for r in caplog.records]
    assert levels == [
        ("WARNING", "http://127.0.0.1:8000: event stream lost"),
        ("INFO", "http://127.0.0.1:8000: no event stream"),
        ("INFO", "http://127.0.0.1:8000: no event stream"),
    ]


def test_the_pass_lines_events_tail_says_its_counts_are_running_totals() -> None:
    """Issue 50, finding 7: the pass line's own counts are the pass's; the
    events tail's are since the sync started, and say so."""
    watch = EventWatch(safety=180.0, streams_of=lambda driver: None)
    stream = _Stream()
    watch.opened(stream)
    watch.lost(stream, BMCUnreachable("gone"), 1.0, opening=False)
    watch.lost(stream, BMCUnreachable("gone"), 1.0, opening=False)
    assert "0 applied since start, 2 stream faults since start" in watch.summary_line()
