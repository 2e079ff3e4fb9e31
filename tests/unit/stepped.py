"""Fake event streams on a reactor the test steps (issue 45): every host's
streams ride :class:`bmaas.reactor.Reactor`, so the fakes do too -- the
way production runs, with no thread: opens run inline, the test moves
the fake clock past each wait the listener was told to take."""

from __future__ import annotations

import selectors
import time
from collections.abc import Callable, Sequence
from typing import Any

from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCTimeout
from bmaas.reactor import Inbox, News, Reactor

#: a scripted stream is never checked while open (its Inbox's quiet)
QUIET = 1e9


class Scripted:
    """A fake stream whose :meth:`scripted` hands out the next batch (or
    raises, as the BMC closing it; None: it stays open, quiet). Open, it is
    readable (its Inbox kept full), so the reactor reads it batch after
    batch until it raises or goes quiet."""

    _box: Inbox | None = None

    def scripted(self) -> Sequence[News] | None:
        raise NotImplementedError

    def selectable(self) -> Inbox:
        self._box = Inbox(QUIET, lambda deadline: None)
        self._box.put(None)
        return self._box

    def read_ready(self) -> Sequence[News] | None:
        box = self._box
        assert box is not None
        box.take()
        news = self.scripted()
        if news is not None:
            box.put(None)  # still readable: the reactor reads it again
        return news

    keeps_alive = True  # an Inbox: checked when quiet, never timed by silence

    def silent(self, idle: float) -> Exception:
        return BMCTimeout("the event stream was silent")


def reactor(clock: FakeClock) -> Reactor:
    """A reactor the test steps: opens inline, no thread."""

    def inline(work: Callable[[], None]) -> None:
        work()

    return Reactor(clock=clock, submit=inline, spawn=lambda *a: None)


def recording(host: Any) -> list[float]:
    """The waits ``host`` (a listener's sink) is told, in order."""
    waits: list[float] = []
    told = host.lost

    def lost(who: Any, fault: Exception, wait: float, *, opening: bool) -> None:
        waits.append(wait)
        told(who, fault, wait, opening=opening)

    host.lost = lost
    return waits


def drive(stepped: Reactor, clock: FakeClock, waits: list[float], count: int) -> None:
    """Step ``stepped`` until its listeners were told ``count`` waits, the
    clock moved past each but the last (bounded: a stuck rig fails)."""
    seen = len(waits)
    for _ in range(10 * count + 10):
        stepped.step(0.0)
        if len(waits) >= count:
            return
        if len(waits) > seen:
            seen = len(waits)
            clock.advance(waits[-1])
    raise AssertionError(f"{len(waits)} waits told, {count} expected")


def read_when_ready(stream: Any, idle: float) -> Sequence[News]:
    """What the reactor reads of a real ``stream`` once its socket is
    readable (``read_ready``), waiting at most ``idle`` seconds for it (then
    the stream's silence fault, as the reactor's idle limit)."""
    until = time.monotonic() + idle
    while True:
        fileobj = stream.selectable()
        if fileobj is not None:  # None: closed, and read_ready says so
            with selectors.DefaultSelector() as waiting:
                waiting.register(fileobj, selectors.EVENT_READ)
                waiting.select(max(0.0, until - time.monotonic()))
        news: Sequence[News] | None = stream.read_ready()
        if news is not None:
            return news
        if time.monotonic() >= until:
            raise stream.silent(idle)
