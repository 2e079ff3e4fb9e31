"""bmaas.ratelog: refusals logged by class, one line per class per interval,
the suppressed count said (issue 44: 3000 refused requests wrote 24.3 MB to
a lab's log, each line with the request's full path)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from bmaas.fakes.clock import FakeClock
from bmaas.hwlab import http
from bmaas.hwlab.control import ControlServer
from bmaas.ratelog import MAX_DETAIL, MAX_KINDS, RateLog, shown

LOGGER = logging.getLogger("tests.ratelog")


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER.name]


def test_n_events_make_one_line_per_class_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    log = RateLog(LOGGER, "refused", interval=10.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger=LOGGER.name):
        for _ in range(1000):
            log.note("no token", "GET /status")
            log.note("cross-origin", "POST /faults/n1")
            clock.advance(0.009)  # 1000 of each in 9 s
        assert _lines(caplog) == [
            "refused (no token): GET /status",
            "refused (cross-origin): POST /faults/n1",
        ]
        clock.advance(1.0)  # 10 s after the first line
        log.note("no token", "GET /status")
    assert _lines(caplog)[2:] == [
        "refused (no token): GET /status (and 999 more like it in the last 10 s, "
        "not logged one by one)"
    ]


def test_the_next_interval_starts_from_the_last_line() -> None:
    clock = FakeClock()
    log = RateLog(LOGGER, "refused", interval=10.0, clock=clock)
    written = []
    for _ in range(100):
        written.append(log.note("no token"))
        clock.advance(1.0)
    # one line at 0 s, 10 s, 20 s, ... : ten in 100 s, not 100
    assert written.count(True) == 10
    assert [i for i, w in enumerate(written) if w] == list(range(0, 100, 10))


def test_flush_says_what_a_quiet_class_suppressed(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    log = RateLog(LOGGER, "refused", clock=clock)
    with caplog.at_level(logging.WARNING, logger=LOGGER.name):
        for _ in range(5):
            log.note("wrong token", "GET /status")
        clock.advance(3.0)
        log.flush()
        log.flush()  # said once
    assert _lines(caplog) == [
        "refused (wrong token): GET /status",
        "refused (wrong token): 4 more in the last 3 s",
    ]


def test_a_detail_is_cut_and_made_printable() -> None:
    assert shown("GET /" + "a" * 8000) == "GET /" + "a" * (MAX_DETAIL - 5) + "..."
    assert shown("/x\n\x1b[31mred\u2028") == "/x\\n\\x1b[31mred\\u2028"
    assert len(shown("\x00" * 1000)) <= MAX_DETAIL + 3


def test_classes_are_bounded(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    log = RateLog(LOGGER, "refused", clock=clock)
    with caplog.at_level(logging.WARNING, logger=LOGGER.name):
        for i in range(MAX_KINDS + 100):
            log.note(f"kind-{i}")
    assert len(_lines(caplog)) == MAX_KINDS + 1  # the rest count as "other"
    assert _lines(caplog)[-1] == "refused (other)"


class _Lab:
    def describe(self) -> dict[str, Any]:
        return {}

    def status(self) -> dict[str, Any]:
        return {}


def _request(path: str, headers: list[tuple[str, str]]) -> http.Request:
    return http.Request("GET", path, "HTTP/1.1", headers)


def test_the_control_api_logs_refusals_by_class_not_by_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """3000 requests without a token, and 3000 with a wrong one, each with a
    7 KiB path: two short lines, not 6000 long ones; the path cut."""
    clock = FakeClock()
    refusals = RateLog(logging.getLogger("bmaas.hwlab.control"), "control: refused", clock=clock)
    server = ControlServer(_Lab(), token="the-token", refusals=refusals)  # type: ignore[arg-type]
    try:
        port = int(server.url.rsplit(":", 1)[1])
        host = ("Host", f"127.0.0.1:{port}")
        path = "/status/" + "x" * 7000

        async def flood() -> list[int]:
            statuses = []
            for _ in range(3000):
                statuses.append((await server._answer(_request(path, [host])))[0])
                wrong = [host, ("Authorization", "Bearer nope")]
                statuses.append((await server._answer(_request(path, wrong)))[0])
            return statuses

        with caplog.at_level(logging.WARNING, logger="bmaas.hwlab.control"):
            assert set(asyncio.run(flood())) == {401}
            clock.advance(10.0)
            asyncio.run(server._answer(_request(path, [host])))
    finally:
        server.stop()  # flushes: the wrong tokens' count is said
    lines = [r.getMessage() for r in caplog.records if r.name == "bmaas.hwlab.control"]
    assert len(lines) == 4, lines
    assert lines[0].startswith("control: refused (no token): 401 GET /status/xxx")
    assert lines[1].startswith("control: refused (wrong token): 401 GET /status/xxx")
    assert "2999 more like it" in lines[2]
    assert lines[3].endswith("(wrong token): 2999 more in the last 10 s")
    assert all(len(line) < 250 for line in lines)
    assert "the-token" not in caplog.text
