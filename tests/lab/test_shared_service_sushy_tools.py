"""Stock ``sushy-emulator`` (sushy-tools' fake driver, no libvirt) serving 8
systems on one port, driven by the ``bmaas`` CLI: 8 concurrent deploys are
8/8 active at the first try (sushy-tools keeps a one-time boot override as
persistent: a quirk, not a BootFailure), power on/off --all never fails, a
sync during the deploys never fails a read, and each bmaas process reads the
service root once (one client, one session per service). Issue 24."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab.shared_service import assert_shared_service_run, run_fleet, write_inventory
from tests.sushy_emulator import ROOT_READ, SESSION_LOGIN, sushy_emulator

pytestmark = pytest.mark.lab

SYSTEMS = 8


@pytest.mark.timeout(600)
def test_eight_systems_behind_stock_sushy_tools(tmp_path: Path) -> None:
    with sushy_emulator(tmp_path / "emulator", SYSTEMS) as emulator:
        inventory = write_inventory(tmp_path / "inv.yaml", emulator.url, emulator.systems)
        run = run_fleet(tmp_path, inventory, SYSTEMS)
        assert_shared_service_run(run, SYSTEMS, lambda: emulator.count(ROOT_READ))
        # sushy-tools has no SessionService: sushy's "auto" falls back to basic
        # auth, so no session was opened (with one, one per process)
        assert emulator.count(SESSION_LOGIN) == 0
