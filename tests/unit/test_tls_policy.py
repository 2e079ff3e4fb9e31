"""bmaas.tlspolicy: the TLS a Redfish BMC must meet, per node and per
process, and the plain-HTTP note (issue 36). The handshakes themselves are
tested against real servers in tests/lab/test_redfish_tls_policy.py."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas import tlspolicy
from bmaas.cli import cli
from bmaas.cli.app import App
from bmaas.driver_info import DriverInfo
from bmaas.faults import InputError
from bmaas.inventory import NodeSpec
from bmaas.store import Store
from bmaas.tlspolicy import TLSPolicy


def test_the_default_is_tls_1_2_and_never_older() -> None:
    policy = TLSPolicy.of(environ={})
    assert policy == TLSPolicy("1.2", None)
    context = tlspolicy.client_context(False, policy)
    assert context.minimum_version is ssl.TLSVersion.TLSv1_2
    for old in ("1.0", "1.1", "TLSv1", "0", "", "1.4"):
        with pytest.raises(ValueError, match=r"1\.2 or 1\.3"):
            tlspolicy.parse_min_version(old)
    assert tlspolicy.parse_min_version("TLSv1.3") == "1.3"


def test_a_node_wins_over_the_process_which_wins_over_the_default() -> None:
    env = {tlspolicy.ENV_MIN_VERSION: "1.3", tlspolicy.ENV_CIPHERS: "ECDHE+AESGCM"}
    assert TLSPolicy.of(environ=env) == TLSPolicy("1.3", "ECDHE+AESGCM")
    assert TLSPolicy.of(min_version="1.2", ciphers="ECDHE+CHACHA20", environ=env) == TLSPolicy(
        "1.2", "ECDHE+CHACHA20"
    )
    context = tlspolicy.client_context(True, TLSPolicy("1.3", None))
    assert context.minimum_version is ssl.TLSVersion.TLSv1_3
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname is True


def test_driver_info_reads_the_fields() -> None:
    info = DriverInfo.parse(
        {
            "redfish_address": "https://bmc",
            "redfish_tls_min_version": "1.3",
            "redfish_tls_ciphers": "ECDHE+AESGCM",
        }
    )
    assert (info.redfish_tls_min_version, info.redfish_tls_ciphers) == ("1.3", "ECDHE+AESGCM")
    with pytest.raises(InputError, match=r"redfish_tls_min_version: TLS version '1\.1'"):
        DriverInfo.parse({"redfish_address": "https://bmc", "redfish_tls_min_version": "1.1"})
    with pytest.raises(InputError, match="no cipher this OpenSSL knows"):
        DriverInfo.parse({"redfish_address": "https://bmc", "redfish_tls_ciphers": "NOPE-NOPE"})


def test_bad_process_settings_are_every_problem_at_once() -> None:
    env = {tlspolicy.ENV_MIN_VERSION: "1.0", tlspolicy.ENV_CIPHERS: "NOPE-NOPE"}
    problems = [str(p) for p in tlspolicy.environment_problems(env)]
    assert problems == [
        "environment: BMAAS_REDFISH_TLS_MIN_VERSION: TLS version '1.0' is not one bmaas "
        "speaks: 1.2 or 1.3 (1.0 and 1.1 are never used)",
        "environment: BMAAS_REDFISH_TLS_CIPHERS: no cipher this OpenSSL knows matches 'NOPE-NOPE'",
    ]


def test_a_bad_process_setting_is_exit_2_before_any_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "bmaas.db"
    with Store.open(str(db), create=True) as store:
        store.nodes.enroll([NodeSpec("n1", "fake", {"fake_machine": "n1"})])
    monkeypatch.setenv(tlspolicy.ENV_MIN_VERSION, "1.1")
    built: list[object] = []
    result = CliRunner().invoke(
        cli,
        ["--db", str(db), "power", "status", "--all"],
        obj=App(make_factory=lambda **kw: built.append(kw)),
    )
    assert result.exit_code == 2
    assert result.output == (
        "error: environment: BMAAS_REDFISH_TLS_MIN_VERSION: TLS version '1.1' is not one "
        "bmaas speaks: 1.2 or 1.3 (1.0 and 1.1 are never used)\n"
    )
    assert built == []


@pytest.mark.parametrize(
    ("address", "verify", "words"),
    [
        ("http://10.0.0.5", True, "plain HTTP: no TLS at all"),
        ("http://10.0.0.5", False, "plain HTTP: no TLS at all"),
        ("http://bmc.example:8000", True, "plain HTTP: no TLS at all"),
        ("https://10.0.0.5", False, "impersonate this BMC"),
        ("http://127.0.0.1:8000", False, None),
        ("http://[::1]:8000", True, None),
        ("http://localhost", False, None),
        ("https://10.0.0.5", True, None),
        ("https://10.0.0.5", "/etc/ca.pem", None),
    ],
)
def test_the_transport_note_says_what_is_true(
    address: str, verify: bool | str, words: str | None
) -> None:
    note = tlspolicy.transport_warning(address, verify)
    if words is None:
        assert note is None
        return
    assert note is not None
    assert words in note
    if address.startswith("http://"):
        # no TLS: verification is moot; what crosses the wire is the password
        assert "impersonate" not in note
        assert "password" in note
