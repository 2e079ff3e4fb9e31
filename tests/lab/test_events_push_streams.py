"""300 Redfish push subscriptions in one EventWatch on a bounded number of
threads (issue 46, finding 7: a push subscription's stream had a thread of
its own). Against :mod:`tests.lab.sse_fleet` in push mode (300 services
without SSE on free ports of 127.0.0.1, one process of its own) and a real
push listener: every service is subscribed, the watch costs at most 32
threads and no descriptor a subscription, and Events POSTed for one
service -- with the Context read off its BMC, as its BMC or a forger would
-- write nothing and ask for one read of its node, however many came."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest

from bmaas.drivers.redfish.push import PushListener, PushStream
from bmaas.events import Applied
from tests.lab import sse_fleet

pytestmark = pytest.mark.lab

COUNT = 300
MAX_THREADS = 32


def _stats(proc: subprocess.Popen[str]) -> dict[str, object]:
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write("stats\n")
    proc.stdin.flush()
    found: dict[str, object] = json.loads(proc.stdout.readline())
    return found


@pytest.mark.parametrize("sse_services", [(COUNT, "push")], indirect=True)
def test_three_hundred_push_subscriptions_on_a_bounded_number_of_threads(
    sse_services: tuple[subprocess.Popen[str], list[int]],
) -> None:
    proc, ports = sse_services
    threads_before, fds_before = threading.active_count(), sse_fleet.fds()
    listener = PushListener("127.0.0.1", 0)
    streams = [PushStream(sse, listener) for sse in sse_fleet.streams(ports)]
    with sse_fleet.watching(streams, listener) as watch:  # every service subscribed
        assert all(s.mode == "push" for s in streams)
        assert _stats(proc)["subscribed"] == COUNT
        threads = threading.active_count() - threads_before
        assert threads <= MAX_THREADS, [t.name for t in threading.enumerate()]
        fds = sse_fleet.fds() - fds_before
        assert fds <= 32  # the listener's and the reactor's: none a subscription
        got: list[Applied] = []
        assert proc.stdin is not None
        start = time.monotonic()
        detected = None
        for sent in range(1, 4):  # three Events with service 137's Context, one by one
            proc.stdin.write("off 137\n")
            proc.stdin.flush()
            for _ in range(200):  # bounded: 10 s
                if listener.received == sent and watch.looking():
                    break
                time.sleep(0.05)
            detected = detected or time.monotonic() - start
        assert listener.received == 3
        assert watch.looking()
        watch.wait(0.0, got.extend)  # returns at once: a read is asked for
        assert watch.to_look(time.monotonic()) + watch.to_look(time.monotonic()) == ["n137"]
        assert got == []  # a POST writes nothing: the read the sync makes does
        assert _stats(proc)["reads"] == {}  # nor does it read: that is the sync's one read
        assert watch.summary()["nodes_up"] == COUNT
        print(f"\n{COUNT} push subscriptions: {threads} threads, {fds} fds, "
              f"asked to read in {detected:.3f} s")  # fmt: skip
    assert _stats(proc)["subscribed"] == 0  # every subscription deleted on close
    assert threading.active_count() - threads_before <= 8  # the opens' idle pool at most
