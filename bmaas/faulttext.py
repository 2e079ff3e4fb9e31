"""A fault as one line of text, and back: the ``[bmaas CODE retry=SCOPE]`` prefix.

Where a fault has to travel as a string (Ironic's ``last_error``, node
history, a log line), bmaas writes it as::

    [bmaas bmc_busy retry=same_node] node-3: power.set via ipmi 10.0.0.3:623 after 8.51s: BMC busy
    └── prefix: code, retry scope ─┘ └── str(fault): node, operation, address, elapsed, detail ──┘

The prefix is stable (codes are :data:`bmaas.faults.FAULT_CLASSES` keys,
scopes are :class:`~bmaas.faults.RetryScope` values); the rest is for people.
Whoever reads the string back (the Ironic provisioning backend) uses
:func:`parse`, which finds the prefix anywhere in the text, because Ironic
wraps driver errors in its own sentence ("Failed to change power state to
'power on' by 'power on'. Error: [bmaas ...] ...").
"""

from __future__ import annotations

import dataclasses
import re

from bmaas.faults import FAULT_CLASSES, BmaasError, RetryScope, UnclassifiedFault

__all__ = ["PREFIX", "ParsedFault", "format_fault", "parse", "prefix"]

#: the prefix, as a regular expression (``code`` and ``retry`` groups)
PREFIX = re.compile(r"\[bmaas (?P<code>[a-z][a-z0-9_]*) retry=(?P<retry>[a-z_]+)\] ?")


def prefix(fault: BmaasError) -> str:
    """``[bmaas CODE retry=SCOPE] `` for ``fault`` (trailing space included)."""
    return f"[bmaas {fault.code} retry={fault.retry}] "


def format_fault(fault: BmaasError) -> str:
    """The fault as one line: prefix, then its own message (node, operation,
    address, elapsed; never a credential, see :mod:`bmaas.faults`)."""
    return prefix(fault) + " ".join(str(fault).split())


@dataclasses.dataclass(frozen=True)
class ParsedFault:
    """What a prefixed line says: the code, the scope, the class and the detail."""

    code: str
    retry: RetryScope
    #: the class for ``code``; ``UnclassifiedFault`` for a code this bmaas does not know
    cls: type[BmaasError]
    #: the text after the prefix
    detail: str

    def to_fault(self) -> BmaasError:
        """A fault instance of :attr:`cls` carrying :attr:`detail` as its message."""
        return self.cls(self.detail)


def parse(text: str | None) -> ParsedFault | None:
    """The first ``[bmaas ...]`` fault in ``text``; ``None`` when there is none
    (e.g. the node runs a stock Ironic driver)."""
    if not text:
        return None
    found = PREFIX.search(text)
    if found is None:
        return None
    code = found["code"]
    try:
        retry = RetryScope(found["retry"])
    except ValueError:
        retry = UnclassifiedFault.retry
    cls = FAULT_CLASSES.get(code, UnclassifiedFault)
    return ParsedFault(code, retry, cls, text[found.end() :].strip())
