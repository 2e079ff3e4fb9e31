"""What every bmaas and hwlab command shares: one-line errors, JSON output.

An operator at 3 a.m. wants one clear line, not a traceback: every
:class:`~bmaas.faults.BmaasError` (and a few OS errors) becomes ``error: ...``
on stderr with exit code 2; ``--debug`` brings the traceback back.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import stat
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from bmaas import validate
from bmaas.faults import BmaasError, InputError
from bmaas.secrets import MaskingFormatter, mask, mask_urls

__all__ = [
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "BmaasGroup",
    "FiniteFloat",
    "ImageURL",
    "InputFile",
    "InputProblems",
    "LazyGroup",
    "MaskingFormatter",
    "Name",
    "Seconds",
    "WholeNumber",
    "echo_rows",
    "emit_json",
    "setup_logging",
]

#: some (not all) of the work failed: per-item results say which
EXIT_FAILURE = 1
#: the command could not run at all: bad input, unusable state
EXIT_USAGE = 2


class BmaasGroup(click.Group):
    """A click group that turns bmaas errors into one line and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except RecursionError:
            # the loaders refuse deep nesting; this is the last line of defence
            click.echo("error: input nested too deeply to process", err=True)
            ctx.exit(EXIT_USAGE)
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
            # an error that carries several problems (an inventory's, unknown
            # instances) prints each on its own line
            for problem in getattr(exc, "problems", None) or [exc]:
                click.echo(f"error: {mask_urls(str(problem))}", err=True)
            ctx.exit(EXIT_USAGE)


class InputProblems(InputError):
    """Several problems with one command's input, each its own ``error:``
    line (``problems``): every unknown instance named, not only the first."""

    def __init__(self, problems: Sequence[InputError]) -> None:
        first = problems[0]
        super().__init__(first.message, source=first.source, line=first.line, field=first.field)
        self.problems = list(problems)


if TYPE_CHECKING:
    _FloatParam = click.ParamType[float, Any]
    _StrParam = click.ParamType[str, Any]
else:  # click < 8.5: ParamType is not generic at run time (pyproject.toml allows 8.2)
    _FloatParam = _StrParam = click.ParamType


class FiniteFloat(_FloatParam):
    """A float option that is finite and in range: click's ``FloatRange``
    lets ``nan`` through (every comparison with NaN is false), so
    ``--interval nan`` ran a hot loop. The rules are :mod:`bmaas.validate`'s,
    the same an inventory or lab file is held to."""

    name = "number"
    what = "a number"

    def __init__(
        self,
        min: float | None = None,
        max: float | None = None,
        *,
        min_open: bool = False,
        max_open: bool = False,
    ) -> None:
        self.min, self.max, self.min_open, self.max_open = min, max, min_open, max_open

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, int | float) or isinstance(value, bool):
            # ASCII digits only: float() also reads "\u0665", "5\xa0" and "1_000"
            parsed = validate.numeric(str(value))
            if isinstance(parsed, str):
                if parsed.strip().lower().lstrip("+-") not in ("nan", "inf", "infinity"):
                    self.fail(f"{value!r} is not {self.what}", param, ctx)
                parsed = float(parsed.strip())  # refused below as not finite
            value = parsed
        try:
            return validate.number(
                value,
                low=self.min,
                high=self.max,
                low_open=self.min_open,
                high_open=self.max_open,
                what=self.what,
            )
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Seconds(FiniteFloat):
    """A time option: finite seconds, at most one day unless ``max`` says
    otherwise (:data:`bmaas.validate.MAX_SECONDS`)."""

    name = "seconds"
    what = "a number of seconds"

    def __init__(
        self, min: float = 0.0, max: float = validate.MAX_SECONDS, *, min_open: bool = False
    ) -> None:
        super().__init__(min, max, min_open=min_open)


class WholeNumber(click.IntRange):
    """A whole-number option (a count, a port) written in ASCII digits:
    click's ``IntRange`` reads with ``int()``, which also takes ``"\u0662"``
    (Arabic-Indic two), ``"1_000"`` and ``"\uff12"`` (a fullwidth two). Range
    and help as ``IntRange``'s; the text's rules are :mod:`bmaas.validate`'s
    (:func:`~bmaas.validate.numeric`)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not isinstance(validate.numeric(value), int):
            self.fail(f"{value!r} is not a whole number in ASCII digits", param, ctx)
        return super().convert(value, param, ctx)


class Name(_StrParam):
    """A name from :data:`bmaas.validate.NAME_ALPHABET` (a node name, an
    instance name prefix): no '/', no spaces, nothing a shell or a path would
    read twice."""

    name = "name"

    def __init__(self, *, max_length: int = 255) -> None:
        #: shorter where bmaas appends to the name (deploy's "-001")
        self.max_length = max_length

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            text = validate.name(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if len(text) > self.max_length:
            self.fail(f"must be at most {self.max_length} characters", param, ctx)
        return text


class ImageURL(_StrParam):
    """A URL a BMC fetches an image from (:func:`bmaas.validate.image_url`):
    ``javascript:alert(1)`` and ``'not a url\x01'`` are refused before
    anything is asked of a BMC, not sent to every node to fail there."""

    name = "url"

    def __init__(self, schemes: tuple[str, ...] = validate.IMAGE_SCHEMES) -> None:
        self.schemes = schemes

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return validate.image_url(value, schemes=self.schemes)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class InputFile(click.Path):
    """A file option that must name a regular file (as click's ``Path`` with
    ``dir_okay=False``, and also no FIFO, device or socket): ``--inventory
    /dev/zero`` is refused here, from ``stat``, before anything opens it.
    The reader still bounds what it reads (:mod:`bmaas.files`)."""

    def __init__(self, *, exists: bool = False) -> None:
        super().__init__(dir_okay=False, exists=exists)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return path  # missing: click (exists=True) or the reader says so
        if not stat.S_ISREG(mode):
            self.fail(f"{os.fsdecode(path)!r} is not a regular file", param, ctx)
        return path


def _shorten(text: str, limit: int) -> str:
    """What click shows of a long help in a command list: whole words, '...'."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 3, 1)].rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:") + "..."


class LazyGroup(BmaasGroup):
    """A root group whose commands are imported only when one runs.

    ``lazy`` maps a command name to ``("module:attribute", short help)``.
    ``bmaas --help`` lists the commands from that table and imports none of
    them, so it does not pay for SQLAlchemy, Alembic, rich or the drivers; a
    test holds each short help against the command's own docstring.
    """

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]] | None = None, **kw: Any):
        super().__init__(*args, **kw)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, _, attribute = self.lazy[cmd_name][0].partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max((len(n) for n in self.list_commands(ctx)), default=0)
        rows = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is None:
                rows.append((name, _shorten(self.lazy[name][1], limit)))
            elif not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


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
    handler.setFormatter(MaskingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    if not debug and verbose < 2:
        handler.addFilter(_not_chatty)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else (logging.INFO if verbose else logging.WARNING))


def echo_rows(lines: Sequence[str]) -> None:
    """Print a table: its lines, rendered before anything is written, in one
    write while no log record is (the root log handlers' locks held). On a
    terminal stdout and stderr meet: a WARNING from another thread (a node's
    call still running past the deadline, a logout in the background) lands
    before or after the table, never between its rows (issue 50)."""
    if not lines:
        return
    text = "\n".join(lines)
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.acquire()
    try:
        click.echo(text)
    finally:
        for handler in reversed(handlers):
            handler.release()


def emit_json(data: Any) -> None:
    """Print ``data`` as JSON, every credential masked."""
    click.echo(json.dumps(mask(data), indent=2, sort_keys=True, default=str))


def common_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--debug`` and ``-v`` for a root group."""
    fn = click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")(fn)
    return click.option("-v", "--verbose", count=True, help="Log more (repeatable).")(fn)


def run(group: click.Group, argv: Sequence[str] | None = None) -> None:
    group.main(args=list(argv) if argv is not None else sys.argv[1:], prog_name=group.name)
