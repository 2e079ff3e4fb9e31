"""hwlab's JSON state files read as inputs: a shape, every problem at once.

A state file (``vm.json``, say) is written by hwlab, but what is on disk
when the next command reads it is whatever is there: cut short by a full
disk, edited by hand, written by another version, planted. Issue 44 found
``hwlab vm down`` ending in a traceback on a ``vm.json`` that was not JSON,
an array, or had a key too many or too few, and hanging on one that listed a
million domains. So a state file is read like every other input:

* through :func:`bmaas.hwlab.statefiles.read_private` (no link, a regular
  file, at most ``limit`` bytes);
* parsed as strict JSON (``NaN`` and ``Infinity`` refused);
* walked against a declared shape of :mod:`bmaas.fields` (the field tables
  lab files and fault rules are read with) -- :func:`Object` (exactly these
  keys), :class:`ListOf` and :class:`MapOf` (each with a bound on its
  length) and :func:`Value` (a leaf, checked by a :mod:`bmaas.validate`
  rule) -- so every
  problem is one line naming the file and the field (``domains[3]``,
  ``pids.vbmcd.start``), and all of them are reported at once
  (:class:`StateFileProblems`, exit 2 on the command line).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bmaas.fields import Checker, Field, ListOf, MapOf, Record, Shape
from bmaas.hwlab.statefiles import StateFileRefused, read_private

__all__ = ["ListOf", "MapOf", "Object", "StateFileProblems", "Value", "load"]

#: one problem: the field's path (``""``: the document) and what is wrong
Problem = tuple[str, str]


class StateFileProblems(StateFileRefused):
    """Every problem of one state file (``problems``), each one line with
    the file and the field."""

    def __init__(self, path: Path, problems: list[Problem]) -> None:
        self.problems = [
            StateFileRefused(message, source=str(path), field=field or None)
            for field, message in problems
        ]
        first = self.problems[0]
        super().__init__(first.message, source=first.source, field=first.field)


def Value(check: Callable[[Any], Any]) -> Field:  # noqa: N802 - reads as the shape it makes
    """A leaf: ``check(value)`` returns it or raises ``ValueError``."""
    return Field(check)


def Object(fields: Mapping[str, Shape]) -> Record:  # noqa: N802 - reads as the shape it makes
    """A JSON object with exactly ``fields``' keys: none missing, none more."""
    return Record(
        {
            key: shape if isinstance(shape, Field) else Field(shape, required=True)
            for key, shape in fields.items()
        },
        unknown="unknown key (allowed: {allowed})",
        sort_allowed=False,
        missing="is missing",
        not_mapping="must be a JSON object, not {json}",
    )


def _not_finite(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def load(path: Path, shape: Shape, *, limit: int) -> Any:
    """The document in ``path``, checked against ``shape``: one
    :class:`StateFileProblems` with every problem, or the value.
    ``FileNotFoundError`` as usual; a link, a non-regular file or one larger
    than ``limit`` bytes is a :class:`StateFileRefused`."""
    text = read_private(path, limit=limit)
    try:
        document = json.loads(text, parse_constant=_not_finite)
    except json.JSONDecodeError as exc:
        raise StateFileProblems(
            path, [("", f"is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})")]
        ) from None
    except (ValueError, RecursionError) as exc:  # NaN, nesting past the parser's depth
        reason = str(exc) if isinstance(exc, ValueError) else "nested too deeply"
        raise StateFileProblems(path, [("", f"is not JSON hwlab wrote ({reason})")]) from None
    check = Checker(str(path))
    value = shape.walk(document, check, "", None, None)
    if check.problems:
        raise StateFileProblems(path, [(p.field or "", p.message) for p in check.problems])
    return value
