"""What a check says: Success, Warning or Failure, with details.

The vocabulary is ``nova-status upgrade check``'s: **Success** needs nothing,
**Warning** needs a look (the fleet works, with less capacity or less
safety), **Failure** needs a fix before bmaas can be trusted with the fleet.
The command's exit code is the worst result: 0, 1 or 2.

A check function fills an :class:`Outcome` (``note``, ``warn``, ``fail``; the
result is the worst line added); the runner names it and times it into a
frozen :class:`CheckResult`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from enum import IntEnum
from typing import Any

__all__ = ["CheckResult", "Outcome", "Result", "listing"]

#: node names shown in one detail line; the JSON output has them all
SHOWN_NAMES = 10


class Result(IntEnum):
    """A check's verdict; its value is the exit code it asks for."""

    SUCCESS = 0
    WARNING = 1
    FAILURE = 2

    def __str__(self) -> str:
        return self.name.capitalize()


def listing(names: Sequence[str], limit: int = SHOWN_NAMES) -> str:
    """``a, b, c and 7 more``: a line stays readable on a 1000-node fleet."""
    shown = ", ".join(names[:limit])
    if len(names) > limit:
        shown += f" and {len(names) - limit} more"
    return shown


@dataclasses.dataclass
class Outcome:
    """What one check found, line by line; the result is the worst line."""

    result: Result = Result.SUCCESS
    details: list[str] = dataclasses.field(default_factory=list)
    #: node names by finding (``timeout``, ``auth``, ...), all of them, for --json
    nodes: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    def add(
        self, result: Result, line: str, *, key: str | None = None, nodes: Iterable[str] = ()
    ) -> Outcome:
        self.result = max(self.result, result)
        self.details.append(line)
        if key is not None:
            self.nodes.setdefault(key, []).extend(nodes)
        return self

    def note(self, line: str, *, key: str | None = None, nodes: Iterable[str] = ()) -> Outcome:
        """A fact worth printing that needs nothing from anyone."""
        return self.add(Result.SUCCESS, line, key=key, nodes=nodes)

    def warn(self, line: str, *, key: str | None = None, nodes: Iterable[str] = ()) -> Outcome:
        return self.add(Result.WARNING, line, key=key, nodes=nodes)

    def fail(self, line: str, *, key: str | None = None, nodes: Iterable[str] = ()) -> Outcome:
        return self.add(Result.FAILURE, line, key=key, nodes=nodes)


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One row of the report."""

    name: str
    result: Result
    details: tuple[str, ...]
    nodes: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    elapsed: float = 0.0

    @classmethod
    def of(cls, name: str, outcome: Outcome, elapsed: float = 0.0) -> CheckResult:
        nodes = {key: sorted(set(names)) for key, names in outcome.nodes.items()}
        return cls(name, outcome.result, tuple(outcome.details), nodes, elapsed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "result": str(self.result),
            "details": list(self.details),
            "nodes": self.nodes,
            "elapsed": round(self.elapsed, 3),
        }
