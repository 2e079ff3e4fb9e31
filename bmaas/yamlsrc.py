"""Load YAML or JSON and remember where every key came from.

Operators get errors like ``lab.yaml:14: nodes[2].hardware.cpus: must be an
integer`` only if the loader kept line numbers, so mappings load as
:class:`SourceDict`, a plain ``dict`` that also knows the line of each key.
JSON is YAML, so one loader reads both.
"""

from __future__ import annotations

import os
from typing import Any

import yaml

from bmaas.faults import InputError

__all__ = ["SourceDict", "line_of", "load_file", "load_text"]


class SourceDict(dict[str, Any]):
    """A dict with ``line`` (its own, 1-based) and ``key_lines`` (per key)."""

    line: int | None = None
    key_lines: dict[str, int]

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.key_lines = {}


class _Loader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> SourceDict:
    loader.flatten_mapping(node)
    result = SourceDict()
    result.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in result:
            raise InputError(f"duplicate key {key!r}", line=key_node.start_mark.line + 1)
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[str(key)] = key_node.start_mark.line + 1
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def line_of(data: Any, key: str | None = None) -> int | None:
    """Line of ``key`` in ``data`` (or of ``data`` itself), when known."""
    if isinstance(data, SourceDict):
        if key is not None and key in data.key_lines:
            return data.key_lines[key]
        return data.line
    return None


#: deeper flow nesting than this is refused before parsing (no real inventory
#: or lab file nests more than a handful of levels)
MAX_DEPTH = 200
_TOO_DEEP = "nested too deeply (lists or mappings hundreds of levels deep)"


def _flow_depth_exceeds(text: str, limit: int) -> bool:
    """Whether ``[``/``{`` nest deeper than ``limit`` outside quoted strings.
    PyYAML's scanner is quadratic in flow depth (20,000 levels: seconds) before
    its recursive composer overflows, so pathological input is refused first."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth, quote = 0, ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth = max(0, depth - 1)
    return False


def load_text(text: str, *, source: str = "<string>") -> Any:
    """Parse YAML/JSON text; syntax errors become ``InputError`` with the line."""
    if _flow_depth_exceeds(text, MAX_DEPTH):
        raise InputError(_TOO_DEEP, source=source)
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except InputError as exc:
        exc.source = source
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or str(exc)
        raise InputError(f"not valid YAML/JSON: {problem}", source=source, line=line) from None
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML/JSON: {exc}", source=source) from None
    except RecursionError:
        # PyYAML composes recursively: a pathological nesting (a 20,000-deep
        # list) would otherwise be a 3,000-line traceback.
        raise InputError(_TOO_DEEP, source=source) from None


def load_file(path: str | os.PathLike[str]) -> Any:
    """Read and parse a YAML/JSON file; a missing or unreadable file is an ``InputError``."""
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=source) from None
    except UnicodeDecodeError:
        raise InputError("is not UTF-8 text", source=source) from None
    return load_text(text, source=source)
