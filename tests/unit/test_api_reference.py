"""The API reference (docs/api.md) lists what the guides' examples import,
under the names users import (issue 50, finding 6).

``bmaas.ops.driver_factory``, used in every library example, and hwlab's
``LabClient`` were missing, and re-exported classes were listed under the
modules that define them (``bmaas.store.facade.Store``) rather than the
import the docs write (``from bmaas.store import Store``). The page is read
here as Sphinx reads it: its ``automodule`` directives, with autodoc's rule
for what a module's members are (its ``__all__``, else what it defines).
"""

from __future__ import annotations

import importlib
import re
import runpy
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
API = DOCS / "api.md"
#: imported by the docs site's build against stand-ins (docs/conf.py)
MOCKED = ("ironic", "oslo_config", "ironic_lib", "openstack")

_DIRECTIVE = re.compile(
    r"^```\{eval-rst\}\n\.\. automodule:: (?P<module>[\w.]+)\n(?P<options>(?:   :.*\n)*)```",
    re.M,
)
_IMPORT = re.compile(r"^\s*from (bmaas[\w.]*) import ([\w, ]+)$", re.M)


def _directives() -> dict[str, str | None]:
    """module -> None (every member), "" (no members) or the listed members."""
    found: dict[str, str | None] = {}
    for match in _DIRECTIVE.finditer(API.read_text()):
        options = match.group("options")
        listed = re.search(r":members: (.+)", options)
        if ":no-members:" in options:
            found[match.group("module")] = ""
        else:
            found[match.group("module")] = listed.group(1) if listed else None
    return found


def _import(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in MOCKED:
            return None
        raise


def _members(module: ModuleType) -> set[str]:
    """What autodoc documents of ``module`` with ``:members:`` and no list."""
    exported = getattr(module, "__all__", None)
    if exported is not None:
        return set(exported)
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
    }


def _documented(module_name: str, name: str) -> bool:
    directive = _directives().get(module_name, "")
    if directive == "":
        return False
    if directive is not None:
        return name in {n.strip() for n in directive.split(",")}
    module = _import(module_name)
    return module is None or name in _members(module)


def _docs_imports() -> set[tuple[str, str]]:
    pages = [*DOCS.glob("*.md"), *(DOCS / "examples").glob("*.py"), REPO / "README.md"]
    found = set()
    for page in pages:
        if page.name == "releases.md":  # old import names, in upgrade notes
            continue
        for module, names in _IMPORT.findall(page.read_text()):
            found |= {(module, n.strip()) for n in names.split(",") if n.strip()}
    return found


def test_every_name_the_docs_import_is_in_the_reference_under_that_import() -> None:
    imports = _docs_imports()
    assert ("bmaas.ops", "driver_factory") in imports  # the scan sees the examples
    missing = sorted(f"from {m} import {n}" for m, n in imports if not _documented(m, n))
    assert missing == []


def test_the_lab_client_and_the_driver_factory_are_in_the_reference() -> None:
    assert _documented("bmaas.ops", "driver_factory")
    assert _documented("bmaas.hwlab.control", "LabClient")


def test_no_class_is_listed_under_a_module_inside_the_package_that_exports_it() -> None:
    directives = {m: d for m, d in _directives().items() if d is None}
    doubled = []
    for inner in directives:
        for package in directives:
            if not inner.startswith(package + "."):
                continue
            outer_module, inner_module = _import(package), _import(inner)
            if outer_module is None or inner_module is None:
                continue
            doubled += [
                f"{inner}.{n} (import it from {package})"
                for n in sorted(_members(inner_module) & _members(outer_module))
            ]
    assert doubled == []


def test_the_docs_build_sees_every_export_of_the_packages_it_lists() -> None:
    # autodoc lists what a module holds: a lazily loaded export (PEP 562)
    # would be left out unless docs/conf.py loads it first
    runpy.run_path(str(DOCS / "conf.py"))
    unseen = []
    for name, directive in _directives().items():
        module = _import(name)
        if directive is None and module is not None and hasattr(module, "__all__"):
            unseen += [f"{name}.{n}" for n in module.__all__ if n not in vars(module)]
    assert unseen == []
