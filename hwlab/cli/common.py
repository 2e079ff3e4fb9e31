"""What every hwlab command shares: where the lab's state lives, seeds."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from bmaas.home import user_dir

__all__ = ["default_state_dir", "parse_seed", "state_dir_option"]


def default_state_dir() -> str:
    """``~/.local/state/hwlab/default``, or ``$BMAAS_HOME/hwlab/default``."""
    return os.path.join(user_dir("state", "hwlab"), "default")


def state_dir_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--state-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=default_state_dir,
        envvar="HWLAB_STATE_DIR",
        show_default="per-user state dir",
        help="Where the lab keeps inventory.yaml, events.jsonl and its pid (env HWLAB_STATE_DIR).",
    )(fn)


def parse_seed(text: str | None) -> int | str | None:
    """A seed from the command line: a number if it looks like one."""
    if text is None:
        return None
    return int(text) if text.lstrip("-").isdigit() else text
