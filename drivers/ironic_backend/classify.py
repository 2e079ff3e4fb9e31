"""What went wrong with a node, read back from Ironic as a typed fault.

After a failed deploy the backend reads what Ironic kept: the node's history
(API 1.78; the power sync clears ``last_error`` within seconds, the history
keeps the entry), ``last_error``, ``fault`` and ``provision_state``. Then:

1. **exact**: a node on a ``bmaas-*`` hardware type writes
   ``[bmaas CODE retry=SCOPE] ...`` (:mod:`bmaas.faulttext`); the prefix
   names the fault class, wherever Ironic wrapped it in its own sentence;
2. **by table**: a stock driver's message is matched against
   :data:`STOCK_MESSAGES`, first row first (the most specific rows lead);
3. ``UnclassifiedFault`` when nothing matches: retried elsewhere and counted,
   so the table's gaps can be measured.

The texts are read newest first (the history's ERROR entries since the claim,
then ``last_error``, then ``fault``), and the first one that says something
wins, so an old failure of the node never speaks for this attempt.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence

from bmaas import faulttext
from bmaas.faults import (
    BmaasError,
    BMCAuthError,
    BMCBusy,
    BMCFault,
    BMCInternalError,
    BMCTimeout,
    BMCUnreachable,
    BootFailure,
    InputError,
    PowerFailure,
    UnclassifiedFault,
    UnsupportedOperation,
)

__all__ = ["STOCK_MESSAGES", "Evidence", "Row", "classify", "classify_text"]


@dataclasses.dataclass(frozen=True)
class Row:
    pattern: re.Pattern[str]
    fault: type[BmaasError]
    why: str


def _row(pattern: str, fault: type[BmaasError], why: str) -> Row:
    return Row(re.compile(pattern, re.IGNORECASE), fault, why)


#: stock Ironic messages (ipmi, redfish hardware types; the conductor's own), first match wins
STOCK_MESSAGES: tuple[Row, ...] = (
    _row(
        r"Validation of image href|not allowed for image source|InvalidParameterValue|"
        r"Missing (the following|parameter)|MissingParameterValue|instance_info",
        InputError,
        "the request or the node's configuration is wrong (image, instance_info, driver_info):"
        " it fails the same way on every node, so the request stops",
    ),
    _row(
        r"\b401\b|Unauthorized|AccessDenied|Authentication fail|invalid credentials",
        BMCAuthError,
        "redfish: sushy's AccessError (401) comes back in 1-2 s; never retried here",
    ),
    _row(
        r"\b503\b|\b429\b|ServiceTemporarilyUnavailable|Service Unavailable|Too Many Requests",
        BMCBusy,
        "redfish: the BMC said 'later' (sushy already retried it ~30 s inside Ironic)",
    ),
    _row(
        r"returned code 500|\b500\b|InternalError|Internal Server Error",
        BMCInternalError,
        "redfish: the BMC reported its own failure",
    ),
    _row(
        r"IPMI call failed",
        BMCUnreachable,
        "ipmitool gave up after Ironic's own retries (~60 s): busy, internal error, wrong "
        "password and a silent BMC all read the same here, so the node is not worth waiting on",
    ),
    _row(
        r"Connection refused|Failed to establish a new connection|No route to host|"
        r"Name or service not known|Max retries exceeded|Unable to establish IPMI",
        BMCUnreachable,
        "the request never reached the BMC",
    ),
    _row(
        r"waiting for callback|did not come up",
        BootFailure,
        "the deploy never heard from the node: it did not boot what it was given",
    ),
    _row(
        r"timed out|Timeout|ReadTimeout|took too long",
        BMCTimeout,
        "sent, no answer in time: outcome unknown",
    ),
    _row(
        r"Failed to set node power state|Failed to change power state|power failure|"
        r"PowerStateFailure",
        PowerFailure,
        "the BMC took the power action and the node did not reach the state",
    ),
    _row(
        r"boot device|Failed to set boot",
        BootFailure,
        "the boot device was not applied",
    ),
    _row(
        r"not supported|UnsupportedDriverExtension|unsupported",
        UnsupportedOperation,
        "the driver or BMC cannot do what the deploy asked",
    ),
)


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What Ironic kept about a node after an attempt."""

    node: str
    driver: str | None = None
    provision_state: str | None = None
    last_error: str | None = None
    #: Ironic's ``fault`` field ("power failure", "clean failure", ...)
    fault: str | None = None
    #: ERROR/WARNING history events since the claim, newest first
    history: tuple[str, ...] = ()

    def texts(self) -> list[str]:
        return [t for t in (*self.history, self.last_error, self.fault) if t]


def classify_text(text: str, *, node: str | None = None) -> BmaasError | None:
    """One message as a fault: the ``[bmaas ...]`` prefix exactly, else the
    first :data:`STOCK_MESSAGES` row that matches; None when neither does."""
    parsed = faulttext.parse(text)
    if parsed is not None:
        fault = parsed.to_fault()
        if isinstance(fault, BMCFault):
            fault.node = node
            fault.status = f"bmaas {parsed.code}"
        return fault
    for row in STOCK_MESSAGES:
        if row.pattern.search(text):
            if issubclass(row.fault, BMCFault):
                return row.fault(_clip(text), node=node, operation="ironic deploy")
            return InputError(_clip(text), node=node)
    return None


def classify(evidence: Evidence, *, fallback: BmaasError | None = None) -> BmaasError:
    """The fault that best explains ``evidence``: the first text that
    classifies (prefix or table); else ``fallback`` (what the client itself
    saw, e.g. its own wait running out); else ``UnclassifiedFault``."""
    texts = evidence.texts()
    for text in texts:
        found = classify_text(text, node=evidence.node)
        if found is not None:
            return found
    if fallback is not None:
        return fallback
    said = texts[0] if texts else f"provision state {evidence.provision_state}"
    return UnclassifiedFault(
        _clip(said), node=evidence.node, driver=evidence.driver, operation="ironic deploy"
    )


def recent_errors(history: Iterable[dict[str, object]], since: str | None) -> tuple[str, ...]:
    """History events at ERROR or WARNING severity created at or after
    ``since`` (an ISO timestamp from Ironic's own clock), newest first."""
    picked: Sequence[str] = [
        str(h.get("event") or "")
        for h in history
        if str(h.get("severity", "")).upper() in ("ERROR", "WARNING")
        and (since is None or str(h.get("created_at") or "") >= since)
    ]
    return tuple(reversed([t for t in picked if t]))


def _clip(text: str, limit: int = 400) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"
