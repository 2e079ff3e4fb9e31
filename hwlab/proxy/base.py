"""What the IPMI and Redfish proxies share: a fault plan evaluated once per
request, the BMC-reboot window, timers on the proxy's event loop, counters,
and the event log.

A proxy writes an effect to the event log when it *carries it out*, not when
the plan fires it: an effect that cannot be carried out (an unreadable IPMI
session, a login stage the client never reached) is logged as a warning and
counted as ``skipped``, so the log only claims what the client really met.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import logging
from collections.abc import Callable
from typing import Any, ClassVar

from bmaas.fakes.faults import FaultPlan, Firing
from bmaas.hwlab.proxy.spec import ProxySpec

__all__ = ["Proxy"]

LOG = logging.getLogger(__name__)


class Proxy(abc.ABC):
    """One fault-injecting proxy in front of one BMC, run on an asyncio loop."""

    protocol: ClassVar[str] = ""

    def __init__(
        self,
        spec: ProxySpec,
        plan: FaultPlan,
        *,
        events: Callable[[Firing], None] | None = None,
    ) -> None:
        self.spec = spec
        self.plan = plan
        self.events = events
        self.port = 0
        self.counters: collections.Counter[str] = collections.Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timers: set[asyncio.TimerHandle] = set()
        self._down_until = 0.0
        self._warned: set[str] = set()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "proxy not started"
        return self._loop

    # -- lifecycle -------------------------------------------------------------

    @abc.abstractmethod
    async def start(self) -> int:
        """Bind and start relaying; returns the port it listens on."""

    async def stop(self) -> None:
        """Stop relaying and release every socket and timer. Safe to call twice."""
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()

    def later(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn`` after ``delay`` seconds, unless the proxy stops first."""

        def run() -> None:
            self._timers.discard(handle)
            fn(*args)

        handle = self.loop.call_later(delay, run)
        self._timers.add(handle)

    # -- faults ------------------------------------------------------------------

    def evaluate(self, operation: str) -> list[Firing]:
        """The effects for one request (never for a retransmission of it)."""
        self.counters["requests"] += 1
        return self.plan.evaluate(operation, protocol=self.protocol)

    def carried(self, firing: Firing) -> None:
        """``firing`` reached the client: count it and log it."""
        self.counters["injected"] += 1
        LOG.info("%s: %s on %s (%s)", self.spec.node, firing.effect, firing.operation, firing.rule)
        if self.events is not None:
            self.events(firing)

    def skipped(self, firing: Firing, why: str) -> None:
        """``firing`` could not be carried out; say so once per reason."""
        self.counters["skipped"] += 1
        key = f"{firing.effect}/{why}"
        if key not in self._warned:
            self._warned.add(key)
            LOG.warning(
                "%s: cannot carry out %s on %s (rule %s): %s",
                self.spec.node,
                firing.effect,
                firing.operation,
                firing.rule,
                why,
            )

    def reboot(self, duration: float) -> None:
        """Start a BMC-reboot window: nothing answers for ``duration`` seconds
        and sessions opened before it are gone afterwards."""
        self._down_until = max(self._down_until, self.loop.time() + duration)
        self.counters["reboots"] += 1

    def rebooting(self) -> bool:
        return self._loop is not None and self.loop.time() < self._down_until

    def flush(self) -> None:  # noqa: B027 - optional hook
        """Forget per-request decisions (retransmissions of a request decided
        before the rules were cleared are decided again)."""

    def status(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol,
            "port": self.port,
            "upstream": self.spec.upstream,
            "bmc_down": self.rebooting(),
            "counters": dict(sorted(self.counters.items())),
        }
