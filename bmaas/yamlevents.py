"""Build a YAML document straight from the parser's events.

PyYAML's ``load`` first composes the whole document into node objects (each
with two marks), then constructs Python values from them: for a 16 MB,
50,000-node inventory that is about 900 MB and most of the time. This builds
the same values (``SourceDict`` mappings with their lines, lists, scalars
resolved and constructed by PyYAML's own resolver and constructors) from the
event stream, keeping nothing but the result, and with an explicit stack, so
no nesting depth can overflow Python's.

Supported: everything a SafeLoader document uses in practice: implicit and
explicit scalar tags, anchors and aliases, merge keys (``<<``). Tags on
collections are ignored (a mapping is a mapping).
"""

from __future__ import annotations

import sys
from typing import Any

import yaml
from yaml import events as ev

from bmaas.faults import InputError

__all__ = ["build_document"]

_STR = "tag:yaml.org,2002:str"
_MERGE = "<<"


class _Frame:
    __slots__ = ("anchor", "key", "key_line", "merges", "value")

    def __init__(self, value: Any, anchor: str | None) -> None:
        self.value = value
        self.anchor = anchor
        self.key: Any = _NO_KEY
        self.key_line: int | None = None
        self.merges: list[tuple[Any, int | None]] = []


_NO_KEY = object()


def _line(event: ev.Event) -> int | None:
    return event.start_mark.line + 1 if event.start_mark is not None else None


def _scalar(loader: Any, event: ev.ScalarEvent) -> Any:  # a SafeLoader (stubs: untyped)
    tag = event.tag
    if tag is None or tag == "!":
        tag = loader.resolve(yaml.ScalarNode, event.value, event.implicit)
    if tag == _STR:
        # Keys and the values every node repeats (driver names, user names,
        # ${VAR} references) are one object each, not one per node.
        value = event.value
        return sys.intern(value) if len(value) <= 40 else value
    if tag == "tag:yaml.org,2002:merge":
        return _MERGE
    constructor = loader.yaml_constructors.get(tag)
    if constructor is None:
        raise InputError(f"not valid YAML/JSON: unknown tag {tag!r}", line=_line(event))
    node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)  # type: ignore[arg-type]
    try:
        return constructor(loader, node)
    except ValueError:
        # Python refuses to turn text of more than 4300 digits into an int
        # (sys.get_int_max_str_digits); no field takes a number that long
        raise InputError(
            f"not valid YAML/JSON: a number of {len(event.value)} characters is too long",
            line=_line(event),
        ) from None


def build_document(loader: Any, mapping_type: type[dict[str, Any]]) -> Any:
    """The next document's value; ``None`` for an empty stream.
    ``mapping_type`` has ``line`` and ``key_lines`` (``SourceDict``)."""
    loader.get_event()  # StreamStart
    if loader.check_event(ev.StreamEndEvent):
        return None
    loader.get_event()  # DocumentStart
    anchors: dict[str, Any] = {}
    stack: list[_Frame] = []
    result: Any = None
    while True:
        event = loader.get_event()
        if isinstance(event, ev.ScalarEvent):
            try:
                value, anchor = _scalar(loader, event), event.anchor
            except InputError as exc:
                if stack and isinstance(stack[-1].value, dict) and stack[-1].key is not _NO_KEY:
                    exc.field = str(stack[-1].key)  # the key whose value it is
                raise
        elif isinstance(event, ev.AliasEvent):
            if event.anchor not in anchors:
                raise InputError(
                    f"not valid YAML/JSON: found undefined alias {event.anchor!r}",
                    line=_line(event),
                )
            value, anchor = anchors[event.anchor], None
        elif isinstance(event, ev.MappingStartEvent):
            mapping = mapping_type()
            mapping.line = _line(event)  # type: ignore[attr-defined]
            stack.append(_Frame(mapping, event.anchor))
            continue
        elif isinstance(event, ev.SequenceStartEvent):
            stack.append(_Frame([], event.anchor))
            continue
        elif isinstance(event, ev.MappingEndEvent | ev.SequenceEndEvent):
            frame = stack.pop()
            value, anchor = frame.value, frame.anchor
            if frame.merges:
                value = _merged(frame, mapping_type)
        else:  # pragma: no cover - the parser emits nothing else inside a document
            raise InputError(f"not valid YAML/JSON: unexpected {type(event).__name__}")
        if anchor is not None:
            anchors[anchor] = value
        if not stack:
            result = value
            break
        _add(stack[-1], value, event)
    loader.get_event()  # DocumentEnd
    if not loader.check_event(ev.StreamEndEvent):
        event = loader.get_event()
        raise InputError(
            "not valid YAML/JSON: expected a single document in the stream",
            line=_line(event),
        )
    return result


def _add(frame: _Frame, value: Any, event: ev.Event) -> None:
    """Put ``value`` into the collection being built (a key or a value)."""
    target = frame.value
    if isinstance(target, list):
        target.append(value)
        return
    if frame.key is _NO_KEY:
        if isinstance(value, list | dict):
            raise InputError(
                "not valid YAML/JSON: a mapping key must be a plain value",
                line=_line(event),
            )
        try:
            hash(value)
        except TypeError:
            raise InputError(
                "not valid YAML/JSON: found unhashable key", line=_line(event)
            ) from None
        frame.key = value
        frame.key_line = _line(event)
        return
    key, frame.key = frame.key, _NO_KEY
    if key == _MERGE:
        frame.merges.append((value, frame.key_line))
        return
    if key in target:
        raise InputError(f"duplicate key {key!r}", line=frame.key_line)
    target.set_at(key, value, frame.key_line)


def _merged(frame: _Frame, mapping_type: type[dict[str, Any]]) -> Any:
    """YAML merge keys: merged mappings first (earlier ones win), the
    mapping's own keys over all of them."""
    own = frame.value
    merged = mapping_type()
    merged.line = own.line  # type: ignore[attr-defined]
    for value, line in reversed(frame.merges):
        sources = value if isinstance(value, list) else [value]
        for source in reversed(sources):
            if not isinstance(source, dict):
                raise InputError("not valid YAML/JSON: '<<' merges mappings only", line=line)
            for key, item in source.items():
                merged[key] = item
    lines = own.key_lines
    final = mapping_type()
    final.line = own.line  # type: ignore[attr-defined]
    for key, item in {**merged, **own}.items():
        final.set_at(key, item, lines.get(str(key), line))  # type: ignore[attr-defined]
    return final
