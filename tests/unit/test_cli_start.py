"""CLI start-up: commands are imported only when they run, so `bmaas --help`,
`bmaas node list` and `hwlab status` load none of what they do not use.
Checked by what each imports (never by timing: the figures are measured by
scripts/bench_cli.py into docs/bench/cli.md)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from bmaas.cli import COMMANDS as BMAAS_COMMANDS
from bmaas.hwlab.cli import COMMANDS as HWLAB_COMMANDS
from bmaas.store import Store, migrate

HEAVY = ("sqlalchemy", "alembic", "rich", "pyghmi", "sushy", "sushy_tools", "flask", "cryptography")


def imported_by(code: str, *, env_db: str | None = None) -> set[str]:
    """Top-level packages among HEAVY that running ``code`` imported."""
    probe = (
        "import sys, json\n"
        f"{code}\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=60
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _run_cli(module: str, args: list[str]) -> str:
    return (
        f"from {module} import cli\n"
        "try:\n"
        f"    cli.main({args!r}, standalone_mode=False)\n"
        "except BaseException:\n"
        "    pass\n"
    )


@pytest.mark.parametrize("table", [BMAAS_COMMANDS, HWLAB_COMMANDS], ids=["bmaas", "hwlab"])
def test_the_lazy_help_table_says_what_each_command_says(table: dict[str, tuple[str, str]]) -> None:
    for name, (target, short_help) in table.items():
        module, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        assert command.name == name
        assert command.get_short_help_str(1000) == short_help, name


def test_bmaas_help_imports_nothing_heavy() -> None:
    assert imported_by(_run_cli("bmaas.cli", ["--help"])) == set()


def test_hwlab_status_imports_no_emulator(tmp_path: Path) -> None:
    loaded = imported_by(_run_cli("bmaas.hwlab.cli", ["status", "--state-dir", str(tmp_path)]))
    assert loaded <= {"rich"}  # the table it prints; no pyghmi, sushy, Flask, cryptography


def test_node_list_on_sqlite_imports_nothing_heavy(tmp_path: Path) -> None:
    db = tmp_path / "bmaas.db"
    Store.open(str(db), create=True).close()
    loaded = imported_by(_run_cli("bmaas.cli", ["--db", str(db), "node", "list"]))
    # read with sqlite3 (bmaas.store.lite): no SQLAlchemy, Alembic, rich or drivers
    assert loaded == set()


def test_schema_revisions_without_alembic_agree_with_alembic(tmp_path: Path) -> None:
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    assert (
        migrate.head_revision() == ScriptDirectory.from_config(migrate._config()).get_current_head()
    )
    store = Store.open(str(tmp_path / "b.db"), create=True)
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'b.db'}")
    with engine.connect() as conn:
        assert (
            migrate.current_revision(conn)
            == MigrationContext.configure(conn).get_current_revision()
        )
        assert migrate.current_revision(conn) == migrate.head_revision()
    engine.dispose()
    store.close()
    empty = sa.create_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    with empty.connect() as conn:
        assert migrate.current_revision(conn) is None
    empty.dispose()
    assert migrate.known_revision(migrate.head_revision())
    assert not migrate.known_revision("9999-from-the-future")
