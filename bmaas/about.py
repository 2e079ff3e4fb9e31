"""What ``bmaas --version`` and ``hwlab --version`` say: the release, the
store schema this release needs, and the Python running it.

The schema revision is the newest migration this bmaas ships (the Alembic
head, read from the scripts' text: no SQLAlchemy or Alembic import), which
is what a support question needs beside the version: a store at an older
revision is migrated by ``bmaas db upgrade`` (docs/releases.md).
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from bmaas import __version__

__all__ = ["version_option", "version_text"]

_F = TypeVar("_F", bound=Callable[..., Any])


def version_text(prog: str) -> str:
    """``prog``'s version lines: ``"bmaas 0.4.0"`` first (what scripts parse),
    then where it is installed, the store schema and the Python."""
    from bmaas.store.migrate import head_revision  # reads files only, no SQLAlchemy

    here = Path(__file__).resolve().parent
    return "\n".join(
        [
            f"{prog} {__version__}",
            f"installed at: {here}",
            f"store schema: {head_revision()} (older stores: `bmaas db upgrade`)",
            f"python: {platform.python_version()} ({sys.executable})",
        ]
    )


def version_option(prog: str, **attrs: Any) -> Callable[[_F], _F]:
    """``--version`` for ``prog``'s root command group: print
    :func:`version_text` and exit, before any other option or command is
    looked at."""

    def show(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if not value or ctx.resilient_parsing:
            return
        click.echo(version_text(prog))
        ctx.exit()

    return click.option(
        "--version",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=show,
        help="Show the version, the store schema it needs and the Python, then exit.",
        **attrs,
    )
