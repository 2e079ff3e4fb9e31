"""What the wheel installs: one import root, the folders' every package, no
top-level name a user's project might also have.

A lab-CI repository very often has its own ``drivers/``; before the one root,
bmaas's ``drivers`` and the user's shadowed each other and every deploy
failed with ``No module named 'drivers.redfish'``. ``tests/lab/
test_user_project.py`` runs that user's project end to end.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from tests.layout import FOLDERS, ROOT, module_name, source_packages

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: import names bmaas must never install or import at top level
TAKEN_BY_USERS = ("drivers", "fakes", "hwlab")


def _data_packages() -> list[str]:
    """Folders of package data (files, no ``__init__.py``) inside a package of
    the four, by import name: Python imports them as namespace packages, so
    setuptools wants them listed ("Package would be ignored" otherwise)."""
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if (
                path.is_dir()
                and path.name != "__pycache__"
                and not (path / "__init__.py").exists()
                and (path.parent / "__init__.py").exists()
                and any(p.is_file() for p in path.iterdir())
            ):
                found.append(module_name(path / "__init__.py"))
    return found


def test_the_wheel_lists_every_package_of_the_four_folders() -> None:
    listed = PYPROJECT["tool"]["setuptools"]["packages"]
    assert sorted(listed) == sorted(source_packages() + _data_packages())
    assert all(name == "bmaas" or name.startswith("bmaas.") for name in listed)


def test_package_data_is_given_by_the_package_that_holds_it() -> None:
    # "bmaas.hwlab.redfish" = ["templates/*.json"] reached into a folder that
    # Python sees as a package of its own; setuptools warned at every build
    # that it "would be ignored" (issue 50). Each data folder is a listed
    # package with its own package-data entry.
    data = PYPROJECT["tool"]["setuptools"]["package-data"]
    for package in _data_packages():
        assert package in data, package
    assert [glob for globs in data.values() for glob in globs if "/" in glob] == []


def test_each_folder_installs_under_the_bmaas_root() -> None:
    mapping = PYPROJECT["tool"]["setuptools"]["package-dir"]
    assert mapping == {name: folder for folder, name in FOLDERS.items() if folder != "bmaas"}


def test_every_entry_point_names_a_module_under_the_root() -> None:
    project = PYPROJECT["project"]
    targets = list(project["scripts"].values())
    for group in project["entry-points"].values():
        targets += group.values()
    assert targets
    assert [t for t in targets if not t.startswith("bmaas.")] == []


def _top_level_imports(path: Path, root: Path = ROOT) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found += [
            f"{path.relative_to(root)}:{node.lineno}: {name}"
            for name in names
            if name.split(".")[0] in TAKEN_BY_USERS
        ]
    return found


def test_no_source_imports_the_folders_by_their_folder_names(tmp_path: Path) -> None:
    # `import drivers...` would work in a clone (pytest puts the repo on the
    # path) and fail once installed, or import a user's own `drivers`.
    scanned = [*FOLDERS, "tests", "scripts", "docs"]
    offenders = [
        line
        for top in scanned
        for path in sorted((ROOT / top).rglob("*.py"))
        for line in _top_level_imports(path)
    ]
    assert offenders == []
    # the scan itself sees both shapes of such an import
    probe = tmp_path / "probe.py"
    probe.write_text("import hwlab.lab\nfrom drivers.redfish import RedfishDriver\n")
    assert _top_level_imports(probe, tmp_path) == [
        "probe.py:1: hwlab.lab",
        "probe.py:2: drivers.redfish",
    ]
