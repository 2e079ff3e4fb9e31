"""Many emulated IPMI BMCs in one process, one UDP port each, one thread.

pyghmi's own ``Bmc.listen()`` drives every BMC through pyghmi's process-wide
client IO thread and dies with all of them when one session raises. This
server owns its sockets instead: one ``selectors`` loop (epoll on Linux) reads
every BMC's socket, hands each datagram to its :class:`~bmaas.hwlab.ipmi.bmc.LabBmc`,
and logs and survives whatever one bad packet raises. Delayed answers are
timers on the same loop, so a BMC never blocks its neighbours.

Usage::

    with IPMIServer() as server:
        port = server.add(machine, username="admin", password="secret")
        ...  # ipmitool -I lanplus -H 127.0.0.1 -p PORT -U admin -P secret power status
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Self

from bmaas.fakes.machine import FakeMachine
from bmaas.hwlab.ipmi.bmc import LabBmc

__all__ = ["MAX_BMCS_PER_PROCESS", "IPMIServer"]

LOG = logging.getLogger(__name__)

#: pyghmi's client waits in select(), which cannot watch a file descriptor
#: above 1023; a process that also runs pyghmi clients (tests, benchmarks)
#: must keep every fd below that, so a server shard stops short of it.
MAX_BMCS_PER_PROCESS = 900
#: datagrams read from one socket per wake-up, so one chatty BMC cannot starve the rest
_BURST = 32
_IDLE_WAIT = 1.0


class IPMIServer:
    """Emulated BMCs for many :class:`~bmaas.fakes.machine.FakeMachine` objects,
    each on its own UDP port on ``host``. Start, add, stop in any order;
    ``stop()`` is idempotent and leaves no thread and no socket behind."""

    def __init__(self, host: str = "127.0.0.1", *, max_bmcs: int = MAX_BMCS_PER_PROCESS) -> None:
        self.host = host
        self.max_bmcs = max_bmcs
        self._bmcs: dict[str, LabBmc] = {}
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._timers: list[tuple[float, int, Callable[..., Any], tuple[Any, ...], dict[str, Any]]]
        self._timers = []
        self._order = itertools.count()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._closed = False

    def __repr__(self) -> str:
        state = "stopped" if self._closed else "running" if self._thread else "new"
        return f"<IPMIServer {self.host} bmcs={len(self._bmcs)} {state}>"

    # -- lifecycle -----------------------------------------------------------

    def add(
        self,
        machine: FakeMachine,
        *,
        username: str,
        password: str,
        port: int = 0,
        cipher_suites: tuple[int, ...] = (17, 3),
        host: str | None = None,
    ) -> int:
        """Serve ``machine`` on a new UDP port (``port=0``: a free one) of
        ``host`` (default: the server's); returns the port."""
        host = host or self.host
        with self._lock:
            if self._closed:
                raise RuntimeError("this IPMIServer has been stopped")
            if machine.name in self._bmcs:
                raise ValueError(f"machine {machine.name!r} is already served")
            if len(self._bmcs) >= self.max_bmcs:
                raise ValueError(
                    f"one IPMIServer serves at most {self.max_bmcs} BMCs "
                    "(select() limit of pyghmi clients); shard machines across processes"
                )
            sock = socket.socket(
                socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM
            )
            try:
                sock.bind((host, port))
                sock.setblocking(False)
                bmc = LabBmc(
                    self,
                    machine,
                    sock,
                    username=username,
                    password=password,
                    cipher_suites=cipher_suites,
                )
                self._selector.register(sock, selectors.EVENT_READ, bmc)
            except BaseException:
                sock.close()
                raise
            self._bmcs[machine.name] = bmc
        LOG.debug("serving %s over IPMI on %s:%d", machine.name, host, bmc.port)
        return int(bmc.port)

    def bmc(self, name: str) -> LabBmc:
        """The emulated BMC of machine ``name`` (for lab control and tests)."""
        with self._lock:
            return self._bmcs[name]

    @property
    def endpoints(self) -> dict[str, int]:
        """Machine name -> UDP port."""
        with self._lock:
            return {name: bmc.port for name, bmc in self._bmcs.items()}

    def start(self) -> Self:
        with self._lock:
            if self._closed:
                raise RuntimeError("this IPMIServer has been stopped")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hwlab-ipmi", daemon=True)
                self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the loop, close every socket. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        self._stopping.set()
        self._wake()
        if thread is not None:
            thread.join()
        for bmc in self._bmcs.values():
            bmc.sessions.clear()
            bmc.socket.close()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- services for the BMCs (called on the loop thread) ----------------------

    @staticmethod
    def now() -> float:
        return time.monotonic()

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any, **kw: Any) -> None:
        """Run ``fn`` on the loop after ``delay`` seconds (at once when 0)."""
        if delay <= 0:
            fn(*args, **kw)
            return
        with self._lock:
            heapq.heappush(self._timers, (self.now() + delay, next(self._order), fn, args, kw))
        self._wake()

    @staticmethod
    def sendto(sock: socket.socket, packet: bytes, addr: Any) -> None:
        try:
            sock.sendto(packet, addr)
        except OSError as exc:  # a full buffer or a vanished client loses one answer
            LOG.debug("send to %s failed: %s", addr, exc)

    # -- the loop ----------------------------------------------------------------

    def _wake(self) -> None:
        # closed or full: the loop is awake or gone either way
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    def _run(self) -> None:
        while not self._stopping.is_set():
            for key, _ in self._selector.select(self._next_wait()):
                if key.data is None:
                    self._drain_waker()
                else:
                    self._read(key.data)
            self._run_timers()

    def _next_wait(self) -> float:
        with self._lock:
            if not self._timers:
                return _IDLE_WAIT
            return max(0.0, min(_IDLE_WAIT, self._timers[0][0] - self.now()))

    def _drain_waker(self) -> None:
        try:
            while self._wake_r.recv(512):
                pass
        except BlockingIOError:
            pass

    def _read(self, bmc: LabBmc) -> None:
        for _ in range(_BURST):
            try:
                data, addr = bmc.socket.recvfrom(4096)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. an ICMP error queued on the socket
                LOG.debug("%s: recv failed: %s", bmc.name, exc)
                return
            try:
                bmc.datagram(data, addr)
            except Exception:  # one bad packet must not take every BMC down
                LOG.warning("%s: a packet from %s broke its handler", bmc.name, addr, exc_info=True)

    def _run_timers(self) -> None:
        while True:
            with self._lock:
                if not self._timers or self._timers[0][0] > self.now():
                    return
                _, _, fn, args, kw = heapq.heappop(self._timers)
            try:
                fn(*args, **kw)
            except Exception:
                LOG.warning("a delayed IPMI answer failed", exc_info=True)
