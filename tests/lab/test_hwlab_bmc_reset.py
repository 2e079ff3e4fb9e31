"""``bmaas bmc reset NODE`` against hwlab's Redfish BMCs (issue 51): every
shape's Manager offers ``Manager.Reset`` with its vendor's ResetType values,
the reset takes the BMC away for the machine's ``bmc_reboot_time`` (its
port refuses, as after the ``bmc_reboot`` effect) and the command waits for
``--back-checks`` answers in a row; a BMC away past ``--back-timeout`` ends
``BMCNotBack``, exit 1."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from bmaas.cli import App, cli
from bmaas.fakes.machine import Hardware
from bmaas.hwlab.labspec import NodeSpec
from bmaas.hwlab.worker import ShardServers
from bmaas.retry import RetryLimits
from bmaas.secrets import Secret
from tests.lab.redfish_support import served_shard

pytestmark = pytest.mark.lab

PASSWORD = "lab-password"
#: the reset's window: the wait's answers cannot start before it ends
AWAY = 1.5
SHAPES = ("hwlab", "dmtf", "idrac9", "ilo5", "xcc", "openbmc")
#: the node whose BMC stays away past the command's --back-timeout
LONG = "long-away"
WAIT = ("--back-interval", "0.3", "--back-checks", "2", "--deadline", "40")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ShardServers, Path]]:
    tmp = tmp_path_factory.mktemp("bmc-reset")

    def node(name: str, shape: str, away: float) -> NodeSpec:
        return NodeSpec(
            name=name,
            protocols=("redfish",),
            hardware=Hardware(bmc_reboot_time=away),
            password=Secret(PASSWORD),
            shape=shape,
        )

    nodes = (*(node(s, s, AWAY) for s in SHAPES), node(LONG, "dmtf", 30.0))
    with served_shard(nodes, tmp) as (servers, inventory):
        db = tmp / "bmaas.db"
        enrolled = bmaas(db, "enroll", str(inventory))
        assert enrolled.exit_code == 0, enrolled.output
        yield servers, db


def bmaas(db: Path, *args: str) -> Result:
    app = App(db=str(db), retry=RetryLimits(total=30.0))
    return CliRunner().invoke(cli, list(args), obj=app, catch_exceptions=False)


def _manager_reset(servers: ShardServers, name: str) -> dict[str, Any]:
    """The Manager's ``#Manager.Reset`` action as the BMC shows it."""
    base = f"http://127.0.0.1:{servers.endpoints[name]['redfish']}"
    auth = urllib.request.HTTPPasswordMgrWithDefaultRealm()
    auth.add_password(None, base, "admin", PASSWORD)
    opener = urllib.request.build_opener(urllib.request.HTTPBasicAuthHandler(auth))

    def get(path: str) -> Any:
        with opener.open(base + path, timeout=5) as answer:
            return json.load(answer)

    managers = get("/redfish/v1/Managers")["Members"]
    return get(managers[0]["@odata.id"])["Actions"]["#Manager.Reset"]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_reset_bmc_goes_away_and_is_waited_for(
    lab: tuple[ShardServers, Path], shape: str
) -> None:
    servers, db = lab
    offered = _manager_reset(servers, shape)["ResetType@Redfish.AllowableValues"]
    assert offered == (["GracefulRestart"] if shape == "idrac9" else offered)
    assert "GracefulRestart" in offered
    result = bmaas(db, "bmc", "reset", shape, "--back-timeout", "10", *WAIT)
    assert result.exit_code == 0, result.output
    found = re.search(r"back after ([0-9.]+)s", result.output)
    assert found is not None, result.output
    # away for AWAY seconds, then 2 answers 0.3 s apart: never quicker
    assert float(found.group(1)) >= AWAY, result.output
    assert "BMC answers (2 of 2)" in result.output


def test_a_bmc_kept_away_past_the_bound_is_not_back(lab: tuple[ShardServers, Path]) -> None:
    _servers, db = lab
    result = bmaas(db, "bmc", "reset", LONG, "--back-timeout", "2", *WAIT)
    assert result.exit_code == 1, result.output
    assert "BMCNotBack" in result.output
