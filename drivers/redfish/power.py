"""Which ``ResetType`` a power action sends, by what the system offers.

A system says which reset types ``ComputerSystem.Reset`` takes in the
action's ``ResetType@Redfish.AllowableValues`` or, on Supermicro X12/X13/H13,
only in the ``@Redfish.ActionInfo`` resource the action links. A system that
says neither is assumed to take them all (sushy's rule), and so is one whose
ActionInfo link cannot be read (Supermicro X12 and others answer its GET with
404): what a service does not say is not a refusal -- the reset type is sent
and the BMC's answer decides (a refusal there is ``UnsupportedOperation``,
never counted). Each action sends the first type of its row in
:data:`RESET_TYPES` that the system offers (the rows and their why:
docs/vendors.md, "Soft power, per reset type"). Two rules with their
reasons: ``PushPowerButton`` (iLO 5's only soft off) is sent only while the
node reads *on*, since pressed on a node that is off it would power it on;
and a service that offers only ``On`` and ``ForceOff`` reboots as
``ForceOff``, a wait until the node reads off (under the call's deadline),
then ``On`` (:data:`COMPOSED`).

Supermicro X13 lists ``"GracefulShutdownGracefulRestart"``: two values fused
into one string. A listed value that is not a ResetType but a concatenation of
ResetTypes reads as each of them (:func:`offered`).
"""

from __future__ import annotations

import json
from typing import Any

import sushy.exceptions as sushy_exc

from bmaas.driver import PowerAction

__all__ = [
    "COMPOSED",
    "PUSH_BUTTON",
    "RESET_TYPES",
    "RESET_VALUES",
    "UNREADABLE",
    "choose",
    "composed",
    "listed",
    "offered",
]

#: what a read of the reset's ActionInfo may raise when the service cannot
#: serve it (an HTTP error answer, a body that is not a JSON object): the
#: ActionInfo says nothing then. A transport failure is not among them.
UNREADABLE: tuple[type[Exception], ...] = (
    sushy_exc.HTTPError,
    sushy_exc.MalformedAttributeError,
    json.JSONDecodeError,
)

#: every ResetType in DMTF's schema (ComputerSystem.Reset)
RESET_VALUES: tuple[str, ...] = (
    "On",
    "ForceOff",
    "GracefulShutdown",
    "GracefulRestart",
    "ForceRestart",
    "Nmi",
    "ForceOn",
    "PushPowerButton",
    "PowerCycle",
    "Suspend",
    "Pause",
    "Resume",
    "FullPowerCycle",
)
PUSH_BUTTON = "PushPowerButton"

#: the reset types of each action, in order of preference
RESET_TYPES: dict[PowerAction, tuple[str, ...]] = {
    PowerAction.ON: ("On", "ForceOn"),  # older iDRACs list only ForceOn
    PowerAction.OFF: ("ForceOff",),
    PowerAction.SOFT_OFF: ("GracefulShutdown", PUSH_BUTTON),
    PowerAction.REBOOT: ("ForceRestart", "PowerCycle"),
    PowerAction.SOFT_REBOOT: ("GracefulRestart",),  # none (Dell R630): soft off, then on
}


def listed(action: dict[str, Any]) -> list[str] | None:
    """The values ``action`` (the ``#ComputerSystem.Reset`` JSON) lists
    itself; None when it lists none (look for its ActionInfo)."""
    values = action.get("ResetType@Redfish.AllowableValues")
    return [str(v) for v in values] if isinstance(values, list) else None


def from_action_info(info: dict[str, Any]) -> list[str] | None:
    """The ``ResetType`` values an ActionInfo resource lists."""
    for parameter in info.get("Parameters") or ():
        if isinstance(parameter, dict) and parameter.get("Name") == "ResetType":
            values = parameter.get("AllowableValues")
            return [str(v) for v in values] if isinstance(values, list) else None
    return None


def _split(value: str) -> list[str] | None:
    """``value`` as a concatenation of ResetTypes (longest first), or None."""
    if not value:
        return []
    for name in sorted(RESET_VALUES, key=len, reverse=True):
        if value.startswith(name):
            rest = _split(value[len(name) :])
            if rest is not None:
                return [name, *rest]
    return None


def offered(values: list[str] | None) -> set[str]:
    """The ResetTypes ``values`` offers (None: every one), fused values split."""
    if values is None:
        return set(RESET_VALUES)
    found: set[str] = set()
    for value in values:
        found.update(_split(value) or [value])
    return found


def choose(action: PowerAction, offer: set[str]) -> str | None:
    """The first reset type of ``action``'s row that ``offer`` holds."""
    return next((t for t in RESET_TYPES[action] if t in offer), None)


#: actions a system without their own reset type gets in two steps: the
#: first type of the first action's row it offers, then the second's
COMPOSED: dict[PowerAction, tuple[PowerAction, PowerAction]] = {
    PowerAction.REBOOT: (PowerAction.OFF, PowerAction.ON),
}


def composed(action: PowerAction, offer: set[str]) -> tuple[str, str] | None:
    """The two reset types that make ``action`` where ``offer`` has none of
    its own (reboot: ``ForceOff``, then ``On``), or None."""
    parts = COMPOSED.get(action)
    if parts is None:
        return None
    first, then = choose(parts[0], offer), choose(parts[1], offer)
    return (first, then) if first is not None and then is not None else None
