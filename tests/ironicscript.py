"""A script run in the Ironic venv (.venv has no Ironic): the plugin's unit
tests play stand-in tasks there and read back, as JSON on the script's last
line of output, what happened."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from bmaas.hwlab.harness import ironic as harness


def run_json(script: str, *args: str, timeout: float = 120) -> Any:
    """Run ``script`` with ``args`` in the Ironic venv; its last line, parsed."""
    python = harness.find_venv() / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
