"""The Ironic releases CI tests (issue 35): each has its constraints file,
bmaas installs under each one's pins, and CI and the docs name them all."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
CONSTRAINTS = REPO / "scripts" / "ironic-constraints"


def _pins(path: Path) -> dict[str, str]:
    """name -> pinned version (``==`` or ``===``) of a constraints file."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        found = re.fullmatch(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?===?([^;\s]+)(\s*;.*)?", line)
        assert found, f"{path.name}: not a pin: {line!r}"
        if found[3] and not Marker(found[3].lstrip(" ;")).evaluate({"python_version": "3.11"}):
            continue  # a pin for another Python than the one bmaas runs on here
        pins[canonicalize_name(found[1])] = found[2]
    return pins


def _releases() -> list[str]:
    return sorted(p.stem for p in CONSTRAINTS.glob("*.txt"))


def _default_release() -> str:
    found = re.search(
        r"^DEFAULT_RELEASE=(\S+)$", (REPO / "scripts" / "ironic-env.sh").read_text(), re.M
    )
    assert found
    return found[1]


def test_the_current_and_the_previous_slurp_release_have_constraints() -> None:
    releases = _releases()
    assert _default_release() in releases
    assert len(releases) >= 2  # the current one and the previous SLURP


def test_every_release_pins_a_version_bmaas_accepts_of_each_of_its_dependencies() -> None:
    """A conductor installed with a release's constraints can take bmaas[ironic]."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(r) for r in project["dependencies"]]
    wanted += [Requirement(r) for r in project["optional-dependencies"]["ironic"]]
    for release in _releases():
        pins = _pins(CONSTRAINTS / f"{release}.txt")
        if "ironic" in pins:
            assert pins["ironic"] == release, f"{release}.txt pins ironic {pins['ironic']}"
        clashes = [
            f"{req.name} {pins[canonicalize_name(req.name)]} is outside {req.specifier}"
            for req in wanted
            if canonicalize_name(req.name) in pins
            and not req.specifier.contains(pins[canonicalize_name(req.name)], prereleases=True)
        ]
        assert clashes == [], f"{release}.txt: {clashes}"


def test_ci_runs_every_other_release_and_the_docs_name_them_all() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    guide = (REPO / "docs" / "ironic.md").read_text()
    for release in _releases():
        assert f"| {release} |" in guide, f"docs/ironic.md's release table lacks {release}"
        if release != _default_release():
            assert re.search(rf"bash scripts/test-ironic-release\.sh {re.escape(release)}\b", ci)
