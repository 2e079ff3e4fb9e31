"""What a command loads before its ``--deadline`` is checked (issue 36): the
command's budget starts at ``exec`` and an import cannot be interrupted, so
the store (SQLAlchemy), the drivers (pyghmi, sushy), the Ironic backend
(openstacksdk) and the metrics server (prometheus_client) are imported only
after the check, by the work that needs them. A start-up that already spent
the budget then ends with none of them loaded. Checked by what each run
imported (never by timing: docs/development.md has the figures)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: what no command may import before its deadline check
HEAVY = (
    "sqlalchemy",
    "alembic",
    "pyghmi",
    "sushy",
    "sushy_tools",
    "flask",
    "openstack",
    "keystoneauth1",
    "requests",
    "prometheus_client",
    "psycopg",
)

COMMANDS = [
    ["sync", "--deadline", "1"],
    ["sync", "--deadline", "1", "--processes", "2"],
    ["deploy", "--deadline", "1"],
    ["undeploy", "--all", "--deadline", "1"],
    ["power", "status", "--all", "--deadline", "1"],
    ["power", "on", "--all", "--deadline", "1"],
    ["boot-device", "get", "--all", "--deadline", "1"],
    ["vmedia", "eject", "--all", "--deadline", "1"],
    ["maintenance", "set", "n1", "--reason", "disk", "--evacuate", "--deadline", "1"],
    ["status", "check", "--deadline", "1"],
]

_PROBE = """
import json, sys, time
import bmaas.clock
# a start-up that took 100 s: the command's budget is gone before it begins
bmaas.clock.process_started = lambda **kw: time.monotonic() - 100.0
from bmaas.cli import main
code = None
try:
    main(["--db", sys.argv[1], *json.loads(sys.argv[2])])
except SystemExit as exc:
    code = exc.code
heavy = set(json.loads(sys.argv[3]))
print(json.dumps({"code": code, "loaded": sorted({m.split(".")[0] for m in sys.modules} & heavy)}))
"""


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a[:2]) for a in COMMANDS])
def test_a_spent_deadline_ends_the_command_before_anything_heavy_loads(
    tmp_path: Path, args: list[str]
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _PROBE,
            str(tmp_path / "bmaas.db"),
            json.dumps(args),
            json.dumps(HEAVY),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "was spent by start-up" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert result["code"] == 1
    assert result["loaded"] == [], result["loaded"]
    assert not (tmp_path / "bmaas.db").exists()  # nothing was opened, let alone made


#: what a fleet command does not import before its deadline's first look, now
#: that the look comes after click has read the whole command line (issue 44):
#: the driver's settings (sealing, TLS: ssl, platformdirs), the retry
#: (tenacity), YAML, the store's records, the pool -- together 60-80 ms of a
#: quiet 2-core box's 0.13-0.2 s start-up, two to three times that under load
BEFORE_THE_FIRST_LOOK = (
    "yaml",
    "tenacity",
    "ssl",
    "platformdirs",
    "termios",
    "bmaas.driver_info",
    "bmaas.sealed",
    "bmaas.tlspolicy",
    "bmaas.retry",
    "bmaas.pool",
    "bmaas.store",
)

FLEET = [
    ["power", "status", "--all", "--deadline", "1"],
    ["power", "reboot", "--all", "--deadline", "1"],
    ["boot-device", "set", "--all", "--device", "pxe", "--deadline", "1"],
    ["vmedia", "eject", "--all", "--deadline", "1"],
]

_FIRST_LOOK = """
import json, sys, time
import bmaas.clock
bmaas.clock.process_started = lambda **kw: time.monotonic() - 100.0
from bmaas.cli import main
try:
    main(["--db", sys.argv[1], *json.loads(sys.argv[2])])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "loaded": sorted(sys.modules)}))
"""


@pytest.mark.parametrize("args", FLEET, ids=[" ".join(a[:2]) for a in FLEET])
def test_a_fleet_commands_first_look_comes_before_its_work_is_loaded(
    tmp_path: Path, args: list[str]
) -> None:
    """Its command line read in full, the fleet command's start-up rule
    speaks with only click, the command modules, the driver interface and
    the node runner loaded (the spent line, exit 1)."""
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_LOOK, str(tmp_path / "bmaas.db"), json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "was spent by start-up" in done.stderr, done.stderr
    assert result["code"] == 1
    loaded = set(result["loaded"])
    early = [
        m
        for m in BEFORE_THE_FIRST_LOOK
        if m in loaded or any(name.startswith(m + ".") for name in loaded)
    ]
    assert early == []
