"""The private attributes bmaas relies on (bmaas.drivers.private_api) are still
there, with the shape bmaas uses: one test per row, named by the row, so a
pyghmi, sushy, sushy-tools, requests or urllib3 release that moves one fails
here first. Runs in .venv (the newest versions pyproject.toml allows) and in
.venv-floor (the lowest: scripts/test-floor.sh)."""

from __future__ import annotations

import inspect
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from bmaas.drivers.private_api import CHECKED, PRIVATE_API, PrivateUse
from tests import privatecheck
from tests.privatecheck import _assigned

ROOT = Path(__file__).resolve().parents[2]


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


BEHAVIOUR: dict[str, Callable[[], None]] = {
    "pyghmi:Command.__init__ state": _command_state,
    "sushy:Connector._session": _connector_session,
    "requests:Response._content": _response_content,
}


#: rows of libraries this venv holds (the Ironic rows run in the Ironic venvs:
#: tests/unit/test_private_api_ironic.py)
HERE = [u for u in PRIVATE_API if u.library != "ironic"]


@pytest.mark.parametrize("use", HERE, ids=[u.name for u in HERE])
def test_the_private_attribute_is_still_there(use: PrivateUse) -> None:
    check(use)


def check(use: PrivateUse) -> None:
    """One row against the installed library (an assertion error naming it)."""
    if use.kind == "behaviour":
        BEHAVIOUR[use.name]()
        return
    privatecheck.check(use)


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
