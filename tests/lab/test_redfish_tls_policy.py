"""No silent TLS downgrade (issue 36), against hwlab's TLS Redfish emulator:
TLS 1.2 at least by default (per node and per process), a server limited to
TLS 1.0/1.1 and a certificate that does not verify are configuration faults
(InputError naming the setting: never retried, never counted), and the plain
HTTP note says what is true."""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bmaas import retry
from bmaas.driver import PowerState
from bmaas.driver_info import DriverInfo
from bmaas.drivers.redfish import RedfishDriver
from bmaas.faults import InputError
from bmaas.hwlab.redfish import RedfishServer
from bmaas.hwlab.tls import LabCertificate, make_certificate, server_context
from bmaas.policy import FleetOutcome, SameNode, policy_for
from bmaas.tlspolicy import TLSPolicy
from tests.budgets import per_call
from tests.lab.redfish_support import PASSWORD, USERNAME, driver_for

pytestmark = pytest.mark.lab


@pytest.fixture
def server() -> Iterator[RedfishServer]:
    with RedfishServer(tls=True) as s:
        yield s


class HandshakeServer:
    """A TLS server on 127.0.0.1 that only shakes hands, synchronously, so
    a refusal goes out as the alert OpenSSL sends (hwlab's asyncio server
    aborts a failed handshake without flushing its alert: the client sees an
    EOF, which says nothing about why). Its context is the lab's, limited
    by the test. Bounded: each accept waits 0.1 s, and it stops when told."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self.context = context
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.handshakes = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(5)
            self.handshakes += 1
            try:
                with self.context.wrap_socket(conn, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass  # the refusal (its alert is sent before this is raised)
            finally:
                conn.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def lab_ca(tmp_path: Path) -> LabCertificate:
    return make_certificate(tmp_path / "tls")


@pytest.fixture
def old_tls(lab_ca: LabCertificate, request: pytest.FixtureRequest) -> Iterator[HandshakeServer]:
    """A server that speaks nothing newer than the parameter's TLS version
    (and what OpenSSL 3 refuses at its default security level)."""
    context = server_context(lab_ca)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TLS 1.0/1.1 on purpose
        context.minimum_version = ssl.TLSVersion.TLSv1
        context.maximum_version = request.param
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    server = HandshakeServer(context)
    yield server
    server.stop()


def _driver(ca: LabCertificate, port: int, **info: Any) -> RedfishDriver:
    raw = {
        "redfish_address": f"https://127.0.0.1:{port}",
        "redfish_username": USERNAME,
        "redfish_password": PASSWORD,
        "redfish_verify_ca": str(ca.ca_path),
        **info,
    }
    return RedfishDriver(f"node-{port}", DriverInfo.parse(raw), bmc_timeout=5.0)


def _port(server: RedfishServer) -> int:
    from bmaas.fakes.machine import FakeMachine
    from tests.lab.redfish_support import HARDWARE

    return server.add(FakeMachine("tls1", HARDWARE), username=USERNAME, password=PASSWORD)


def _fails(driver: Any) -> tuple[InputError, int]:
    """One power read through the operation retry: the fault, and how many
    times the driver was asked."""
    calls = 0

    def read(*, deadline: Any) -> Any:
        nonlocal calls
        calls += 1
        return driver.get_power_state(deadline=deadline)

    with pytest.raises(InputError) as info:
        retry.call(retry.RetryLimits(sleep=lambda _s: None), read, deadline=per_call(driver))
    return info.value, calls


@pytest.mark.parametrize(
    "old_tls",
    [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1, ssl.TLSVersion.TLSv1_2],
    indirect=True,
    ids=["1.0", "1.1", "1.2"],
)
def test_a_bmc_limited_to_old_tls_is_a_configuration_fault(
    old_tls: HandshakeServer, lab_ca: LabCertificate, caplog: pytest.LogCaptureFixture
) -> None:
    """TLS 1.0 only, or 1.1 at most, against the default (1.2); TLS 1.2 at
    most against a node that asks for 1.3: the same configuration fault."""
    caplog.set_level(logging.DEBUG)
    info = (
        {}
        if old_tls.context.maximum_version != ssl.TLSVersion.TLSv1_2
        else {"redfish_tls_min_version": "1.3"}
    )
    driver = _driver(lab_ca, old_tls.port, **info)
    try:
        fault, calls = _fails(driver)
    finally:
        driver.close()
    assert fault.field == "driver_info.redfish_tls_min_version"
    assert fault.node == driver.node
    assert "offers no TLS version bmaas accepts" in str(fault)
    assert calls == 1  # not retried
    assert old_tls.handshakes == 1  # nor resent below the retry (sushy, urllib3)
    row = policy_for(fault)
    assert (row.same_node, row.counts_for_health, row.fences, row.fleet) == (
        SameNode.NEVER,
        False,
        False,
        FleetOutcome.CONFIG,
    )  # never counted against the hardware, never fenced
    assert PASSWORD not in caplog.text
    assert PASSWORD not in str(fault)


@pytest.mark.parametrize("old_tls", [ssl.TLSVersion.TLSv1_2], indirect=True, ids=["1.2"])
def test_the_process_minimum_applies_and_the_node_wins(
    old_tls: HandshakeServer, lab_ca: LabCertificate, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BMAAS_REDFISH_TLS_MIN_VERSION", "1.3")
    driver = _driver(lab_ca, old_tls.port)
    try:
        assert _fails(driver)[0].field == "driver_info.redfish_tls_min_version"
    finally:
        driver.close()
    assert TLSPolicy.of(min_version="1.2").min_version == "1.2"  # the node's own wins
    monkeypatch.setenv("BMAAS_REDFISH_TLS_MIN_VERSION", "1.0")
    with pytest.raises(InputError, match=r"BMAAS_REDFISH_TLS_MIN_VERSION: TLS version '1\.0'"):
        _driver(lab_ca, old_tls.port)


def test_the_default_and_a_per_node_minimum_against_the_emulator(server: RedfishServer) -> None:
    port = _port(server)
    driver = driver_for(server, port)  # TLS 1.2 or 1.3: the lab's server speaks both
    try:
        assert driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF
    finally:
        driver.close()
    strict = driver_for(server, port, redfish_tls_min_version="1.3")
    try:
        assert strict.get_power_state(deadline=per_call(strict)) is PowerState.OFF
    finally:
        strict.close()


def test_ciphers_the_bmc_does_not_share_are_a_configuration_fault(
    lab_ca: LabCertificate,
) -> None:
    context = server_context(lab_ca)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers("ECDHE+CHACHA20")
    server = HandshakeServer(context)
    try:
        driver = _driver(lab_ca, server.port, redfish_tls_ciphers="ECDHE+AESGCM")
        try:
            fault, calls = _fails(driver)
        finally:
            driver.close()
    finally:
        server.stop()
    assert (fault.field, calls, server.handshakes) == ("driver_info.redfish_tls_ciphers", 1, 1)


def test_a_node_cipher_list_the_bmc_shares_works(server: RedfishServer) -> None:
    port = _port(server)
    driver = driver_for(
        server, port, redfish_tls_min_version="1.2", redfish_tls_ciphers="ECDHE+AESGCM"
    )
    try:
        assert driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF
    finally:
        driver.close()


def test_a_certificate_that_does_not_verify_is_a_configuration_fault(
    server: RedfishServer,
) -> None:
    port = _port(server)
    with RedfishServer(tls=True) as other:  # another lab CA
        driver = driver_for(server, port, redfish_verify_ca=str(other.ca_path))
        try:
            fault, calls = _fails(driver)
        finally:
            driver.close()
    assert fault.field == "driver_info.redfish_verify_ca"
    assert "certificate does not verify" in str(fault)
    assert calls == 1
    assert policy_for(fault).counts_for_health is False


def test_plain_http_says_what_is_true_and_loopback_says_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from bmaas.tlspolicy import transport_warning

    with RedfishServer() as plain:
        port = _port(plain)
        caplog.set_level(logging.WARNING, logger="bmaas.drivers.redfish")
        driver = driver_for(plain, port, redfish_verify_ca=False)
        try:
            assert driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF
        finally:
            driver.close()
    assert caplog.records == []  # http:// on loopback: nothing crosses a network
    remote = transport_warning("http://10.0.0.5", False)
    assert remote is not None
    assert "plain HTTP: no TLS at all" in remote
    assert "impersonate" not in remote  # verification means nothing without TLS
    assert transport_warning("http://10.0.0.5", True) == remote
    https = transport_warning("https://10.0.0.5", False)
    assert https is not None
    assert "impersonate" in https
    assert transport_warning("https://10.0.0.5", True) is None
