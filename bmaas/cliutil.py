"""What every bmaas and hwlab command shares: one-line errors, JSON output.

An operator at 3 a.m. wants one clear line, not a traceback: every
:class:`~bmaas.faults.BmaasError` (and a few OS errors) becomes ``error: ...``
on stderr with exit code 2; ``--debug`` brings the traceback back.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from bmaas.faults import BmaasError
from bmaas.secrets import mask

__all__ = ["EXIT_FAILURE", "EXIT_USAGE", "BmaasGroup", "emit_json", "setup_logging"]

#: some (not all) of the work failed: per-item results say which
EXIT_FAILURE = 1
#: the command could not run at all: bad input, unusable state
EXIT_USAGE = 2


class BmaasGroup(click.Group):
    """A click group that turns bmaas errors into one line and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.BadParameter as exc:
            # A file that is a directory or unreadable, a value out of range:
            # one line naming the option, not click's usage block.
            click.echo(f"error: {exc.format_message()}", err=True)
            ctx.exit(EXIT_USAGE)
        except (BmaasError, OSError) as exc:
            if ctx.find_root().params.get("debug"):
                # --debug changes what is printed, never the exit code
                import traceback

                traceback.print_exc()
            click.echo(f"error: {exc}", err=True)
            ctx.exit(EXIT_USAGE)


#: protocol libraries that log their own view of failures bmaas reports as
#: typed faults; heard on the terminal only with -vv or --debug
_CHATTY = ("sushy", "pyghmi", "urllib3")


def _not_chatty(record: logging.LogRecord) -> bool:
    return record.name.split(".", 1)[0] not in _CHATTY


def setup_logging(verbose: int, debug: bool) -> None:
    """Log to stderr at WARNING (-v: INFO, --debug: DEBUG). Leaves logging
    alone when something else (a test runner, an embedding program) has
    configured it already."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    if not debug and verbose < 2:
        handler.addFilter(_not_chatty)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else (logging.INFO if verbose else logging.WARNING))


def emit_json(data: Any) -> None:
    """Print ``data`` as JSON, every credential masked."""
    click.echo(json.dumps(mask(data), indent=2, sort_keys=True, default=str))


def common_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--debug`` and ``-v`` for a root group."""
    fn = click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")(fn)
    return click.option("-v", "--verbose", count=True, help="Log more (repeatable).")(fn)


def run(group: click.Group, argv: Sequence[str] | None = None) -> None:
    group.main(args=list(argv) if argv is not None else sys.argv[1:], prog_name=group.name)
