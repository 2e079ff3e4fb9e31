"""A password or token in a URL never reaches the store, ``node show``, the
logs or the lab's status: one masking function (``bmaas.secrets.mask_url``)
wherever a URL is stored or printed."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bmaas.cli import App, cli
from bmaas.cliutil import setup_logging
from bmaas.driver import PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.fleet import FakeFleet
from bmaas.ops import driver_factory
from bmaas.retry import RetryLimits
from bmaas.secrets import MaskingFormatter, mask, mask_logs, mask_url, mask_urls
from tests.fleet import write_inventory

PASSWORD = "Url-Passw0rd-77c"
TOKEN = "tok-5e1f9a"
URL = f"http://admin:{PASSWORD}@images.example/boot.iso?token={TOKEN}&arch=x86_64"


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("http://u:PASS@host/a.iso", "http://u:***@host/a.iso"),
        ("https://TOKEN@host/a.iso", "https://***@host/a.iso"),
        (
            "https://s3.example/b/a.iso?X-Amz-Credential=AK&X-Amz-Date=1&X-Amz-Signature=ff",
            "https://s3.example/b/a.iso?X-Amz-Credential=***&X-Amz-Date=1&X-Amz-Signature=***",
        ),
        (
            "https://blob.example/a.iso?sv=1&sig=abc#frag",
            "https://blob.example/a.iso?sv=1&sig=***#frag",
        ),
        ("http://[::1]:8080/a.iso?api_key=k", "http://[::1]:8080/a.iso?api_key=***"),
        ("https://host:8443/redfish/v1", "https://host:8443/redfish/v1"),
        ("not a url at all", "not a url at all"),
    ],
)
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_urls_inside_text_and_data_are_masked() -> None:
    text = f"inserting {URL} failed; retry https://h/x"
    assert PASSWORD not in mask_urls(text)
    assert TOKEN not in mask_urls(text)
    assert "https://h/x" in mask_urls(text)
    assert PASSWORD not in json.dumps(mask({"events": [{"message": text}]}))


@pytest.fixture
def app(tmp_path: Path) -> App:
    fleet = FakeFleet(clock=FakeClock())
    fleet.add("n1", power=PowerState.OFF)
    retry = RetryLimits(sleep=fleet.clock.sleep, clock=fleet.clock, jitter=0.0)
    app = App(
        db=str(tmp_path / "b.db"),
        make_factory=lambda bmc_timeout: driver_factory(fleet=fleet, bmc_timeout=bmc_timeout),
        retry=retry,
        deadline_clock=fleet.clock,
    )
    inventory = write_inventory(tmp_path / "inv.yaml", [{"name": "n1", "driver": "fake"}])
    assert CliRunner().invoke(cli, ["enroll", str(inventory)], obj=app).exit_code == 0
    return app


def bmaas(app: App, *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), obj=app, catch_exceptions=False)


def test_a_url_password_never_reaches_history_node_show_or_the_store(
    app: App, tmp_path: Path
) -> None:
    inserted = bmaas(app, "vmedia", "insert", "n1", "--url", URL)
    assert inserted.exit_code == 0, inserted.output
    for args in (("node", "show", "n1"), ("node", "show", "n1", "--json")):
        shown = bmaas(app, *args)
        assert shown.exit_code == 0
        assert "virtual media inserted: http://admin:***@images.example" in shown.output
        assert PASSWORD not in shown.output
        assert TOKEN not in shown.output
    history = app.store().nodes.events("n1")
    assert any("admin:***@" in e.message for e in history)
    assert all(PASSWORD not in e.message for e in history)
    # the database file itself never held it
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("b.db*"))
    assert PASSWORD.encode() not in raw
    assert TOKEN.encode() not in raw


def test_logs_mask_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    record = logging.LogRecord("sushy", logging.DEBUG, __file__, 1, "GET %s", (URL,), None)
    line = MaskingFormatter("%(name)s: %(message)s").format(record)
    assert line.startswith("sushy: GET http://admin:***@images.example/boot.iso?token=***")
    # bmaas --debug logs through that formatter
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "level", root.level)
    setup_logging(0, True)
    try:
        assert isinstance(root.handlers[0].formatter, MaskingFormatter)
    finally:
        root.handlers.clear()


def test_an_error_line_masks_urls(app: App) -> None:
    result = bmaas(app, "node", "show", f"http://u:{PASSWORD}@h/")
    assert result.exit_code == 2
    assert PASSWORD not in result.stderr


def test_mask_logs_keeps_the_format_of_basic_config_handlers() -> None:
    logger = logging.getLogger("w23.mask_logs")
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("worker: %(message)s"))
    logger.addHandler(handler)
    try:
        mask_logs(logger)
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "insert %s", (URL,), None)
        assert handler.format(record).startswith("worker: insert http://admin:***@images")
    finally:
        logger.removeHandler(handler)
