"""``python -m bmaas.hwlab.harness.ironic DIR``: ``--help`` is help, and SIGTERM
(like SIGINT) stops the Ironic it started.

No real Ironic is needed: ``BMAAS_IRONIC_VENV`` points the harness at a
stand-in venv whose ``ironic-dbsync`` does nothing and whose ``ironic``
serves ``GET /v1/drivers`` on the configured port, which is all the harness
waits for. What is tested is the harness's own process handling.
"""

from __future__ import annotations

import configparser
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bmaas.hwlab.harness.ironic import HARDWARE_TYPES

pytestmark = pytest.mark.lab

HARNESS = [sys.executable, "-m", "bmaas.hwlab.harness.ironic"]
ROOT = Path(__file__).resolve().parents[2]

FAKE_IRONIC = """\
import configparser, http.server, json, sys
config = configparser.ConfigParser()
config.read(sys.argv[sys.argv.index("--config-file") + 1])
port = int(config["api"]["port"])
body = json.dumps({"drivers": [{"name": n} for n in %r]}).encode()

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def _stand_in_venv(root: Path) -> Path:
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (
        ("ironic-dbsync", "import sys; sys.exit(0)\n"),
        ("ironic", FAKE_IRONIC % (HARDWARE_TYPES,)),
    ):
        script = bin_dir / name
        script.write_text(f"#!{sys.executable}\n{text}")
        script.chmod(0o755)
    return root


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_help_is_help_and_creates_nothing(tmp_path: Path) -> None:
    done = subprocess.run(
        [*HARNESS, "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "usage: python -m bmaas.hwlab.harness.ironic" in done.stdout
    assert list(tmp_path.iterdir()) == []  # not a directory named --help


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_ironic_it_started(tmp_path: Path, sig: signal.Signals) -> None:
    env = {
        **os.environ,
        "BMAAS_IRONIC_VENV": str(_stand_in_venv(tmp_path / "venv")),
        "PYTHONPATH": str(ROOT),
    }
    workdir = tmp_path / "ironic"
    harness = subprocess.Popen(
        [*HARNESS, str(workdir)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert harness.stdout is not None
        line = harness.stdout.readline()  # printed once Ironic answers
        assert line.startswith("ironic at http://127.0.0.1:"), line
        config = configparser.ConfigParser()
        config.read(workdir / "ironic.conf")
        port = int(config["api"]["port"])
        assert _answers(port)
        harness.send_signal(sig)
        assert harness.wait(timeout=20) == 0
        until = time.monotonic() + 10
        while _answers(port) and time.monotonic() < until:
            time.sleep(0.1)
        assert not _answers(port), "Ironic still listening after the harness stopped"
    finally:
        if harness.poll() is None:
            harness.kill()
        harness.communicate()
