"""Log lines a peer can cause, at a rate the disk can afford.

A server logs what it refuses, and whoever sends the requests decides how
many lines that is: 3000 requests without a token wrote 24.3 MB to a lab's
``hwlab.log`` in 9.8 s, each line carrying the request's full path (issue
44). :class:`RateLog` keeps the line and drops the flood:

* refusals are grouped by **class** (``no token``, ``cross-origin``, ...),
  a short fixed word the caller picks, never text from the peer;
* each class gets **at most one line per interval** (default
  :data:`INTERVAL`, 10 s); the first refusal of a quiet class is logged at
  once, the ones after it within the interval are counted, and the next
  line says how many were suppressed since the last one (:meth:`flush`,
  called when the server stops or at any time, says it for a class that
  went quiet);
* the **detail** (a method and path, an address) is cut to
  :data:`MAX_DETAIL` characters and made printable: a peer's bytes never
  reach the log whole, nor a newline or an escape sequence among them;
* at most :data:`MAX_KINDS` classes are kept; any further one counts under
  ``other``.

The clock is injected (``clock=``, monotonic seconds), so a test drives
time by hand. One lock guards the counts: a server's threads share one
:class:`RateLog`. Used by hwlab's control API; bmaas's event listener is
meant to use the same for what it refuses.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable

__all__ = ["INTERVAL", "MAX_DETAIL", "MAX_KINDS", "RateLog", "shown"]

#: seconds between two lines of one class
INTERVAL = 10.0
#: characters of a peer's detail (a path) a line carries at most
MAX_DETAIL = 80
#: classes counted apart; any further one is counted as ``other``
MAX_KINDS = 32


def shown(text: str, limit: int = MAX_DETAIL) -> str:
    """``text`` as a log line may carry it: printable ASCII (anything else
    escaped as ``\\xNN``/``\\uNNNN``), at most ``limit`` characters (cut
    with ``...``)."""
    out: list[str] = []
    size = 0
    for char in text:
        piece = char if " " <= char <= "~" else ascii(char)[1:-1]
        size += len(piece)
        if size > limit:
            return "".join(out) + "..."
        out.append(piece)
    return "".join(out)


@dataclasses.dataclass
class _Kind:
    last: float  # when the last line of this class was written
    suppressed: int = 0


class RateLog:
    """At most one line per class per ``interval`` to ``logger`` (module
    docstring). ``what`` starts every line (``"control: refused"``)."""

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        interval: float = INTERVAL,
        level: int = logging.WARNING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.what = what
        self.interval = interval
        self.level = level
        self.clock = clock
        self._kinds: dict[str, _Kind] = {}
        self._lock = threading.Lock()

    def note(self, kind: str, detail: str = "") -> bool:
        """One event of class ``kind`` (``detail``: what it was, cut and
        escaped). Returns whether a line was written for it."""
        now = self.clock()
        with self._lock:
            if kind not in self._kinds and len(self._kinds) >= MAX_KINDS:
                kind = "other"
            state = self._kinds.get(kind)
            if state is not None and now - state.last < self.interval:
                state.suppressed += 1
                return False
            suppressed = state.suppressed if state is not None else 0
            since = now - state.last if state is not None else 0.0
            self._kinds[kind] = _Kind(last=now)
        self._write(kind, detail, suppressed, since)
        return True

    def flush(self) -> None:
        """Say what was suppressed and not yet said, one line per class."""
        now = self.clock()
        with self._lock:
            pending = [(k, s.suppressed, now - s.last) for k, s in self._kinds.items()]
            for state in self._kinds.values():
                state.suppressed = 0
        for kind, suppressed, since in pending:
            if suppressed:
                self.logger.log(
                    self.level,
                    "%s (%s): %d more in the last %.0f s",
                    self.what,
                    kind,
                    suppressed,
                    since,
                )

    def _write(self, kind: str, detail: str, suppressed: int, since: float) -> None:
        text = f": {shown(detail)}" if detail else ""
        if suppressed:
            self.logger.log(
                self.level,
                "%s (%s)%s (and %d more like it in the last %.0f s, not logged one by one)",
                self.what,
                kind,
                text,
                suppressed,
                since,
            )
        else:
            self.logger.log(self.level, "%s (%s)%s", self.what, kind, text)
