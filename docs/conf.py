"""Sphinx configuration for bmaas's documentation (``bash scripts/docs.sh``).

Pages are Markdown (MyST), so the README's text and the docs share one
syntax; the API reference is generated from the docstrings (autodoc). The
build runs with ``-W --keep-going``: every warning is an error in CI.
"""

from __future__ import annotations

import importlib

import bmaas

project = "bmaas"
author = "the bmaas authors"
copyright = "the bmaas authors; Apache-2.0"
release = bmaas.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
]

source_suffix = {".md": "markdown"}
root_doc = "index"

# What is not a page of the site: the build output, the example programs,
# and the changelog's fragments (docs/changes/, compiled into releases.md).
# docs/bench's reports are built (benchmarks.md links them; a hidden toctree
# in index.md holds them).
exclude_patterns = ["_build", "examples", "changes", "Thumbs.db", ".DS_Store"]

# Pages link to each other's sections by GitHub's heading slugs, as the
# README did (`operator.md#budgets---deadline-and---bmc-timeout`).
myst_heading_anchors = 4
myst_enable_extensions = ["deflist"]
# docs/bench's reports are `hwlab bench --report` output, which starts at a
# level-2 heading; their structure is the generator's, not this site's.
suppress_warnings = ["myst.header"]

# Warnings are errors (-W), but Sphinx's nitpicky mode is off: a docstring's
# :class:`~pkg.Name` to a name the reference does not document renders as
# code instead of failing the build.
nitpicky = False

# Ironic and oslo.config live in a conductor's environment, not bmaas's venv:
# the Ironic interfaces are documented against stand-ins for them.
autodoc_mock_imports = ["ironic", "oslo_config", "ironic_lib", "openstack"]

#: packages whose exports load on first use (PEP 562 ``__getattr__``, so a
#: command imports SQLAlchemy only when it needs it): autodoc lists what a
#: module holds, so each export is loaded here and the reference shows it
#: under the name users import (``bmaas.store.Store``, not ``.facade``)
LAZY_PACKAGES = ("bmaas.provision", "bmaas.store")


def load_exports(name: str) -> None:
    """Load every name in ``__all__`` of the package ``name``."""
    module = importlib.import_module(name)
    for export in module.__all__:
        getattr(module, export)


for _package in LAZY_PACKAGES:
    load_exports(_package)
autodoc_default_options = {
    "members": True,
    "show-inheritance": True,
}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
# Type hints name types (PathLike, pytest's) that the reference does not
# document; that is what nitpicky would flag, and it is off.
autoclass_content = "class"

html_theme = "furo"
html_title = f"bmaas {release}"
html_static_path: list[str] = []
