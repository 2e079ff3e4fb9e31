"""A driver's optional capabilities are entry points named by the driver
(issue 45): bmaas finds event support the way it finds drivers, so a
third-party driver can offer events; nothing guesses a module by name."""

from __future__ import annotations

import importlib.metadata
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bmaas import events, registry

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[Any]]]:
    """Entry points as an installed third-party driver would add them."""
    extra: dict[str, list[Any]] = {}
    real = registry.entry_points

    def entry_points(*, group: str) -> list[Any]:
        return [*real(group=group), *extra.get(group, [])]

    monkeypatch.setattr(registry, "entry_points", entry_points)
    registry.capability.cache_clear()
    yield extra
    registry.capability.cache_clear()


def acme_services(records: Any) -> tuple[list[Any], dict[str, str]]:
    return [], {r.name: "acme streams nothing" for r in records}


def test_the_installed_redfish_driver_offers_streams_and_push() -> None:
    from bmaas.drivers.redfish import events as redfish_events
    from bmaas.drivers.redfish import push

    assert events.edge_streams("redfish") is redfish_events.services
    assert registry.capability(registry.PUSH_GROUP, "redfish") is push
    assert events.edge_streams("ipmi") is None  # IPMI: polled
    assert events.edge_streams("fake") is None


def test_a_third_party_driver_offers_events_through_its_entry_point(
    plugins: dict[str, list[Any]],
) -> None:
    plugins[registry.EVENTS_GROUP] = [
        importlib.metadata.EntryPoint("acme", f"{__name__}:acme_services", registry.EVENTS_GROUP)
    ]
    assert events.edge_streams("acme") is acme_services


def test_a_plugin_that_does_not_import_offers_nothing_and_says_why(
    plugins: dict[str, list[Any]], caplog: pytest.LogCaptureFixture
) -> None:
    plugins[registry.EVENTS_GROUP] = [
        importlib.metadata.EntryPoint("broken", "no_such_module:services", registry.EVENTS_GROUP)
    ]
    with caplog.at_level(logging.ERROR, logger="bmaas.registry"):
        assert events.edge_streams("broken") is None
    assert "bmaas.events 'broken' is installed but does not import" in caplog.text


def test_no_core_module_guesses_a_driver_module_by_name() -> None:
    guessed = re.compile(r"""import_module\(\s*f?["']bmaas\.drivers\.\{""")
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "bmaas").rglob("*.py")
        if guessed.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []
