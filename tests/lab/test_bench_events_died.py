"""``hwlab bench events``: a row whose ``bmaas sync`` exits ends at once
with what the sync said, as an unmeasured row -- it does not wait out half
the row's duration while nothing runs (a 10,000-node row sat 20 minutes
beside a dead sync, its stderr thrown away)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from bmaas.hwlab.harness.bench import events
from bmaas.store import Store

pytestmark = pytest.mark.lab  # a real process's exit, waited for as the bench does


class Lab:
    """What a row asks of the lab before its first pass: no BMC ever fires."""

    def status(self) -> dict[str, Any]:
        return {"nodes": {"n1": {"fired": {}}}}


def test_a_row_whose_sync_dies_ends_with_what_it_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bmaas"
    fake.write_text("#!/bin/sh\necho 'error: too many open files (node n1)' >&2\nexit 3\n")
    fake.chmod(0o755)
    db = tmp_path / "bench.db"
    Store.open(str(db), create=True).close()
    monkeypatch.setattr(events, "bmaas_console", lambda: str(fake))
    monkeypatch.setattr(events, "count_requests", lambda lab, names: None)
    options = events.Options(duration=3600.0)
    started = time.monotonic()
    with pytest.raises(events.SyncDied) as died:
        events.one_mode("events", Lab(), db, ["n1"], options, lambda _: None)
    assert time.monotonic() - started < 60  # not half of 3600 s
    assert "exited 3" in str(died.value)
    assert "too many open files (node n1)" in str(died.value)
    assert (tmp_path / "sync-events.log").read_text().startswith("error: too many open files")
