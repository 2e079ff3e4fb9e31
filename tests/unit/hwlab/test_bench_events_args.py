"""The events bench's ``bmaas sync`` command lines: ``--liveness-interval``
reaches the sync only when the bench is given one (the sync's default, 300 s,
is 12 reads per node-hour of a streamed node's API: the figure the 10,000-
stream row's 12.4 requests per node-hour at rest came from)."""

from __future__ import annotations

from bmaas.hwlab.harness.bench.events import sync_args
from bmaas.hwlab.harness.bench.outside import Options

LISTENER = "http://127.0.0.1:20001/bmaas/events"


def test_the_sync_keeps_its_liveness_default_unless_asked() -> None:
    args = sync_args("events", Options(), LISTENER)
    assert "--liveness-interval" not in args
    # what an operator runs: split on (the default with --interval), so its
    # claim each pass is in the figures
    assert args[1:] == ["sync", "--interval", "60.0", "--safety-interval", "2400.0"]


def test_a_liveness_interval_reaches_every_row() -> None:
    options = Options(liveness_interval=1800.0)
    for mode in ("polling", "events", "push"):
        args = sync_args(mode, options, LISTENER)
        at = args.index("--liveness-interval")
        assert args[at + 1] == "1800.0", (mode, args)
    push = sync_args("push", options, LISTENER)
    assert push[-3:] == ["--events-listen", "127.0.0.1:20001", "--events-prefer-push"]
