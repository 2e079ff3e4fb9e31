"""What a machine is and how its firmware is set: the typed answers of the
driver contract's lifecycle capabilities (issue 51).

:class:`~bmaas.driver.BMCDriver` returns these from ``get_firmware_inventory``
(:class:`FirmwareComponent`), ``get_bios`` (:class:`BiosSettings`, with the
attribute registry as :class:`AttributeInfo` when the BMC publishes one) and
``get_inventory(detail=True)`` (:class:`Processor`, :class:`Dimm`,
:class:`Nic`, :class:`Disk`). Every one is a small frozen dataclass, so a
protocol's answer never leaks above the driver edge.

:func:`check_bios_changes` is the one check of a BIOS change against the
registry: an unknown attribute, a read-only one, a value of the wrong type,
out of range or not among the allowed values -- every problem at once, one
line each, before anything is sent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from bmaas.faults import InputError

__all__ = [
    "APPLY_TIMES",
    "AttributeInfo",
    "BiosProblems",
    "BiosSettings",
    "Dimm",
    "Disk",
    "FirmwareComponent",
    "Nic",
    "Processor",
    "TaskStatus",
    "UpdateTask",
    "check_bios_changes",
    "coerce_value",
]

#: when a BIOS change applies (Redfish ``@Redfish.SettingsApplyTime``):
#: ``OnReset`` at the next reboot (every BIOS), ``Immediate`` where the
#: service lists it in ``SupportedApplyTimes``
APPLY_TIMES = ("OnReset", "Immediate")


@dataclasses.dataclass(frozen=True)
class FirmwareComponent:
    """One firmware image the BMC reports (Redfish ``FirmwareInventory``
    member): ``id`` as the service names it, ``version`` None when it does not
    say, ``updateable`` None when it does not say."""

    id: str
    name: str
    version: str | None
    updateable: bool | None = None


@dataclasses.dataclass(frozen=True)
class UpdateTask:
    """Where a BMC reports a firmware update it took: ``kind`` ``task`` (a
    Redfish TaskMonitor or Task), ``job`` (a vendor's job, iDRAC's
    ``Jobs/JID_...``) or ``none`` (the service says nothing to follow: only
    the version read afterwards tells); ``path`` the resource to read."""

    kind: str
    path: str | None = None
    #: the firmware components the update is for (their ids; empty: the BMC chooses)
    targets: tuple[str, ...] = ()


#: task states after which a task never changes again (Redfish ``TaskState``)
TASK_ENDED = ("Completed", "Exception", "Killed", "Cancelled")


@dataclasses.dataclass(frozen=True)
class TaskStatus:
    """A task as one read shows it: Redfish ``TaskState`` (a vendor job's
    state put in its words), ``PercentComplete`` when it says, and its
    messages (``MessageId: text``). A task that ended badly never comes back
    as one of these: the driver raises its fault."""

    state: str
    percent: int | None = None
    messages: tuple[str, ...] = ()

    @property
    def ended(self) -> bool:
        return self.state in TASK_ENDED


@dataclasses.dataclass(frozen=True)
class AttributeInfo:
    """One attribute of a BIOS attribute registry: its type (``Enumeration``,
    ``String``, ``Integer``, ``Boolean``, ``Password``), the values an
    enumeration allows, whether it is read-only, an integer's bounds and a
    string's longest length."""

    type: str
    allowed: tuple[str, ...] | None = None
    read_only: bool = False
    lower: int | None = None
    upper: int | None = None
    max_length: int | None = None


@dataclasses.dataclass(frozen=True)
class BiosSettings:
    """A system's BIOS attributes: ``current`` as the firmware runs them,
    ``pending`` the ones set and waiting for the next reset (only those that
    differ from current), ``registry`` by attribute name when the BMC
    publishes its attribute registry (None: not published, changes are sent
    unchecked), ``apply_times`` the service's ``SupportedApplyTimes``
    (empty: it does not say; ``OnReset`` is always taken)."""

    current: dict[str, Any]
    pending: dict[str, Any]
    registry: dict[str, AttributeInfo] | None = None
    apply_times: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Processor:
    id: str
    model: str | None = None
    cores: int | None = None
    threads: int | None = None
    #: Redfish ``InstructionSet`` (``x86-64``, ``ARM-A64``, ...), when the BMC says
    instruction_set: str | None = None


@dataclasses.dataclass(frozen=True)
class Dimm:
    id: str
    size_mb: int | None = None
    kind: str | None = None
    speed_mhz: int | None = None


@dataclasses.dataclass(frozen=True)
class Nic:
    id: str
    mac: str | None = None
    speed_mbps: int | None = None
    link: str | None = None


@dataclasses.dataclass(frozen=True)
class Disk:
    id: str
    name: str | None = None
    size_bytes: int | None = None
    model: str | None = None


class BiosProblems(InputError):
    """Every problem of one BIOS change (``problems``), each an
    ``InputError`` naming the node and the attribute; reads as the first.
    The CLI prints each on its own line (exit 2)."""

    def __init__(self, problems: list[InputError]) -> None:
        first = problems[0]
        super().__init__(first.message, field=first.field, node=first.node)
        self.problems = problems

    def __str__(self) -> str:
        """Every problem, on the one line a fleet command gives a node."""
        head = f"node {self.node!r}: " if self.node else ""
        return head + "; ".join(
            f"{p.field}: {p.message}" if p.field else p.message for p in self.problems
        )

    def to_dict(self) -> dict[str, Any]:
        record = super().to_dict()
        record["problems"] = [str(p) for p in self.problems]
        return record


def coerce_value(text: str, info: AttributeInfo | None, current: Any = None) -> Any:
    """A command line's ``VALUE`` as the attribute's type: an integer for
    ``Integer``, true/false for ``Boolean``; without a registry, the type of
    the attribute's current value. A text that does not parse stays text
    (:func:`check_bios_changes` then names the wrong type)."""
    kind = info.type if info is not None else None
    if kind is None and isinstance(current, bool):
        kind = "Boolean"
    elif kind is None and isinstance(current, int):
        kind = "Integer"
    if (
        kind == "Integer"
        and text.strip().lstrip("+-").isascii()
        and text.strip().lstrip("+-").isdigit()
    ):
        return int(text.strip())
    if kind == "Boolean" and text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    return text


def _problem(info: AttributeInfo, value: Any) -> str | None:
    if info.read_only:
        return "is read-only"
    kind = info.type
    if kind == "Integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{value!r} is not an integer"
        if info.lower is not None and value < info.lower:
            return f"{value} is below {info.lower} (allowed {info.lower}..{info.upper})"
        if info.upper is not None and value > info.upper:
            return f"{value} is above {info.upper} (allowed {info.lower}..{info.upper})"
    elif kind == "Boolean":
        if not isinstance(value, bool):
            return f"{value!r} is not true or false"
    elif kind in ("String", "Password", "Enumeration"):
        if not isinstance(value, str):
            return f"{value!r} is not a string"
        if kind == "Enumeration" and info.allowed is not None and value not in info.allowed:
            return f"{value!r} is not one of {', '.join(info.allowed)}"
        if info.max_length is not None and len(value) > info.max_length:
            return f"is longer than {info.max_length} characters"
    return None


def check_bios_changes(
    changes: Mapping[str, Any],
    registry: Mapping[str, AttributeInfo] | None,
    *,
    node: str | None = None,
) -> None:
    """Raise :class:`BiosProblems` listing every problem of ``changes``
    against ``registry`` (unknown attribute, read-only, wrong type, out of
    range, not allowed), in the order given; nothing when all is well or
    there is no registry to check against (the BMC's answer decides then).
    An empty change is a problem too: there is nothing to send."""
    problems: list[InputError] = []
    if not changes:
        problems.append(InputError("no attribute to set (give ATTR=VALUE)", node=node))
    for name, value in changes.items():
        field = f"bios.{name}"
        if registry is None:
            continue
        info = registry.get(name)
        if info is None:
            problems.append(
                InputError("no such attribute in the BMC's registry", field=field, node=node)
            )
            continue
        text = _problem(info, value)
        if text is not None:
            problems.append(InputError(text, field=field, node=node))
    if problems:
        raise BiosProblems(problems)
