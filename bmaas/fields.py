"""Declared fields: a record is a table, and checking one reports every problem.

A :class:`Field` declares one key: how its value is checked (a
:mod:`bmaas.validate` rule, or a nested :class:`Record`, :class:`ListOf`,
:class:`MapOf`), whether it is required or its default, its bounds and unit
(for people: ``doc``), its allowed values, and the message said instead of
the rule's own words where a file's readers know another one. A
:class:`Record` is a table of fields plus cross-field checks (small
functions of a :class:`Found`). Walking a mapping against a record puts
every problem -- unknown keys, missing ones, bad values, failed cross
checks -- into a :class:`Checker`, one ``InputError`` each naming the
source file, the line (:mod:`bmaas.yamlsrc` keeps them) and the field's path
(``nodes[2].hardware.cpus``). Lab files, fault rules, proxy specs,
``clouds.yaml``, inventory networks and hwlab's JSON state files are read
through it.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from bmaas import validate
from bmaas.faults import InputError
from bmaas.yamlsrc import line_of

__all__ = [
    "MISSING",
    "Checker",
    "Field",
    "Found",
    "ListOf",
    "MapOf",
    "Problems",
    "Record",
    "at",
    "boolean",
    "kind_of",
    "number",
    "one_of",
    "optional",
    "seconds",
    "shown",
    "text",
    "whole",
]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: a field with no default: absent, it is absent from what the walk returns
MISSING: Any = _Missing()


class Problems(InputError):
    """Every problem found in one document (``problems``), each an
    ``InputError`` with source, line and field; reads as the first."""

    def __init__(self, problems: list[InputError]) -> None:
        first = problems[0]
        super().__init__(
            first.message, source=first.source, line=first.line, field=first.field, node=first.node
        )
        self.problems = problems

    def __str__(self) -> str:
        text = str(self.problems[0])
        if len(self.problems) > 1:
            text += f" (and {len(self.problems) - 1} more problem(s))"
        return text


class Checker:
    """Collects the problems of one document (``source``) while it is walked."""

    def __init__(self, source: str | None) -> None:
        self.source = source
        self.problems: list[InputError] = []

    def fail(
        self,
        message: str,
        *,
        data: Any = None,
        key: str | None = None,
        field: str | None = None,
        node: str | None = None,
        line: int | None = None,
    ) -> None:
        where = line if line is not None else line_of(data, key)
        self.problems.append(
            InputError(message, source=self.source, line=where, field=field or key, node=node)
        )

    def raise_if_any(self, kind: type[Problems] = Problems) -> None:
        """Every problem found as one ``kind`` (nothing when there is none)."""
        if self.problems:
            raise kind(self.problems)

    def unknown_keys(
        self, data: Mapping[str, Any], allowed: tuple[str, ...], *, prefix: str, node: str | None
    ) -> None:
        for key in data:
            if key not in allowed:
                self.fail(
                    f"unknown key{_hint(key, allowed)} (allowed: {', '.join(allowed)})",
                    data=data,
                    key=str(key),
                    field=f"{prefix}{key}",
                    node=node,
                )

    def text(
        self,
        data: Mapping[str, Any],
        key: str,
        *,
        prefix: str,
        node: str | None,
        required: bool = False,
    ) -> str | None:
        value = data.get(key)
        if value is None:
            if required:
                self.fail("is required", data=data, field=f"{prefix}{key}", node=node)
            return None
        if not isinstance(value, str) or not value:
            self.fail(
                f"must be a non-empty string, not {value!r}",
                data=data,
                key=key,
                field=f"{prefix}{key}",
                node=node,
            )
            return None
        return value

    def name(
        self,
        data: Mapping[str, Any],
        key: str,
        *,
        prefix: str,
        node: str | None,
        required: bool = False,
    ) -> str | None:
        """Like :meth:`text`, and from :data:`bmaas.validate.NAME_ALPHABET`."""
        value = self.text(data, key, prefix=prefix, node=node, required=required)
        if value is not None and not validate.is_name(value):
            self.fail(
                f"must be {validate.NAME_ALPHABET}",
                data=data,
                key=key,
                field=f"{prefix}{key}",
                node=node,
            )
            return None
        return value


def _hint(key: Any, allowed: tuple[str, ...]) -> str:
    found = difflib.get_close_matches(str(key), allowed, n=1)
    return f"; did you mean {found[0]!r}?" if found else ""


def shown(value: Any) -> str:
    """What a problem calls a value: ``null``, ``a mapping``, ``a list``,
    ``a string``, else its repr (cut at 40 characters)."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    text = repr(value)
    return text if len(text) <= 40 else type(value).__name__


def at(path: str, key: Any) -> str:
    """``path.key``; a key that is not a plain name is quoted and cut short
    (a problem is one line, whatever a file's keys hold)."""
    text = str(key)
    if not (isinstance(key, str) and validate.is_name(text) and len(text) <= 64):
        text = repr(key if len(text) <= 64 else text[:61] + "...")
    return f"{path}.{text}" if path else text


class Shape(Protocol):
    def walk(
        self, value: Any, check: Checker, path: str, line: int | None, node: str | None
    ) -> Any: ...


def _anything(value: Any) -> Any:
    return value


@dataclasses.dataclass(frozen=True)
class Field:
    """One key of a record. ``check`` is a rule that returns the value
    (converted, maybe) or raises ``ValueError`` in :mod:`bmaas.validate`'s
    words (``must be ...``), or a nested shape; ``message`` is said instead
    of the rule's words. A key given as ``null`` is checked like any value
    (a rule that allows null says so). Absent: ``required`` is a problem,
    else ``default`` (:data:`MISSING`: absent from the result)."""

    check: Callable[[Any], Any] | Shape = _anything
    required: bool = False
    default: Any = MISSING
    #: said when the key is required and absent (None: the record's words)
    missing: str | None = None
    #: the allowed values (None: any the check passes)
    choices: tuple[Any, ...] | None = None
    message: str | None = None
    #: for people: bounds, unit and meaning (``doc`` in listings)
    low: float | None = None
    high: float | None = None
    unit: str = ""
    doc: str = ""

    def walk(
        self, value: Any, check: Checker, path: str, line: int | None, node: str | None
    ) -> Any:
        if self.choices is not None and value not in self.choices:
            wanted = ", ".join(map(str, self.choices))
            check.fail(
                self.message or f"must be one of {wanted}, not {value!r}"[:200],
                field=path or None,
                line=line,
                node=node,
            )
            return None
        rule = self.check
        if not callable(rule):  # a nested shape
            before = len(check.problems)
            out = rule.walk(value, check, path, line, node)
            if self.message and len(check.problems) > before:
                del check.problems[before:]
                check.fail(self.message, field=path or None, line=line, node=node)
            return out
        try:
            return rule(value)
        except ValueError as exc:  # an InputError too: its message, located here
            said = exc.message if isinstance(exc, InputError) else str(exc)
            check.fail(self.message or said, field=path or None, line=line, node=node)
            return None


@dataclasses.dataclass
class Found:
    """What a record's cross-field checks see: ``values`` (the fields given
    and valid, converted, and the defaults of those absent), the mapping as
    given (``data``) and where to report."""

    values: dict[str, Any]
    data: Mapping[str, Any]
    check: Checker
    path: str
    node: str | None
    #: the keys that had a problem already
    bad: set[str]
    #: what the caller passed to :meth:`Record.walk` beside the mapping
    context: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def fail(
        self,
        message: str,
        key: str | None = None,
        *,
        field: str | None = None,
        line: int | None = None,
    ) -> None:
        """A problem of ``key`` (None: of the record itself); ``field`` and
        ``line`` where they are not the key's."""
        where = field if field is not None else (at(self.path, key) if key else self.path)
        if line is None:
            line = line_of(self.data, key) if key in self.data else line_of(self.data)
        self.check.fail(message, field=where or None, line=line, node=self.node)

    def ok(self, *keys: str) -> bool:
        """Whether every one of ``keys`` is given (or defaulted) and valid."""
        return all(k in self.values and k not in self.bad for k in keys)


@dataclasses.dataclass(frozen=True)
class Record:
    """A mapping of exactly ``fields``' keys, checked in their order, then
    ``checks`` (each ``check(found)``). ``unknown`` and ``missing`` are the
    words for a key too many and one required and absent; ``not_mapping``
    for a value that is no mapping (``{kind}``: what it is instead, as
    :func:`shown` says it; ``{type}``: ``null``, ``a list``, ``an int``;
    ``{json}``: in JSON's words; ``{typename}``: Python's)."""

    fields: Mapping[str, Field]
    checks: tuple[Callable[[Found], None], ...] = ()
    unknown: str = "unknown key{hint} (allowed: {allowed})"
    sort_allowed: bool = True
    missing: str = "is required"
    not_mapping: str = "must be a mapping"
    #: the field of a key not in the table (None for a key left unchecked);
    #: None: such a key is a problem (``unknown``)
    rest: Callable[[Any], Field | None] | None = None
    #: said of a key that is not text (``{key}``), at the record (None:
    #: such a key is like any other)
    text_keys: str | None = None
    #: problems in the order of the file's keys (else: the table's)
    file_order: bool = False

    def _other(
        self, key: Any, check: Checker, path: str, value: Mapping[str, Any], node: str | None
    ) -> Field | None:
        """The field for a key not in the table (None: none, and said so)."""
        if self.rest is not None:
            return self.rest(key)
        allowed = self.allowed()
        hint = _hint(key, allowed) if "{hint}" in self.unknown else ""
        message = self.unknown.format(hint=hint, allowed=", ".join(allowed))
        check.fail(message, field=at(path, key), line=line_of(value, key), node=node)
        return None

    def allowed(self) -> tuple[str, ...]:
        names = tuple(self.fields)
        return tuple(sorted(names)) if self.sort_allowed else names

    def walk(
        self,
        value: Any,
        check: Checker,
        path: str = "",
        line: int | None = None,
        node: str | None = None,
        *,
        context: Mapping[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """The values of ``value`` (a dict; None when it is no mapping); its
        problems go to ``check``; ``context`` is for the cross checks."""
        if not isinstance(value, Mapping):
            name = type(value).__name__
            kind = "null" if value is None else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"
            message = self.not_mapping.format(
                kind=shown(value), type=kind, json=_json_kind(value), typename=name
            )
            check.fail(message, field=path or None, line=line, node=node)
            return None
        out: dict[str, Any] = {}
        bad: set[str] = set()
        extra = [k for k in value if k not in self.fields]
        if self.file_order:
            order = [*value, *(k for k in self.fields if k not in value)]
        else:
            order = [*extra, *self.fields]
        for key in order:
            if self.text_keys is not None and not isinstance(key, str):
                message = self.text_keys.format(key=repr(key)[:40])
                check.fail(message, field=path or None, line=line_of(value), node=node)
                continue
            field = (
                self.fields.get(key)
                if key not in extra
                else self._other(key, check, path, value, node)
            )
            if field is None:
                continue
            if key not in value:
                if field.required:
                    message = field.missing or self.missing
                    check.fail(message, field=at(path, key), line=line_of(value), node=node)
                    bad.add(key)
                elif field.default is not MISSING:
                    out[key] = field.default
                continue
            before = len(check.problems)
            out[key] = field.walk(value[key], check, at(path, key), line_of(value, key), node)
            if len(check.problems) > before:
                bad.add(key)
        found = Found(out, value, check, path, node, bad, context or {})
        for cross in self.checks:
            cross(found)
        return out


@dataclasses.dataclass(frozen=True)
class ListOf:
    """A list of ``least`` to ``most`` items, each an ``item``; ``unique``:
    no item twice."""

    item: Shape
    most: int
    least: int = 0
    unique: bool = False
    not_list: str = "must be an array, not {kind}"

    def walk(
        self, value: Any, check: Checker, path: str, line: int | None, node: str | None
    ) -> list[Any] | None:
        def fail(message: str, where: str = path) -> None:
            check.fail(message, field=where or None, line=line, node=node)

        if not isinstance(value, list):
            fail(self.not_list.format(kind=_json_kind(value)))
            return None
        if not self.least <= len(value) <= self.most:
            # refused before any item is looked at: the bound is the point
            fail(f"must hold {self.least} to {self.most} items, not {len(value)}")
            return None
        out = [self.item.walk(v, check, f"{path}[{i}]", line, node) for i, v in enumerate(value)]
        if self.unique:
            seen: set[Any] = set()
            for i, v in enumerate(out):
                if v is not None and v in seen:
                    fail(f"{v!r} is listed twice", f"{path}[{i}]")
                seen.add(v)
        return out


@dataclasses.dataclass(frozen=True)
class MapOf:
    """A mapping of at most ``most`` entries: each key checked by ``key``
    (a :mod:`bmaas.validate` rule), each value a ``value``."""

    key: Callable[[Any], Any]
    value: Shape
    most: int

    def walk(
        self, value: Any, check: Checker, path: str, line: int | None, node: str | None
    ) -> dict[Any, Any] | None:
        if not isinstance(value, Mapping):
            check.fail(f"must be a JSON object, not {_json_kind(value)}", field=path or None)
            return None
        if len(value) > self.most:
            message = f"must hold at most {self.most} entries, not {len(value)}"
            check.fail(message, field=path or None, line=line, node=node)
            return None
        out = {}
        for key, item in value.items():
            where = at(path, key)
            try:
                self.key(key)
            except ValueError as exc:
                check.fail(f"key {exc}", field=where, line=line_of(value, key), node=node)
                continue
            out[key] = self.value.walk(item, check, where, line_of(value, key), node)
        return out


def _json_kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return shown(value)


# -- the usual fields -----------------------------------------------------------


def kind_of(*types: type, what: str) -> Callable[[Any], Any]:
    """A rule: an instance of ``types`` (a boolean only where ``bool`` is one)."""

    def check(value: Any) -> Any:
        if isinstance(value, bool) and bool not in types:
            raise ValueError(f"must be {what}")
        if not isinstance(value, types):
            raise ValueError(f"must be {what}")
        return value

    return check


def optional(rule: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A rule that lets ``null`` (None) through as it is."""

    def check(value: Any) -> Any:
        return None if value is None else rule(value)

    return check


def whole(low: float | None = None, high: float | None = None, **kw: Any) -> Field:
    """A whole number within ``[low, high]`` (:func:`bmaas.validate.whole`)."""
    what = kw.pop("what", "a whole number")
    rule = functools.partial(validate.whole, low=low, high=high, what=what)
    return Field(rule, low=low, high=high, **kw)


def number(low: float | None = None, high: float | None = None, **kw: Any) -> Field:
    """A finite number within ``[low, high]`` (:func:`bmaas.validate.number`)."""
    rule = functools.partial(validate.number, low=low, high=high)
    return Field(rule, low=low, high=high, **kw)


def seconds(low: float = 0.0, high: float = validate.MAX_SECONDS, **kw: Any) -> Field:
    """A time in seconds within ``[low, high]`` (:func:`bmaas.validate.seconds`)."""
    rule = functools.partial(validate.seconds, low=low, high=high)
    return Field(rule, low=low, high=high, unit=kw.pop("unit", "s"), **kw)


def boolean(**kw: Any) -> Field:
    """``true`` or ``false`` (not ``1``, not ``"yes"``)."""
    return Field(kind_of(bool, what="true or false"), **kw)


def text(most: int | None = None, *, empty: bool = True, **kw: Any) -> Field:
    """Text of at most ``most`` characters (``empty``: ``""`` allowed)."""

    def check(value: Any) -> str:
        if not isinstance(value, str) or (not empty and not value):
            raise ValueError(f"must be {'' if empty else 'non-empty '}text")
        if most is not None and len(value) > most:
            raise ValueError(f"must be text of at most {most} characters")
        return value

    return Field(check, high=most, **kw)


def one_of(*choices: Any, **kw: Any) -> Field:
    """One of ``choices`` exactly."""
    return Field(choices=choices, **kw)
