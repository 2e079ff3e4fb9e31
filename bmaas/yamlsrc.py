"""Load YAML or JSON and remember where every key came from.

Operators get errors like ``lab.yaml:14: nodes[2].hardware.cpus: must be an
integer`` only if the loader kept line numbers, so mappings load as
:class:`SourceDict`, a plain ``dict`` that also knows the line of each key.
JSON is YAML, so one loader reads both.
"""

from __future__ import annotations

import os
import re
from typing import Any

import yaml

from bmaas.faults import InputError
from bmaas.files import MAX_INPUT_BYTES, read_limited
from bmaas.yamlevents import build_document

__all__ = ["SourceDict", "line_of", "load_file", "load_text"]


class SourceDict(dict[str, Any]):
    """A dict with ``line`` (its own, 1-based) and ``key_lines`` (per key).

    Compact, as a 50,000-node inventory holds 150,000 of them: no instance
    ``__dict__``, and the key lines are a list in key order (the mapping as
    loaded; keys added later have no line, a key removed shifts them)."""

    __slots__ = ("_lines", "line")

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.line: int | None = None
        self._lines: list[int | None] = []

    def set_at(self, key: Any, value: Any, line: int | None) -> None:
        """Add ``key`` (new) with the line it was written on."""
        self[key] = value
        self._lines.append(line)

    @property
    def key_lines(self) -> dict[str, int]:
        return {str(k): ln for k, ln in zip(self, self._lines, strict=False) if ln is not None}


# libyaml's parser when PyYAML was built with it: the pure-Python scanner
# takes over a minute for a 50,000-node inventory, libyaml a few seconds.
# Values are built from the parser's events (bmaas.yamlevents), never from a
# composed node tree: memory stays what the result needs.
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: the pure-Python parser says what is wrong with a file in its own words,
#: so a file libyaml refuses is parsed again with it for the message
_PureLoader = yaml.SafeLoader


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


_BRACKETS = re.compile(r"[\[\]{}\"']")


def _flow_depth_exceeds(text: str, limit: int) -> bool:
    """Whether ``[``/``{`` nest deeper than ``limit`` outside quoted strings.
    PyYAML's scanner is quadratic in flow depth (20,000 levels: seconds) before
    its recursive composer overflows, so pathological input is refused first."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth, quote = 0, ""
    for match in _BRACKETS.finditer(text):  # only the characters that matter
        ch = match.group()
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth = max(0, depth - 1)
    return False


def load_text(text: str, *, source: str = "<string>") -> Any:
    """Parse YAML/JSON text; syntax errors become ``InputError`` with the line."""
    if _flow_depth_exceeds(text, MAX_DEPTH):
        raise InputError(_TOO_DEEP, source=source)
    try:
        return _parse(text, _Loader, source)
    except _SyntaxError:
        if _Loader is _PureLoader:
            raise
    # libyaml refused it: the pure-Python parser says why in its own words
    return _parse(text, _PureLoader, source)


class _SyntaxError(InputError):
    """What the parser itself refused (as opposed to a duplicate key)."""


def _parse(text: str, loader_class: type[yaml.SafeLoader], source: str) -> Any:
    try:
        # the reader refuses NUL bytes and other unprintable characters here,
        # before any parsing: binary input is one line naming where it starts
        loader = loader_class(text)
    except yaml.reader.ReaderError as exc:
        raise _SyntaxError(
            _unprintable(exc), source=source, line=_line_at(text, exc.position)
        ) from None
    try:
        return build_document(loader, SourceDict)
    except InputError as exc:
        exc.source = source
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or str(exc)
        raise _SyntaxError(f"not valid YAML/JSON: {problem}", source=source, line=line) from None
    except yaml.reader.ReaderError as exc:  # the pure-Python reader checks as it reads
        raise _SyntaxError(
            _unprintable(exc), source=source, line=_line_at(text, exc.position)
        ) from None
    except yaml.YAMLError as exc:
        raise _SyntaxError(f"not valid YAML/JSON: {exc}", source=source) from None
    finally:
        loader.dispose()


def _line_at(text: str, position: int) -> int:
    return text.count("\n", 0, max(position, 0)) + 1


def _unprintable(exc: yaml.reader.ReaderError) -> str:
    """What a person should hear about binary input: which character, not
    the reader's dump of the bytes around it."""
    char = exc.character
    code = ord(char) if isinstance(char, str) else char
    what = "a NUL byte" if code == 0 else f"the unprintable character {code:#06x}"
    return f"binary input: {what} at character {exc.position}"


def load_file(path: str | os.PathLike[str], *, limit: int = MAX_INPUT_BYTES) -> Any:
    """Read and parse a YAML/JSON file; a missing or unreadable file, one
    that is not a regular file (a FIFO, ``/dev/zero``, a directory) or one
    larger than ``limit`` bytes is an ``InputError``, read no further than
    the limit (:func:`bmaas.files.read_limited`)."""
    source = os.fspath(path)
    try:
        text = read_limited(source, limit=limit).decode("utf-8")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=source) from None
    except UnicodeDecodeError:
        raise InputError("is not UTF-8 text", source=source) from None
    return load_text(text, source=source)
