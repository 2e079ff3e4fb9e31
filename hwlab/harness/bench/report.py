"""What every benchmark hands back, and the four ways it is shown.

A scenario returns one :class:`Report`: tables of figures (the terminal
table and the Markdown tables are the same rows), headline ratios, notes that
say how the figures were made, the raw data, and the machine it ran on. Then:

* :func:`print_report`: tables on the terminal (rich);
* :meth:`Report.to_dict`: ``--json``, for machines;
* :func:`write_report`: ``--report DIR`` writes ``NAME.png`` (a chart the
  scenario draws), ``NAME.md`` (a short summary pointing at the chart) and
  ``NAME.json``.

matplotlib is imported only when a chart is drawn (``hwlab --help`` stays
fast, and a machine without the ``bench`` extra can still print tables), and
always with the Agg backend: no display, no window.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import platform
import shutil
import subprocess
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from bmaas.faults import InputError
from bmaas.secrets import mask

__all__ = [
    "Report",
    "Table",
    "environment",
    "fmt_ratio",
    "fmt_seconds",
    "print_report",
    "ratio",
    "rounded",
    "short",
    "write_report",
]

#: share of the CPUs others may use before a report calls the machine loaded
LOADED_PERCENT = 25.0

#: draws a scenario's chart on a fresh matplotlib Figure
Plotter = Callable[[Any, "Report"], None]


@dataclasses.dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Report:
    """One scenario's run: figures, headline ratios and how they were made."""

    scenario: str
    title: str
    params: dict[str, Any]
    tables: list[Table]
    #: the ratios the scenario exists for, by name (None: not measurable this run)
    headline: dict[str, float | None]
    notes: list[str]
    data: dict[str, Any]
    plot: Plotter | None = dataclasses.field(default=None, repr=False, compare=False)
    #: rows the scenario could not measure, each with why: the run failed
    #: (``hwlab bench`` exits 1), however much of it did measure
    unmeasured: list[str] = dataclasses.field(default_factory=list)
    # Set by whoever ran the scenario (the CLI):
    #: the exact command that reproduces these figures
    command: str = ""
    smoke: bool = False
    env: dict[str, Any] = dataclasses.field(default_factory=dict)
    elapsed: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "plot"}
        out["tables"] = [t.to_dict() for t in self.tables]
        masked: dict[str, Any] = mask(out)
        return masked


# -- the machine ------------------------------------------------------------------


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _ipmitool_version() -> str | None:
    tool = shutil.which("ipmitool")
    if tool is None:
        return None
    try:
        out = subprocess.run(  # noqa: S603 - ipmitool from PATH, fixed arguments
            [tool, "-V"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().rsplit(" ", 1)[-1] or None


def cpu_busy(interval: float = 1.0) -> float:
    """Share of all cores busy over ``interval`` seconds (0-100). Sampled
    while the benchmark itself is idle, it is other work on the machine."""
    import psutil  # bmaas[lab]; imported here so `hwlab --help` stays fast

    return float(psutil.cpu_percent(interval=interval))


def environment(busy_before: float, busy_after: float) -> dict[str, Any]:
    """Where and when the figures were measured, and how busy the machine was
    with other work just before and just after (on a 2-core box, others'
    work moves the figures: the report says so)."""
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpus": os.cpu_count() or 1,
        "python": platform.python_version(),
        "other_cpu_busy_before": round(busy_before, 1),
        "other_cpu_busy_after": round(busy_after, 1),
        "load_after": [round(x, 2) for x in os.getloadavg()],
        # more than a quarter of the machine busy with others' work
        "loaded": max(busy_before, busy_after) > LOADED_PERCENT,
        "versions": {
            "bmaas": _version("bmaas"),
            "pyghmi": _version("pyghmi"),
            "sushy": _version("sushy"),
            "ipmitool": _ipmitool_version(),
        },
    }


# -- formatting -------------------------------------------------------------------


def fmt_seconds(value: float | None, *, lower_bound: bool = False) -> str:
    """``0.8 ms``, ``1.52 s``; ``≥ 90 s`` for a figure cut short by a cap."""
    if value is None:
        return "—"
    prefix = "≥ " if lower_bound else ""
    if value < 0.01:
        return f"{prefix}{value * 1000:.2f} ms"
    if value < 1.0:
        return f"{prefix}{value * 1000:.1f} ms"
    if value < 100:
        return f"{prefix}{value:.2f} s"
    return f"{prefix}{value:.0f} s"


def fmt_ratio(value: float | None, *, lower_bound: bool = False) -> str:
    if value is None:
        return "—"
    prefix = "≥ " if lower_bound else ""
    if value >= 100:
        return f"{prefix}{value:,.0f}x"
    return f"{prefix}{value:.2f}x" if value < 10 else f"{prefix}{value:.1f}x"


def rounded(value: float | None, digits: int) -> float | None:
    """``value`` to ``digits`` places for a headline (None stays None), but
    with two significant figures at least: a ratio of 0.04 is a finding, and
    ``round(0.04, 1)`` would report it as 0 (the sync-cpu smoke's quiet
    ratio at load 24, where a 12 s quiet row held no polling pass)."""
    if value is None:
        return None
    if value and abs(value) < 1:
        digits = max(digits, 1 - math.floor(math.log10(abs(value))))
    return round(value, digits)


def ratio(a: float | None, b: float | None, digits: int | None = None) -> float | None:
    """``a / b`` (rounded to ``digits``); None where either is missing or zero."""
    if not (a and b):
        return None
    return a / b if digits is None else round(a / b, digits)


def short(text: str | None, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters (``-`` for none): an
    error message in a table cell."""
    if not text:
        return "-"
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return "—" if value is None else str(value)


# -- output -----------------------------------------------------------------------


def _env_line(report: Report) -> str:
    env = report.env
    busy = (
        f"other work used {env.get('other_cpu_busy_before', 0):.0f}% / "
        f"{env.get('other_cpu_busy_after', 0):.0f}% of the CPUs just before / after"
    )
    if env.get("loaded"):
        busy += " (machine loaded by other work)"
    size = "smoke size" if report.smoke else "full size"
    return (
        f"measured {env.get('date', '?')} on {env.get('host', '?')}, {env.get('cpus')} cores; "
        f"{busy}; {size}; took {report.elapsed:.0f} s"
    )


def print_report(report: Report, *, console: Any = None) -> None:
    """The report's tables, headline and notes on the terminal."""
    from rich.console import Console
    from rich.table import Table as RichTable

    console = console or Console()
    console.print(f"[bold]{report.title}[/bold]")
    console.print(_env_line(report))
    for table in report.tables:
        rich_table = RichTable(title=table.title, title_justify="left")
        for column in table.columns:
            rich_table.add_column(column)
        for row in table.rows:
            rich_table.add_row(*(_cell(v) for v in row))
        console.print(rich_table)
    for note in report.notes:
        console.print(f"  - {note}", highlight=False)
    console.print(f"command: {report.command}", highlight=False)


def markdown(report: Report, *, image: str | None = None) -> str:
    """A short summary: how it was measured, the tables, the chart."""
    lines = [f"## {report.title}", "", f"_{_env_line(report)}_", "", f"`{report.command}`", ""]
    for table in report.tables:
        lines += [f"**{table.title}**", ""]
        lines.append("| " + " | ".join(table.columns) + " |")
        lines.append("|" + "---|" * len(table.columns))
        for row in table.rows:
            lines.append("| " + " | ".join(_cell(v).replace("|", "/") for v in row) + " |")
        lines.append("")
    if report.notes:
        lines += [f"- {note}" for note in report.notes] + [""]
    if image:
        lines += [f"![{report.title}]({image})", ""]
    return "\n".join(lines)


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise InputError(
            "--report draws charts with matplotlib: pip install 'bmaas[bench]'",
            field="--report",
        ) from None
    matplotlib.use("Agg", force=True)  # files only: never a window, works without a display
    import matplotlib.pyplot as plt

    return plt


def write_png(report: Report, path: Path) -> None:
    plt = _pyplot()
    fig = plt.figure(figsize=(10, 5.5), dpi=110)
    try:
        if report.plot is not None:
            report.plot(fig, report)
        stamp = "smoke size, " if report.smoke else ""
        fig.text(
            0.99,
            0.005,
            f"{stamp}{report.env.get('date', '')[:10]}, {report.env.get('cpus')} cores"
            + (", machine loaded" if report.env.get("loaded") else ""),
            ha="right",
            va="bottom",
            fontsize=7,
            color="0.4",
        )
        fig.savefig(path)
    finally:
        plt.close(fig)


def write_report(report: Report, directory: Path) -> dict[str, Path]:
    """``NAME.png``, ``NAME.md`` and ``NAME.json`` in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {
        "png": directory / f"{report.scenario}.png",
        "md": directory / f"{report.scenario}.md",
        "json": directory / f"{report.scenario}.json",
    }
    write_png(report, paths["png"])
    paths["md"].write_text(markdown(report, image=paths["png"].name), encoding="utf-8")
    paths["json"].write_text(
        json.dumps(report.to_dict(), indent=2, sort_keys=True, default=str) + "\n",
        encoding="utf-8",
    )
    return paths


def write_index(reports: Sequence[Report], directory: Path) -> Path:
    """``README.md`` in ``directory``: every scenario's summary, in order."""
    path = directory / "README.md"
    body = ["# hwlab bench", ""]
    body += [markdown(r, image=f"{r.scenario}.png") for r in reports]
    path.write_text("\n".join(body), encoding="utf-8")
    return path
