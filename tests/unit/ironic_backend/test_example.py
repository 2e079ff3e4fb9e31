"""docs/examples/provision_both.py on the embedded backend (the Ironic half
runs in tests/ironic/test_backend_ironic.py, on a real Ironic)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from bmaas.store import Store
from tests.unit.test_provision import Rack

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "provision_both.py"
STUCK = [{"effect": "power_stuck", "operation": "power.set"}]


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("provision_both", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_on_the_embedded_backend(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    rack = Rack(store, count=4, rules={"n01": STUCK, "n02": STUCK})
    placed = load_example().deploy_web(rack.provisioner, count=2, network="prov")
    assert sorted(placed) == ["web-0", "web-1"]
    assert not {"n01", "n02"} & set(placed.values())
    printed = capsys.readouterr().out
    assert "PowerFailure" in printed  # the broken nodes' faults, typed
