"""``--cloud`` / ``--backend``: picked up by the provisioning commands, bad
input is one line and exit 2 (the Ironic paths run in tests/ironic/)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas.cli import cli as bmaas_cli

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    # openstacksdk warns about its own deprecations on ordinary calls: not ours to fix
    pytest.mark.filterwarnings("ignore::openstack.warnings.OpenStackWarning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK50Warning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK60Warning"),
]


@pytest.mark.parametrize(
    "command",
    [
        ["instance", "list"],
        ["deploy", "-n", "1"],
        ["undeploy", "web-1"],
        ["move", "web-1"],
        ["status", "check"],
    ],
)
def test_every_provisioning_command_takes_cloud(command: list[str]) -> None:
    result = CliRunner().invoke(bmaas_cli, [*command, "--help"])
    assert result.exit_code == 0
    assert "--cloud NAME" in result.output
    assert "--backend [embedded|ironic]" in result.output


def test_unknown_cloud_is_input_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(
        "clouds:\n  lab:\n    auth_type: none\n    auth: {endpoint: http://127.0.0.1:9}\n"
    )
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(clouds))
    result = CliRunner().invoke(bmaas_cli, ["instance", "list", "--cloud", "nowhere"])
    assert result.exit_code == 2
    assert "nowhere" in result.output


def test_ironic_down_is_one_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(
        "clouds:\n  lab:\n    auth_type: none\n    auth: {endpoint: http://127.0.0.1:9}\n"
    )
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(clouds))
    result = CliRunner().invoke(bmaas_cli, ["status", "check", "--cloud", "lab", "--json"])
    assert result.exit_code == 2  # could not run: the API does not answer
    assert "Traceback" not in result.output
    assert "Ironic API unavailable" in result.output


def test_cloud_with_embedded_backend_is_refused() -> None:
    result = CliRunner().invoke(
        bmaas_cli, ["instance", "list", "--cloud", "lab", "--backend", "embedded"]
    )
    assert result.exit_code == 2
    assert "drop --backend embedded" in result.output


def test_cloud_password_never_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(
        "clouds:\n  prod:\n    auth:\n      auth_url: http://127.0.0.1:9/identity\n"
        "      username: admin\n      password: hunter2-s3cret\n      project_name: admin\n"
        "      user_domain_name: Default\n      project_domain_name: Default\n"
    )
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(clouds))
    for command in (["instance", "list"], ["status", "check", "--json"]):
        result = CliRunner().invoke(bmaas_cli, [*command, "--cloud", "prod"])
        assert result.exit_code == 2, result.output
        assert "hunter2" not in result.output
