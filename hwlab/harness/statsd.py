"""A statsd sink on 127.0.0.1: what a real Ironic says about itself, heard.

Ironic times its periodic tasks with its metrics library
(``@METRICS.timer('ConductorManager._sync_power_states')``); with
``[metrics]backend = statsd`` each timing is one UDP datagram,
``<name>:<milliseconds>|ms``. A benchmark that points
``[metrics_statsd]statsd_host/statsd_port`` here learns when each power-sync
pass ended and how long it took, from the conductor itself rather than from
guesses at its log. Only metrics whose name contains one of ``wanted`` are
kept (Ironic also times every node's ``do_sync_power_state``: 10,000 a pass
on a big conductor).
"""

from __future__ import annotations

import contextlib
import dataclasses
import selectors
import socket
import threading
import time
from collections.abc import Callable, Sequence

__all__ = ["Metric", "StatsdSink", "parse"]

#: seconds the reader waits for a datagram before it looks at ``stop`` again
_POLL = 0.2


@dataclasses.dataclass(frozen=True)
class Metric:
    """One statsd sample as received (``at``: the sink's monotonic clock)."""

    at: float
    name: str
    value: float
    kind: str  # "ms" (timer), "g" (gauge), "c" (counter)


def parse(datagram: bytes, at: float) -> list[Metric]:
    """The samples of one datagram (one per line; malformed lines skipped:
    a sink must not fail on what another sender emits)."""
    out = []
    for line in datagram.decode("utf-8", "replace").splitlines():
        name, sep, rest = line.partition(":")
        value, sep2, kind = rest.partition("|")
        if not (sep and sep2 and name):
            continue
        try:
            number = float(value)
        except ValueError:
            continue
        out.append(Metric(at, name, number, kind.split("|")[0].split("@")[0]))
    return out


class StatsdSink:
    """Listens on a free UDP port of 127.0.0.1 until :meth:`stop`; calls
    ``on_metric`` (in its own thread) for every kept sample."""

    def __init__(
        self,
        wanted: Sequence[str],
        on_metric: Callable[[Metric], None] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.wanted = tuple(wanted)
        self.on_metric = on_metric
        self.clock = clock
        self.metrics: list[Metric] = []
        self.dropped = 0  # samples heard that nobody wanted
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.setblocking(False)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def start(self) -> StatsdSink:
        self._thread = threading.Thread(target=self._run, name="statsd-sink", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5 * _POLL + 1)
        with contextlib.suppress(OSError):
            self._sock.close()

    def __enter__(self) -> StatsdSink:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def named(self, fragment: str) -> list[Metric]:
        """The kept samples whose name contains ``fragment``, oldest first."""
        with self._lock:
            return [m for m in self.metrics if fragment in m.name]

    def _run(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._sock, selectors.EVENT_READ)
            while not self._stop.is_set():
                if not selector.select(_POLL):
                    continue
                while True:
                    try:
                        datagram = self._sock.recv(65536)
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError:
                        return
                    self._take(parse(datagram, self.clock()))

    def _take(self, samples: list[Metric]) -> None:
        for metric in samples:
            if not any(w in metric.name for w in self.wanted):
                self.dropped += 1
                continue
            with self._lock:
                self.metrics.append(metric)
            if self.on_metric is not None:
                self.on_metric(metric)
