"""Checking one row of bmaas.drivers.private_api against the installed
library, without pytest: the Ironic venv runs it too
(tests/unit/test_private_api_ironic.py)."""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from typing import Any

from bmaas.drivers.private_api import PrivateUse

_SELF = object()  # stands for the instance a method is called on


def _resolve(path: str) -> Any:
    module_name, _, attrs = path.partition(":")
    obj: Any = importlib.import_module(module_name)
    for attr in attrs.split("."):
        obj = getattr(obj, attr)
    return obj


@functools.cache
def _class_source(cls: type) -> str:
    """The source of ``cls`` and of its bases from the same library."""
    top = cls.__module__.split(".")[0]
    return "\n".join(inspect.getsource(k) for k in cls.__mro__ if k.__module__.split(".")[0] == top)


def _assigned(source: str) -> set[str]:
    return set(re.findall(r"self\.(\w+)\s*(?::[^=\n]+)?(?:=(?!=)|\+=|-=)", source))


def check(use: PrivateUse) -> None:
    """A row of any kind but ``behaviour`` (those are the test's own checks)."""
    where = f"{use.name} (used in {', '.join(use.used_in)}; checked on {use.checked})"
    obj = _resolve(use.path)
    if use.kind == "class":
        assert inspect.isclass(obj), f"{where}: not a class"
    elif use.kind == "callable":
        assert callable(obj), f"{where}: not callable"
        args: list[Any] = [_SELF] if use.method else []
        args += [None] * use.args
        try:
            inspect.signature(obj).bind(*args, **dict.fromkeys(use.kwargs))
        except TypeError as exc:
            raise AssertionError(
                f"{where}: bmaas's call no longer fits {inspect.signature(obj)}: {exc}"
            ) from None
    elif use.kind == "value":
        assert type(obj).__name__ in use.types, (
            f"{where}: a {type(obj).__name__}, not {' or '.join(use.types)}"
        )
    elif use.kind == "set-by":
        assert use.attr in _assigned(_class_source(obj)), f"{where}: no longer sets self.{use.attr}"
    elif use.kind == "calls":
        assert re.search(rf"self\.{use.attr}\(", _class_source(obj)), (
            f"{where}: no longer calls self.{use.attr}(...)"
        )
    else:
        raise AssertionError(f"{use.name}: unknown kind {use.kind!r}")
