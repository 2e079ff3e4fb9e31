"""Releases: the version, its notes and the licence files agree with the tree.

docs/releases.md says how versions, notes and the store's schema relate
("Versions and compatibility", "Writing a change's note"); these tests hold
the tree to it. None needs towncrier: its configuration is read from
pyproject.toml as towncrier reads it.
"""

from __future__ import annotations

import ast
import hashlib
import re
import tomllib
from pathlib import Path

import pytest

import bmaas
from bmaas.store.migrate import head_revision, known_revision

REPO = Path(__file__).resolve().parents[2]
RELEASES = REPO / "docs" / "releases.md"
CHANGES = REPO / "docs" / "changes"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
TOWNCRIER = PYPROJECT["tool"]["towncrier"]

#: the Apache License 2.0 as the ASF publishes it (LICENSE-2.0.txt)
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
DEV = re.compile(r"^(\d+)\.(\d+)\.(\d+)\.dev\d+$")
SECTION = re.compile(r"^## (\d+\.\d+\.\d+) \((\d{4}-\d\d-\d\d)\)$", re.MULTILINE)
SCHEMA = re.compile(r"\*\*Store schema:\*\* revision `([^`]+)`")


def _sections() -> dict[str, str]:
    """version -> its section's text, newest first, as the page has them."""
    text = RELEASES.read_text()
    found = list(SECTION.finditer(text))
    sections = {}
    for match, following in zip(found, [*found[1:], None], strict=True):
        end = following.start() if following else text.find("\n## ", match.end())
        sections[match.group(1)] = text[match.end() : end if end != -1 else len(text)]
    return sections


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:3])


def _types() -> set[str]:
    return {entry["directory"] for entry in TOWNCRIER["type"]}


def _fragments() -> list[Path]:
    return sorted(p for p in CHANGES.iterdir() if p.name != ".gitkeep")


def test_towncrier_writes_where_the_docs_say() -> None:
    assert REPO / TOWNCRIER["directory"] == CHANGES
    assert REPO / TOWNCRIER["filename"] == RELEASES
    assert RELEASES.read_text().count(TOWNCRIER["start_string"].rstrip("\n")) == 1


def test_the_version_is_a_release_with_notes_or_the_next_ones_development() -> None:
    version = bmaas.__version__
    sections = _sections()
    assert sections, "docs/releases.md has no release section"
    newest = next(iter(sections))
    assert list(sections) == sorted(sections, key=_key, reverse=True), "newest first"
    if RELEASE.match(version):
        assert version in sections, (
            f"bmaas {version} has no '## {version} (date)' section in docs/releases.md: "
            f"run scripts/release.sh --notes {version}"
        )
        assert version == newest, f"docs/releases.md has {newest}, newer than bmaas {version}"
    else:
        assert DEV.match(version), f"{version!r} is neither X.Y.Z nor X.Y.Z.devN"
        assert _key(version) > _key(newest), f"{version} is not after the last release {newest}"
        assert version.split(".dev")[0] not in sections


def test_every_release_names_a_schema_revision_this_bmaas_ships() -> None:
    for version, text in _sections().items():
        named = SCHEMA.findall(text)
        assert len(named) == 1, f"{version}'s notes name no '**Store schema:** revision `R`'"
        assert known_revision(named[0]), f"{version}'s notes name revision {named[0]}"


def test_the_schema_head_is_the_one_the_notes_name_or_an_upgrade_note_names_it() -> None:
    """A release's notes name the newest migration; a migration added since
    the last release is named by an upgrade note (and makes the version the
    next minor's .dev0: the notes of a release must not change under it)."""
    version, head = bmaas.__version__, head_revision()
    sections = _sections()
    if RELEASE.match(version):
        (named,) = SCHEMA.findall(sections[version])
        assert named == head, (
            f"bmaas {version}'s notes name schema {named}, the newest migration is {head}: "
            "a new migration is a minor release's -- set __version__ to the next X.Y.0.dev0 "
            f"and add an upgrade note naming {head} to docs/changes/"
        )
        return
    (released,) = SCHEMA.findall(next(iter(sections.values())))
    if head != released:
        notes = [p.read_text() for p in _fragments() if p.name.split(".")[1] == "upgrade"]
        assert any(head in text for text in notes), (
            f"migration {head} is new since the last release: an upgrade note in "
            "docs/changes/ names it and says what it does"
        )


def test_every_change_note_has_a_known_type_and_a_name_towncrier_reads() -> None:
    types = _types()
    name = re.compile(r"^(\d+|\+[\w-]+)\.(?P<type>[a-z]+)(\.\d+)?\.md$")
    for path in _fragments():
        match = name.match(path.name)
        assert match, f"{path.name}: name it <issue>.<type>.md (docs/releases.md)"
        assert match["type"] in types, f"{path.name}: type not one of {sorted(types)}"
        assert path.read_text().strip(), f"{path.name} is empty"


def test_the_docs_page_lists_the_types_pyproject_configures() -> None:
    table = RELEASES.read_text().split("## Writing a change's note", 1)[1]
    listed = set(re.findall(r"^\| `([a-z]+)` \|", table, re.MULTILINE))
    assert listed == _types()


def test_the_docs_site_does_not_build_the_notes_as_pages() -> None:
    conf = REPO / "docs" / "conf.py"
    if not conf.exists():
        pytest.skip("no docs/conf.py")
    tree = ast.parse(conf.read_text())
    excluded = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(getattr(t, "id", "") == "exclude_patterns" for t in node.targets)
    )
    assert "changes" in excluded  # a note is a fragment of releases.md, not a page


def test_license_is_apache_2_verbatim_and_ships_with_notice() -> None:
    assert hashlib.sha256((REPO / "LICENSE").read_bytes()).hexdigest() == APACHE_2_SHA256
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE", "NOTICE"]


def test_notice_names_every_recorded_or_derived_third_party_file() -> None:
    """A new Redfish template or recorded vendor answer is listed in NOTICE
    with its source (or as bmaas's own)."""
    notice = (REPO / "NOTICE").read_text()
    recorded = [
        *(REPO / "hwlab" / "redfish" / "templates").glob("*.json"),
        *(REPO / "tests" / "fixtures" / "incidents").glob("*.json"),
    ]
    recorded += [p.parent for p in (REPO / "tests" / "fixtures").glob("redfish-trees/*/SOURCE.md")]
    # vendor shapes built from recorded trees (not the engine around them)
    shapes = REPO / "hwlab" / "redfish" / "shapes"
    engine = {"__init__.py", "model.py", "engine.py", "state.py", "documents.py", "media.py"}
    engine |= {"service.py"}  # the engine's slots and service documents, bmaas's own
    recorded += [p for p in shapes.glob("*.py") if p.name not in engine]
    assert recorded
    missing = [p.name for p in recorded if p.name not in notice]
    assert missing == [], f"NOTICE does not say where these come from: {missing}"
