"""``bmaas sync``'s push listener options: every problem at once, one usage
error (exit 2), no traceback; good ones make PushSettings."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from bmaas.cli import App, cli
from bmaas.cli.maintenance import _push_settings
from bmaas.events import PushSettings


def test_good_settings() -> None:
    assert _push_settings("10.0.0.5:9121", None, None, None, False) == PushSettings(
        "10.0.0.5", 9121
    )
    assert _push_settings("[::1]:0", "https://bmaas.mgmt:9121/bmaas/events", "c", "k", True) == (
        PushSettings("::1", 0, "https://bmaas.mgmt:9121/bmaas/events", "c", "k", True)
    )
    assert _push_settings(None, None, None, None, False) is None


def test_every_problem_at_once() -> None:
    with pytest.raises(click.UsageError) as caught:
        _push_settings("bmaas.mgmt", "ftp://x", None, "k", False)
    message = str(caught.value)
    assert "--events-listen 'bmaas.mgmt': expected HOST:PORT" in message
    assert "--events-tls-key needs --events-tls-cert" in message
    assert "--events-listen-url 'ftp://x'" in message


def test_options_without_a_listener_are_refused(tmp_path: Path) -> None:
    app = App(db=str(tmp_path / "b.db"))
    result = CliRunner().invoke(
        cli, ["sync", "--interval", "1", "--count", "1", "--events-prefer-push"], obj=app
    )
    assert result.exit_code == 2
    assert "--events-prefer-push need --events-listen HOST:PORT" in result.output
    assert "Traceback" not in result.output
