"""Where bmaas and hwlab keep their per-user files, and the one variable that
moves them all: ``BMAAS_HOME``.

By default each default path is per account (``platformdirs``): the store
``~/.local/share/bmaas/bmaas.db``, its key ``~/.config/bmaas/store.key``,
hwlab's lab ``~/.local/state/hwlab/default`` and VM lab
``~/.local/state/hwlab/vm``. Two CI jobs on one runner account (or a job and
a person) then share them, and a ``bmaas db rotate-key`` in one rotates the
other's key. ``BMAAS_HOME=DIR`` roots every one of them under ``DIR``
(``DIR/bmaas.db``, ``DIR/store.key``, ``DIR/hwlab/default``,
``DIR/hwlab/vm``), so two jobs with two homes never meet. An explicit
``--db``/``BMAAS_DB``, ``BMAAS_KEY_FILE``, ``--state-dir``/``HWLAB_STATE_DIR``
still wins over it.

Plain Python: read at every call (a test or a library may set it late).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import platformdirs

__all__ = ["HOME_ENV", "user_dir"]

#: the environment variable that roots every default path
HOME_ENV = "BMAAS_HOME"

Kind = Literal["config", "data", "state"]

_PLATFORM = {
    "config": platformdirs.user_config_path,
    "data": platformdirs.user_data_path,
    "state": platformdirs.user_state_path,
}


def user_dir(kind: Kind, app: Literal["bmaas", "hwlab"] = "bmaas") -> Path:
    """The directory of ``app``'s ``kind`` of per-user files: under
    ``BMAAS_HOME`` when it is set (bmaas's own at its top, hwlab's in
    ``hwlab/``), else the platform's per-user directory."""
    home = os.environ.get(HOME_ENV, "")
    if home:
        root = Path(os.path.expanduser(home)).absolute()
        return root if app == "bmaas" else root / app
    return _PLATFORM[kind](app)
