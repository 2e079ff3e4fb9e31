"""What a proxy can do with each fault effect, and what a client then sees.

A proxy sits on the wire in front of a BMC it does not control: it holds the
packets (wire effects) and can answer in the BMC's place (BMC effects), but
cannot act on the machine, so hardware effects are refused -- save
``power_stuck`` (:data:`ACKNOWLEDGED`: the power action answered as accepted
and never relayed) and, on Redfish, the firmware update effects
(:mod:`bmaas.hwlab.proxy.updates`); nor can it count the BMC's sessions
(``session_limit``, :data:`REFUSED`). Rules asking for one are refused with
an :class:`~bmaas.faults.InputError` that names the rule. Inside an IPMI 2.0
session it reads requests only with the BMC credentials (else operation
:data:`OPAQUE`); docs/lab.md ("Proxy") says what each effect looks like.

:data:`EXPECTED_FAULTS` is the one table of what the bmaas drivers raise for
each effect carried out by a proxy; the lab tests through the drivers
assert against it.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from bmaas.driver import Operation
from bmaas.fakes.effects import EFFECTS, Act
from bmaas.fakes.faults import Effect, FaultRule, Layer
from bmaas.fakes.incidents import INCIDENTS
from bmaas.faults import (
    BMCFault,
    InputError,
)
from bmaas.hwlab.operations import REDFISH_ROUTES

if TYPE_CHECKING:
    from bmaas.hwlab.proxy.spec import ProxySpec

__all__ = [
    "ACKNOWLEDGED",
    "EXPECTED_FAULTS",
    "OPAQUE",
    "PROTOCOLS",
    "REFUSED",
    "SUPPORTED",
    "RuleProblems",
    "check_rule",
    "expected_fault",
    "ipmi_needs_credentials",
    "supported_rules",
]

LOG = logging.getLogger(__name__)

PROTOCOLS = ("ipmi", "redfish")

#: the operation name of an IPMI in-session request the proxy cannot read
#: (no credentials, or a session it could not derive keys for). Only rules
#: whose operation glob matches it (``*``) apply, and only wire effects.
OPAQUE = "opaque"

_HARDWARE_WHY = (
    "acts on the server's hardware; a proxy only sits on the wire in front of a real BMC "
    "and can fake wire and BMC effects, never power or boot behaviour (use an hwlab "
    "emulated node for hardware effects)"
)

#: effects a proxy never carries out, and why: a rule asking for one is refused
REFUSED: dict[Effect, str] = {
    **{e: _HARDWARE_WHY for e in Effect if e.layer is Layer.HARDWARE},
    Effect.SESSION_LIMIT: (
        "fires on the number of sessions the BMC holds, which a proxy cannot count (sessions "
        "opened around it, closed inside encrypted IPMI sessions or expired in the BMC); use "
        "an hwlab emulated node, or busy on operation 'login' for a refused login"
    ),
}

#: hardware effects a proxy still carries out, per protocol, by answering in
#: the BMC's place and never relaying the request: ``power_stuck`` is the
#: Redfish Reset acknowledged (204), or the IPMI Chassis Control answered
#: with completion code 0 (forged with the session keys, so the proxy needs
#: the BMC credentials), that the machine never hears of -- what a client
#: meets when a BMC accepts a power action and the power never moves (vbmc's
#: natural one: acknowledged, never executed by libvirt)
ACKNOWLEDGED: dict[str, frozenset[Effect]] = {
    # and the firmware update effects: SimpleUpdate answered with a task the
    # proxy serves itself (bmaas.hwlab.proxy.updates)
    "redfish": frozenset(
        {
            Effect.POWER_STUCK,
            Effect.TASK_HANG,
            Effect.UPDATE_REJECTED,
            Effect.VERSION_UNCHANGED,
            Effect.UPDATE_REBOOT,
        }
    ),
    "ipmi": frozenset({Effect.POWER_STUCK}),
}

#: effects a proxy carries out, per protocol (everything it does not refuse)
SUPPORTED: dict[str, frozenset[Effect]] = {
    protocol: frozenset(e for e in Effect if e not in REFUSED or e in ACKNOWLEDGED[protocol])
    for protocol in PROTOCOLS
}

#: IPMI effects a proxy can carry out on an in-session request only when it
#: holds the keys: it must answer for the BMC (or rewrite its answer)
_FORGED = frozenset(e for e, d in EFFECTS.items() if d.act in (Act.ANSWER, Act.CORRUPT))

#: what a bmaas driver raises when a proxy carries out each effect (a view
#: of :data:`bmaas.fakes.effects.EFFECTS`)
EXPECTED_FAULTS: dict[Effect, type[BMCFault]] = {
    e: d.fault for e, d in EFFECTS.items() if d.fault is not None and e in SUPPORTED["ipmi"]
}


def expected_fault(
    effect: Effect, protocol: str, operation: str, *, incident: str | None = None
) -> type[BMCFault] | None:
    """The fault class a bmaas driver raises when a proxy carries out
    ``effect`` on ``operation``; ``None`` when the call succeeds (duplicate).
    For the ``incident`` effect, the named incident's own class."""
    if effect is Effect.INCIDENT:
        return INCIDENTS[incident].fault if incident is not None else None
    login = EFFECTS[effect].ipmi_login_fault
    if protocol == "ipmi" and operation == Operation.LOGIN and login is not None:
        return login
    return EXPECTED_FAULTS.get(effect)


#: what a Redfish proxy can name a request (by method and path; clients such
#: as Ironic's sushy send no X-Bmaas-Operation header): a boot device read is
#: the same GET of the system as a power read, so ``boot.get`` never fires
REDFISH_PROXY_OPERATIONS = tuple(sorted({str(op) for _, _, op in REDFISH_ROUTES}))


def _operations(protocol: str) -> list[str]:
    names = [str(op) for op in Operation]
    return [*names, OPAQUE] if protocol == "ipmi" else names


def ipmi_needs_credentials(rule: FaultRule) -> bool:
    """Whether carrying out ``rule`` on IPMI needs the BMC credentials: a BMC
    effect that can fire on an in-session request, or a hardware effect the
    proxy acknowledges in the BMC's place (:data:`ACKNOWLEDGED`)."""
    if rule.effect not in _FORGED and rule.effect not in ACKNOWLEDGED["ipmi"]:
        return False
    return any(rule.matches(op, "ipmi") for op in _operations("ipmi") if op != Operation.LOGIN)


def check_rule(
    rule: FaultRule,
    protocol: str,
    *,
    credentials: bool,
    where: str,
    source: str | None = None,
    line: int | None = None,
    node: str | None = None,
) -> None:
    """Refuse a rule a proxy for ``protocol`` cannot carry out, saying why."""
    name = f"rule {rule.name or rule.describe()!r}"
    if rule.effect in REFUSED and rule.effect not in ACKNOWLEDGED.get(protocol, frozenset()):
        raise InputError(
            f"{name}: {rule.effect} {REFUSED[rule.effect]}",
            source=source,
            line=line,
            field=where,
            node=node,
        )
    unseen = rule.unseen_on([protocol])
    if unseen is not None:
        # the same refusal as on an emulated node (FaultRule.unseen_on): a vendor
        # incident with no answer over this proxy's protocol fired, was logged as
        # fired, and changed no answer
        raise InputError(f"{name}: {unseen}", source=source, line=line, field=where, node=node)
    if rule.protocol not in ("*", protocol):
        return  # aimed at another protocol: never fires here, harmless
    if protocol == "ipmi" and not credentials and ipmi_needs_credentials(rule):
        raise InputError(
            f"{name}: answering in-session IPMI requests for the BMC ({rule.effect}) needs the "
            "session keys, which the proxy derives from the BMC credentials: give the proxy "
            "username and password, or narrow the rule to operation 'login'",
            source=source,
            line=line,
            field=where,
            node=node,
        )
    if protocol == "redfish" and not any(
        fnmatch.fnmatchcase(op, rule.operation) for op in REDFISH_PROXY_OPERATIONS
    ):
        raise InputError(
            f"{name}: a Redfish proxy names requests by method and path, so operation "
            f"{rule.operation!r} never matches (it sees {', '.join(REDFISH_PROXY_OPERATIONS)}; "
            "a boot device read is the system's GET, operation 'power.get')",
            source=source,
            line=line,
            field=where,
            node=node,
        )
    if protocol == "ipmi" and not credentials:
        visible = [Operation.LOGIN.value, OPAQUE]
        if not any(fnmatch.fnmatchcase(op, rule.operation) for op in visible):
            raise InputError(
                f"{name}: without the BMC credentials the proxy cannot tell in-session IPMI "
                f"requests apart, so operation {rule.operation!r} never matches; give the "
                "proxy username and password, or use operation '*' or 'login'",
                source=source,
                line=line,
                field=where,
                node=node,
            )


def supported_rules(rules: Iterable[FaultRule], spec: ProxySpec, *, why: str) -> list[FaultRule]:
    """The rules a proxy for ``spec`` can carry out; the others are logged
    and skipped. For profiles, which describe a whole rack: a rule the user
    wrote is refused instead (:func:`check_rules`)."""
    kept = []
    for rule in rules:
        try:
            check_rule(rule, spec.protocol, credentials=spec.credentials, where=why)
        except InputError as exc:
            LOG.warning("%s: skipping a %s: %s", spec.node, why, exc.message)
            continue
        kept.append(rule)
    return kept


class RuleProblems(InputError):
    """Every rule of one request or one node a proxy cannot carry out
    (:attr:`problems`, one :class:`~bmaas.faults.InputError` each, naming
    its rule); ``str()`` is one line, the problems joined with ``; `` (what
    the control API answers)."""

    def __init__(self, problems: Sequence[InputError]) -> None:
        first = problems[0]
        super().__init__(
            first.message, source=first.source, line=first.line, field=first.field, node=first.node
        )
        self.problems = list(problems)

    def __str__(self) -> str:
        return "; ".join(str(p) for p in self.problems)


def check_rules(
    rules: Iterable[FaultRule],
    protocol: str,
    *,
    credentials: bool,
    field: str = "rules",
    source: str | None = None,
    lines: Sequence[int | None] = (),
    node: str | None = None,
) -> None:
    """:func:`check_rule` for each rule; ``lines`` locates them in ``source``.
    Every refused rule at once: :class:`RuleProblems`."""
    problems = []
    for i, rule in enumerate(rules):
        try:
            check_rule(
                rule,
                protocol,
                credentials=credentials,
                where=f"{field}[{i}]",
                source=source,
                line=lines[i] if i < len(lines) else None,
                node=node,
            )
        except InputError as exc:
            problems.append(exc)
    if problems:
        raise RuleProblems(problems)
