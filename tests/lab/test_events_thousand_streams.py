"""1,000 Redfish event streams in one EventWatch on a bounded number of
threads (issue 46, finding 7: a thread a stream held 1,003 threads and
1,017 descriptors). Against :mod:`tests.lab.sse_fleet` (1,000 services on
free ports of 127.0.0.1, one process of its own): every stream opens and
stays live, the watch costs at most 32 threads whatever the fleet (one
reactor, its pool of opens), one descriptor a stream (plus a few), and an
outside power-off on one service lands for its node alone."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from bmaas.driver import PowerState
from bmaas.events import Applied
from tests.lab import sse_fleet

pytestmark = pytest.mark.lab

COUNT = 1000
MAX_THREADS = 32


@pytest.mark.parametrize("sse_services", [(COUNT,)], indirect=True)
def test_a_thousand_streams_on_a_bounded_number_of_threads(
    sse_services: tuple[subprocess.Popen[str], list[int]],
) -> None:
    proc, ports = sse_services
    streams = sse_fleet.streams(ports)
    threads_before, fds_before = threading.active_count(), sse_fleet.fds()
    with sse_fleet.watching(streams) as watch:
        threads = threading.active_count() - threads_before
        assert threads <= MAX_THREADS, [t.name for t in threading.enumerate()]
        assert sse_fleet.fds() - fds_before <= COUNT + 16  # one a stream, a few of the reactor's
        assert proc.stdin is not None
        proc.stdin.write("off 737\n")
        proc.stdin.flush()
        got: list[Applied] = []

        def apply(applied: list[Applied]) -> None:
            got.extend(applied)

        start = time.monotonic()
        while not got and time.monotonic() - start < 10:
            watch.wait(0.05, apply)  # it applies news as it arrives
        assert [(a.node, a.power) for a in got] == [("n737", PowerState.OFF)]
        assert watch.summary()["nodes_up"] == COUNT  # still all live
        print(f"\n{COUNT} streams: {threads} threads, {sse_fleet.fds() - fds_before} fds, "
              f"detected in {time.monotonic() - start:.3f} s")  # fmt: skip
    assert threading.active_count() - threads_before <= 8  # the opens' idle pool at most
