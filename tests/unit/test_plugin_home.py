"""The pytest plugin's ``bmaas_home`` fixture: a home of the test's own."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from bmaas import sealed
from bmaas.home import HOME_ENV
from bmaas.store.location import default_db_path


def test_bmaas_home_roots_the_defaults_for_this_test(bmaas_home: Path) -> None:
    assert os.environ[HOME_ENV] == str(bmaas_home)
    assert stat.S_IMODE(bmaas_home.stat().st_mode) == 0o700
    assert default_db_path() == bmaas_home / "bmaas.db"
    if sealed.KEY_FILE_ENV not in os.environ:
        assert sealed.key_path() == bmaas_home / "store.key"
