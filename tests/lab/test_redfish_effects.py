"""Every fault effect, served for real by hwlab's Redfish BMC, as RedfishDriver sees it.

Each test checks three things: the documented fault class, that the call
returned within its deadline (generous bound), and the exact number of HTTP
requests the BMC read for the failed call: what the policy allows, nothing
hidden (sushy on its own would retry 5xx and connection errors).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
import sushy.connector

from bmaas.driver import BootDevice, PowerAction, PowerState
from bmaas.fakes.machine import FakeMachine
from bmaas.faults import (
    BMCAuthError,
    BMCBusy,
    BMCInternalError,
    BMCProtocolError,
    BMCTimeout,
    BMCUnreachable,
    BootFailure,
    InputError,
    PowerFailure,
    UnsupportedOperation,
)
from bmaas.hwlab.redfish import RedfishServer
from bmaas.hwlab.redfish.server import SWEEP_INTERVAL
from tests.budgets import HEALTHY_BMC_TIMEOUT, bound, no_budget, per_call
from tests.lab.redfish_support import (
    DEADLINE,
    HARDWARE,
    PASSWORD,
    SLACK,
    USERNAME,
    Lab,
    dribble,
    driver_for,
    lab_bmc,
)

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def server() -> Iterator[RedfishServer]:
    with RedfishServer() as s:
        yield s


@pytest.fixture
def lab(server: RedfishServer) -> Iterator[Lab]:
    with lab_bmc(server) as b:
        yield b


@pytest.fixture
def healthy_lab(server: RedfishServer) -> Iterator[Lab]:
    """For tests that count requests and need the answers, not the timing:
    the healthy bound (at load 25 a 1 s power read missed its deadline)."""
    with lab_bmc(server, bmc_timeout=HEALTHY_BMC_TIMEOUT) as b:
        yield b


@pytest.fixture
def basic_lab(server: RedfishServer) -> Iterator[Lab]:
    with lab_bmc(server, redfish_auth_type="basic") as b:
        yield b


# -- wire ------------------------------------------------------------------------


def test_hang_times_out_at_the_deadline(lab: Lab) -> None:
    lab.rule(effect="hang", operation="power.get")
    fault, took, sent = lab.fails(bound(lab.driver.get_power_state))
    assert isinstance(fault, BMCTimeout)
    assert DEADLINE * 0.9 <= took < DEADLINE + SLACK
    assert sent == 1


def test_trickle_dribbles_the_answer_bytes_at_a_time(lab: Lab) -> None:
    """The server's pacing, seen from the side a late reader cannot break:
    how many bytes had arrived by each moment. A reader scheduled late
    finds several 64-byte pieces in one read (issue 50: two at load 20),
    so how the bytes split into reads is the machine's, not the server's;
    but by any moment ``t`` no more than ``64 * (1 + t / every)`` bytes can
    have been sent, whenever the reader looks, and the whole answer takes
    at least ``(pieces - 1) * every``."""
    size, every = 64, 0.05
    lab.rule(effect="trickle", bytes=size, every=every, operation="probe")
    chunks = dribble(lab.port)
    answer = b"".join(c for _, c in chunks)
    assert answer.startswith(b"HTTP/1.1 200 ")
    pieces = -(-len(answer) // size)
    assert pieces > 10  # enough pieces for the pacing to show
    got = 0
    for at, chunk in chunks:  # ``at``: taken after the read, never before the bytes came
        got += len(chunk)
        sent_by_then = size * (1 + int(at / (every * 0.9)))  # 10%: a timer's early wake
        assert got <= sent_by_then, f"{got} bytes by {at:.3f} s: faster than {size} per {every} s"
    assert chunks[-1][0] >= (pieces - 1) * every * 0.9


def test_delay_past_the_deadline_times_out(lab: Lab) -> None:
    lab.rule(effect="delay", seconds=5, operation="power.get")
    fault, took, sent = lab.fails(bound(lab.driver.get_power_state))
    assert isinstance(fault, BMCTimeout)
    assert took < DEADLINE + SLACK
    assert sent == 1


def test_short_delay_is_only_slow(lab: Lab) -> None:
    lab.rule(effect="delay", seconds=0.2, operation="power.get")
    start = time.monotonic()
    state, sent = lab.succeeds(bound(lab.driver.get_power_state))
    assert state is PowerState.OFF
    assert time.monotonic() - start >= 0.2
    assert sent == 1


def test_drop_is_a_timeout_with_unknown_outcome(lab: Lab) -> None:
    lab.rule(effect="drop", operation="power.set")
    fault, took, sent = lab.fails(
        lambda: lab.driver.set_power_state(PowerAction.ON, deadline=per_call(lab.driver))
    )
    assert isinstance(fault, BMCTimeout)
    assert "without a response" in fault.message
    assert took < DEADLINE + SLACK
    assert sent == 2  # the GET of the state, then the POST that was dropped: never resent


# -- BMC ---------------------------------------------------------------------------


def test_busy_carries_retry_after(lab: Lab) -> None:
    lab.rule(effect="busy", retry_after=7, operation="power.get")
    fault, took, sent = lab.fails(bound(lab.driver.get_power_state))
    assert isinstance(fault, BMCBusy)
    assert fault.retry_after == 7.0
    assert fault.status == "503"
    assert took < DEADLINE + SLACK
    assert sent == 1


def test_internal_error_carries_the_message_id_and_is_not_retried(lab: Lab) -> None:
    lab.rule(effect="internal_error", message_id="Oem.1.0.FanFailure", operation="power.get")
    fault, took, sent = lab.fails(bound(lab.driver.get_power_state))
    assert isinstance(fault, BMCInternalError)
    assert fault.message_id == "Oem.1.0.FanFailure"
    assert took < DEADLINE + SLACK
    assert sent == 1  # sushy alone retries a 500 on GET


def test_internal_error_on_a_reset_is_sent_once(lab: Lab) -> None:
    lab.rule(effect="internal_error", operation="power.set")
    fault, _, sent = lab.fails(
        lambda: lab.driver.set_power_state(PowerAction.REBOOT, deadline=per_call(lab.driver))
    )
    assert isinstance(fault, BMCInternalError)
    assert sent == 2  # GET + one POST
    assert lab.machine.boots == 0


def test_auth_fail_with_a_session_relogs_in_once(lab: Lab) -> None:
    lab.rule(effect="auth_fail", operation="power.get")
    fault, took, sent = lab.fails(bound(lab.driver.get_power_state))
    assert isinstance(fault, BMCAuthError)
    assert took < DEADLINE + SLACK
    assert sent == 3  # GET 401, one fresh login, the GET again (401)


def test_auth_fail_with_basic_auth_is_final(basic_lab: Lab) -> None:
    basic_lab.rule(effect="auth_fail", operation="power.get")
    fault, _, sent = basic_lab.fails(bound(basic_lab.driver.get_power_state))
    assert isinstance(fault, BMCAuthError)
    assert sent == 1


def test_expired_session_is_renewed_transparently(healthy_lab: Lab) -> None:
    lab = healthy_lab
    lab.rule(effect="auth_fail", scope="session", operation="power.get", nth=1)
    state, sent = lab.succeeds(bound(lab.driver.get_power_state))
    assert state is PowerState.OFF
    assert sent == 3  # GET 401 (session gone), login, GET


def test_session_expiry_after_n_requests(healthy_lab: Lab) -> None:
    lab = healthy_lab
    lab.rule(effect="auth_fail", scope="session", operation="*", nth=[4])
    counts = [lab.succeeds(bound(lab.driver.get_power_state))[1] for _ in range(5)]
    assert counts == [1, 1, 1, 3, 1]


def test_wrong_password_is_an_auth_error(server: RedfishServer, lab: Lab) -> None:
    driver = driver_for(server, lab.port, redfish_password="not-it")
    try:
        before = lab.requests
        with pytest.raises(BMCAuthError):
            driver.get_power_state(deadline=per_call(driver))
        # service root, session login refused, sushy falls back to Basic: the GET
        assert lab.requests - before == 3
        with pytest.raises(BMCAuthError):
            driver.get_power_state(deadline=per_call(driver))
        assert lab.requests - before == 4  # no second login attempt: one GET
    finally:
        driver.close()


def test_unsupported_read_is_501(lab: Lab) -> None:
    lab.rule(effect="unsupported", operation="power.get")
    fault, _, sent = lab.fails(bound(lab.driver.get_power_state))
    assert isinstance(fault, UnsupportedOperation)
    assert fault.status == "501"
    assert sent == 1


def test_unsupported_action_is_405(lab: Lab) -> None:
    lab.rule(effect="unsupported", operation="vmedia.insert")
    fault, _, sent = lab.fails(
        lambda: lab.driver.insert_virtual_media("http://img/a.iso", deadline=per_call(lab.driver))
    )
    assert isinstance(fault, UnsupportedOperation)
    assert fault.status == "405"
    assert sent == 6  # finding the CD slot (5 GETs, once per driver) + the POST


def test_reset_type_the_system_does_not_offer(server: RedfishServer) -> None:
    machine = FakeMachine("no-soft", HARDWARE, power=PowerState.ON)
    port = server.add(machine, username=USERNAME, password=PASSWORD, reset_types=["On", "ForceOff"])
    driver = driver_for(server, port)
    try:
        driver.probe(deadline=per_call(driver))
        before = server.request_count(port)
        with pytest.raises(
            UnsupportedOperation,
            match="GracefulShutdown or PushPowerButton; the system allows ForceOff, On",
        ):
            driver.set_power_state(PowerAction.SOFT_OFF, deadline=per_call(driver))
        assert server.request_count(port) - before == 1  # read, refused locally, nothing sent
        assert machine.power_state() is PowerState.ON
    finally:
        driver.close()


def test_malformed_json_is_a_protocol_error(lab: Lab) -> None:
    lab.rule(effect="malformed_reply", operation="power.get")
    fault, _, sent = lab.fails(bound(lab.driver.get_power_state))
    assert isinstance(fault, BMCProtocolError)
    assert "JSON" in fault.message
    assert sent == 1


def test_reply_that_is_not_http_is_a_protocol_error(lab: Lab) -> None:
    lab.rule(effect="malformed_reply", operation="power.set")
    fault, _, sent = lab.fails(
        lambda: lab.driver.set_power_state(PowerAction.ON, deadline=per_call(lab.driver))
    )
    assert isinstance(fault, BMCProtocolError)
    assert sent == 2


def test_bmc_reboot_refuses_connections_for_the_window(lab: Lab) -> None:
    lab.rule(effect="bmc_reboot", duration=0.6, operation="power.get", times=1)
    fault, took, sent = lab.fails(bound(lab.driver.get_power_state))
    # The request that rebooted the BMC is lost with it: outcome unknown.
    assert isinstance(fault, BMCTimeout)
    assert sent == 1
    fault, took, sent = lab.fails(bound(lab.driver.get_power_state))
    assert isinstance(fault, BMCUnreachable)
    assert "refused" in fault.message
    assert took < DEADLINE  # refused at once, not waited out
    assert sent == 0  # refused: nothing reached the BMC
    for _ in range(60):  # bounded: the window is 0.6 s
        if not lab.machine.bmc_down():
            break
        time.sleep(0.05)
    time.sleep(SWEEP_INTERVAL * 3)  # the server listens again on its next sweep
    state, sent = lab.succeeds(bound(lab.driver.get_power_state))
    assert state is PowerState.OFF
    assert sent == 3  # the BMC forgot the session: 401, login, GET


def test_a_rebooting_bmc_keeps_its_port_so_nobody_else_answers_on_it(lab: Lab) -> None:
    """Through the window the port stays the BMC's, bound but not listening:
    a connection is refused, and another program binding a port cannot get
    this one (a freed port once served another emulator's 404 to a test)."""
    lab.machine.reboot_bmc(2.0)
    for _ in range(100):  # bounded: the sweep takes it down within a few intervals
        refused = False
        with socket.socket() as probe:
            probe.settimeout(1.0)
            try:
                probe.connect(("127.0.0.1", lab.port))
            except ConnectionRefusedError:
                refused = True
        if refused:
            break
        time.sleep(SWEEP_INTERVAL / 2)
    assert refused
    with socket.socket() as other, pytest.raises(OSError, match="in use"):
        other.bind(("127.0.0.1", lab.port))  # as a free-port finder would
    assert lab.machine.bmc_down()  # all of the above inside the window


def test_bmc_rebooted_by_another_protocol_refuses_too(lab: Lab) -> None:
    lab.machine.reboot_bmc(0.5)  # as the IPMI emulator does for the same machine
    time.sleep(SWEEP_INTERVAL * 3)
    fault, _, sent = lab.fails(bound(lab.driver.get_power_state))
    assert isinstance(fault, BMCUnreachable)
    assert sent == 0


# -- hardware (carried out by FakeMachine) -----------------------------------------


def test_power_stuck_is_a_power_failure(lab: Lab) -> None:
    lab.rule(effect="power_stuck", operation="power.set")
    with pytest.raises(PowerFailure):
        lab.driver.set_power_state(
            PowerAction.ON, wait=True, timeout=0.5, deadline=no_budget(lab.driver)
        )
    assert lab.machine.power_state() is PowerState.OFF


def test_boot_not_persisted_is_a_boot_failure(lab: Lab) -> None:
    lab.rule(effect="boot_not_persisted", operation="boot.set")
    fault, _, sent = lab.fails(
        lambda: lab.driver.set_boot_device(
            BootDevice.PXE, persistent=True, deadline=per_call(lab.driver)
        )
    )
    assert isinstance(fault, BootFailure)
    assert sent == 3  # GET for the ETag, PATCH, read-back GET


def test_power_lost_reads_off(lab: Lab) -> None:
    lab.machine.force_power(PowerState.ON)
    lab.rule(effect="power_lost", operation="power.get", times=1)
    assert lab.driver.get_power_state(deadline=per_call(lab.driver)) is PowerState.OFF
    assert lab.machine.power_fault


# -- configuration faults ------------------------------------------------------------


def test_unknown_system_is_an_input_error_naming_it(server: RedfishServer, lab: Lab) -> None:
    driver = driver_for(server, lab.port, redfish_system_id="/redfish/v1/Systems/nope")
    sessions = len(server.bmc(lab.port).sessions())
    try:
        for _ in range(2):
            with pytest.raises(InputError) as info:
                driver.get_power_state(deadline=per_call(driver))
            assert info.value.field == "driver_info.redfish_system_id"
            assert "/redfish/v1/Systems/nope" in str(info.value)
        # the service's one session (shared with the lab's node, same service
        # and credentials) serves it: a misconfigured node eats no session
        assert len(server.bmc(lab.port).sessions()) == max(sessions, 1)
    finally:
        driver.close()


def test_bare_sushy_retries_what_the_driver_does_not(lab: Lab) -> None:
    """Why the connector is configured as it is: measured, not assumed."""
    lab.rule(effect="internal_error", operation="power.get")
    conn = sushy.connector.Connector(
        lab.server.url(lab.port), server_side_retries=1, server_side_retries_delay=0
    )
    conn.set_http_basic_auth(USERNAME, PASSWORD)
    before = lab.requests
    with pytest.raises(sushy.exceptions.ServerSideError):
        conn.get(f"/redfish/v1/Systems/{lab.machine.name}")
    conn.close()
    assert lab.requests - before == 2  # server_side_retries=1 still retries a 500 on GET
