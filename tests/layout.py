"""Where the repository's folders install: one import root, ``bmaas``.

The repository keeps four top-level source folders; the wheel installs
``drivers/``, ``fakes/`` and ``hwlab/`` as ``bmaas.drivers``, ``bmaas.fakes``
and ``bmaas.hwlab`` (pyproject.toml's ``package-dir``), so nothing bmaas
installs can shadow, or be shadowed by, a user's own ``drivers`` or
``fakes``. Tests that read the source by path name modules through this
table, as the interpreter will import them.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: folder -> the import name it installs as
FOLDERS = {
    "bmaas": "bmaas",
    "drivers": "bmaas.drivers",
    "fakes": "bmaas.fakes",
    "hwlab": "bmaas.hwlab",
}


def module_name(path: Path) -> str:
    """The dotted name ``path`` (a ``.py`` file under a source folder) imports as."""
    folder, *rest = path.resolve().relative_to(ROOT).with_suffix("").parts
    if rest and rest[-1] == "__init__":
        rest.pop()
    return ".".join([FOLDERS[folder], *rest])


def source_packages() -> list[str]:
    """Every package (a folder with ``__init__.py``) of the four, by import name."""
    return sorted(
        module_name(init) for folder in FOLDERS for init in (ROOT / folder).rglob("__init__.py")
    )
