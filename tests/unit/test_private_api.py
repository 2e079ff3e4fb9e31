"""The private attributes bmaas relies on (bmaas.drivers.private_api) are still
there, with the shape bmaas uses: one test per row, named by the row, so a
pyghmi, sushy, sushy-tools, requests or urllib3 release that moves one fails
here first. Runs in .venv (the newest versions pyproject.toml allows) and in
.venv-floor (the lowest: scripts/test-floor.sh)."""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bmaas.drivers.private_api import CHECKED, PRIVATE_API, PrivateUse

ROOT = Path(__file__).resolve().parents[2]
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


# -- behaviour rows: a check each ----------------------------------------------


def _command_state() -> None:
    from pyghmi.ipmi import command

    from bmaas.drivers.ipmi.command import BoundedCommand

    theirs = _assigned(inspect.getsource(command.Command.__init__))
    ours = _assigned(inspect.getsource(BoundedCommand.__init__))
    missing = theirs - ours
    assert not missing, f"Command.__init__ now sets {sorted(missing)}; BoundedCommand does not"


def _connector_session() -> None:
    import requests
    from sushy.connector import Connector

    connector = Connector("http://127.0.0.1:9")
    try:
        assert isinstance(connector._session, requests.Session)
    finally:
        connector.close()


def _response_content() -> None:
    import requests

    assert requests.Response()._content is False  # the attribute is requests' own
    response = requests.Response()
    response.status_code = 200
    response.encoding = "utf-8"
    response._content = b'{"PowerState": "On"}'
    response._content_consumed = True
    assert response.content == b'{"PowerState": "On"}'
    assert response.json() == {"PowerState": "On"}


def _app_cache() -> None:
    from bmaas.hwlab.redfish import app  # seeds the backends; raises if memoize changed

    lost = "sushy-tools no longer keeps hwlab's seeded backends across a request"
    with app.APP.test_request_context("/redfish/v1/Systems"):
        app.APP.preprocess_request()  # sushy-tools' before_request hooks
        try:
            systems = app.APP.systems
        except (Exception, SystemExit) as exc:  # its own default backend (libvirt) exits
            pytest.fail(f"{lost}: {exc!r}")
    assert isinstance(systems, app.MachineSystems), f"{lost}: {type(systems).__name__}"


BEHAVIOUR: dict[str, Callable[[], None]] = {
    "pyghmi:Command.__init__ state": _command_state,
    "sushy:Connector._session": _connector_session,
    "requests:Response._content": _response_content,
    "sushy-tools:app._cache": _app_cache,
}


@pytest.mark.parametrize("use", PRIVATE_API, ids=[u.name for u in PRIVATE_API])
def test_the_private_attribute_is_still_there(use: PrivateUse) -> None:
    where = f"{use.name} (used in {', '.join(use.used_in)}; checked on {use.checked})"
    if use.kind == "behaviour":
        BEHAVIOUR[use.name]()
        return
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
            pytest.fail(f"{where}: bmaas's call no longer fits {inspect.signature(obj)}: {exc}")
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
        pytest.fail(f"{use.name}: unknown kind {use.kind!r}")


def test_every_row_is_well_formed() -> None:
    names = [u.name for u in PRIVATE_API]
    assert len(names) == len(set(names))
    for use in PRIVATE_API:
        assert use.library in CHECKED, use.name
        assert use.kind in {"class", "callable", "value", "set-by", "calls", "behaviour"}
        assert (use.kind == "behaviour") == (use.name in BEHAVIOUR), use.name
        for path in use.used_in:
            assert (ROOT / path).is_file(), f"{use.name}: {path} is not in the tree"
    assert set(BEHAVIOUR) <= set(names)


def _lower_bound(requirement: str) -> tuple[str, str] | None:
    match = re.match(r"\s*([A-Za-z0-9_.\-]+)(?:\[[^]]*\])?\s*>=\s*([0-9][0-9.]*)", requirement)
    return (match.group(1), match.group(2)) if match else None


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _release(version: str) -> tuple[int, ...]:
    parts = [int(p) for p in version.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def test_the_floor_file_pins_every_floor() -> None:
    """scripts/constraints-floor.txt pins each package at its floor in
    pyproject.toml: raising a floor there (or pinning here) moves both."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in ("lab", "test", "openstack"):
        requirements += project["optional-dependencies"][extra]
    floors: dict[str, str] = {}
    for requirement in requirements:
        bound = _lower_bound(requirement)
        if bound is not None:
            floors.setdefault(_key(bound[0]), bound[1])
    pins: dict[str, str] = {}
    for line in (ROOT / "scripts/constraints-floor.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[_key(name)] = version.strip()
    for name in ("pyghmi", "sushy", "sushy-tools", "tenacity", "openstacksdk", "sqlalchemy"):
        assert name in pins, f"{name} is not pinned in scripts/constraints-floor.txt"
    for name, version in pins.items():
        assert name in floors, f"{name} is pinned but pyproject.toml declares no floor for it"
        assert _release(version) == _release(floors[name]), (
            f"{name}: pyproject.toml's floor is {floors[name]}, the floor file pins {version}"
        )
