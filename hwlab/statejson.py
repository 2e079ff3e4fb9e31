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
* walked against a declared shape -- :class:`Object` (exactly these keys),
  :class:`ListOf` and :class:`MapOf` (each with a bound on its length) and
  :class:`Value` (a leaf, checked by a :mod:`bmaas.validate` rule) -- so every
  problem is one line naming the file and the field (``domains[3]``,
  ``pids.vbmcd.start``), and all of them are reported at once
  (:class:`StateFileProblems`, exit 2 on the command line).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from bmaas.hwlab.statefiles import StateFileRefused, read_private
from bmaas.validate import is_name

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


class Shape(Protocol):
    def walk(self, value: Any, path: str, problems: list[Problem]) -> Any: ...


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return repr(value) if len(repr(value)) <= 40 else type(value).__name__


def _at(path: str, key: str) -> str:
    # a key the file made up is shown quoted and cut short: one line, always
    if not (is_name(key) and len(key) <= 64):
        key = repr(key if len(key) <= 64 else key[:61] + "...")
    return f"{path}.{key}" if path else key


@dataclasses.dataclass(frozen=True)
class Value:
    """A leaf: ``check(value)`` returns it (converted, maybe) or raises
    ``ValueError`` in :mod:`bmaas.validate`'s words (``must be ...``)."""

    check: Callable[[Any], Any]

    def walk(self, value: Any, path: str, problems: list[Problem]) -> Any:
        try:
            return self.check(value)
        except ValueError as exc:
            problems.append((path, str(exc)))
            return None


@dataclasses.dataclass(frozen=True)
class Object:
    """A JSON object with exactly ``fields``' keys: none missing, none more."""

    fields: Mapping[str, Shape]

    def walk(self, value: Any, path: str, problems: list[Problem]) -> Any:
        if not isinstance(value, dict):
            problems.append((path, f"must be a JSON object, not {_kind(value)}"))
            return None
        allowed = ", ".join(self.fields)
        for key in value:
            if key not in self.fields:
                problems.append((_at(path, key), f"unknown key (allowed: {allowed})"))
        out = {}
        for key, shape in self.fields.items():
            if key not in value:
                problems.append((_at(path, key), "is missing"))
            else:
                out[key] = shape.walk(value[key], _at(path, key), problems)
        return out


@dataclasses.dataclass(frozen=True)
class ListOf:
    """A JSON array of at most ``most`` items (at least ``least``), each an
    ``item``; ``unique``: no item twice."""

    item: Shape
    most: int
    least: int = 0
    unique: bool = False

    def walk(self, value: Any, path: str, problems: list[Problem]) -> Any:
        if not isinstance(value, list):
            problems.append((path, f"must be an array, not {_kind(value)}"))
            return None
        if not self.least <= len(value) <= self.most:
            # refused before any item is looked at: the bound is the point
            problems.append(
                (path, f"must hold {self.least} to {self.most} items, not {len(value)}")
            )
            return None
        out = [self.item.walk(v, f"{path}[{i}]", problems) for i, v in enumerate(value)]
        if self.unique:
            seen: set[Any] = set()
            for i, v in enumerate(out):
                if v is not None and v in seen:
                    problems.append((f"{path}[{i}]", f"{v!r} is listed twice"))
                seen.add(v)
        return out


@dataclasses.dataclass(frozen=True)
class MapOf:
    """A JSON object of at most ``most`` entries: each key checked by
    ``key`` (a :mod:`bmaas.validate` rule), each value a ``value``."""

    key: Callable[[Any], Any]
    value: Shape
    most: int

    def walk(self, value: Any, path: str, problems: list[Problem]) -> Any:
        if not isinstance(value, dict):
            problems.append((path, f"must be a JSON object, not {_kind(value)}"))
            return None
        if len(value) > self.most:
            problems.append((path, f"must hold at most {self.most} entries, not {len(value)}"))
            return None
        out = {}
        for key, item in value.items():
            try:
                self.key(key)
            except ValueError as exc:
                problems.append((_at(path, key), f"key {exc}"))
                continue
            out[key] = self.value.walk(item, _at(path, key), problems)
        return out


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
    problems: list[Problem] = []
    value = shape.walk(document, "", problems)
    if problems:
        raise StateFileProblems(path, problems)
    return value
