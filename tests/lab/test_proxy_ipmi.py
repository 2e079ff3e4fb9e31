"""The IPMI proxy in front of a stock vbmcd (libvirt test:///default), with
ipmitool and pyghmi as clients. libvirt's test driver forgets state between
vbmc's connections, so these tests assert protocol behaviour and faults: the
domain always reads "on", and a boot device set never reads back."""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyghmi import exceptions as pyghmi_exceptions
from pyghmi.ipmi import command
from pyghmi.ipmi.private import session as pyghmi_session

from bmaas.hwlab.proxy import ProxyHost, ProxySpec, rmcp
from bmaas.hwlab.proxy.stock import StockVbmc
from bmaas.secrets import Secret
from tests.lab.proxy_support import VBMC_PASSWORD, VBMC_USER, ipmitool, port_is_free

pytestmark = pytest.mark.lab

Start = Callable[..., ProxyHost]


def _spec(vbmc: StockVbmc, *, credentials: bool = True, password: str = VBMC_PASSWORD) -> ProxySpec:
    return ProxySpec(
        "vm1",
        "ipmi",
        "127.0.0.1",
        vbmc.ports["test"],
        username=VBMC_USER if credentials else None,
        password=Secret(password if credentials else ""),
    )


def _port(host: ProxyHost) -> int:
    return host.endpoints["vm1"]["ipmi"]


def _pyghmi(port: int) -> command.Command:
    return command.Command("127.0.0.1", VBMC_USER.encode(), VBMC_PASSWORD.encode(), port=port)


def _events(host: ProxyHost) -> list[dict[str, Any]]:
    assert host.events is not None
    with open(host.events.path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture
def pyghmi_suite3(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """pyghmi proposes cipher suite 17 first, and virtualbmc (pyghmi's own
    server) answers that proposal with suite 3 keys, which breaks pyghmi's
    client (struct.error in RAKP2). Make it ask for suite 3, as a driver
    given ``ipmi_cipher_suite: 3`` must."""
    original = pyghmi_session.Session._initsession

    def initsession(self: Any) -> None:
        original(self)
        self.attemptedhash = 1

    monkeypatch.setattr(pyghmi_session.Session, "_initsession", initsession)
    return


# -- no rules: the proxy is invisible ---------------------------------------------


@pytest.mark.parametrize(
    "args", [("power", "status"), ("chassis", "bootdev", "pxe"), ("mc", "info")]
)
def test_ipmitool_through_the_proxy_matches_the_bmc(
    stock_vbmc: StockVbmc, proxy_host: Start, args: tuple[str, ...]
) -> None:
    host = proxy_host(_spec(stock_vbmc))
    direct = ipmitool(stock_vbmc.ports["test"], *args)
    proxied = ipmitool(_port(host), *args)
    assert direct.returncode == 0, direct.stderr
    assert (proxied.returncode, proxied.stdout) == (direct.returncode, direct.stdout)
    assert host.proxies["vm1"].counters["sessions_readable"] == 1


def test_pyghmi_through_the_proxy_without_rules(
    stock_vbmc: StockVbmc, proxy_host: Start, pyghmi_suite3: None
) -> None:
    host = proxy_host(_spec(stock_vbmc))
    ipmi = command.Command(
        "127.0.0.1", VBMC_USER.encode(), VBMC_PASSWORD.encode(), port=_port(host)
    )
    assert ipmi.get_power() == {"powerstate": "on"}
    assert ipmi.get_bootdev()["bootdev"] == "hd"
    assert ipmi.raw_command(netfn=0x06, command=0x01)["code"] == 0  # Get Device ID
    assert _events(host) == []


# -- each effect, as ipmitool sees it ---------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "args", "message"),
    [
        ({"effect": "busy", "operation": "power.get"}, ("power", "status"), "Node busy"),
        ({"effect": "internal_error", "operation": "probe"}, ("mc", "info"), "Unspecified error"),
        ({"effect": "unsupported", "operation": "power.get"}, ("power", "status"), "Invalid"),
        (
            {"effect": "auth_fail", "operation": "power.get"},
            ("power", "status"),
            "Insufficient privilege",
        ),
        ({"effect": "busy", "operation": "login"}, ("power", "status"), "insufficient resources"),
        ({"effect": "auth_fail", "operation": "login"}, ("power", "status"), "RMCP+ session"),
        ({"effect": "internal_error", "operation": "login"}, ("power", "status"), "RMCP+"),
        ({"effect": "unsupported", "operation": "login"}, ("power", "status"), "RMCP+ session"),
        ({"effect": "malformed_reply", "operation": "login"}, ("power", "status"), "RMCP+"),
        ({"effect": "hang", "operation": "power.get"}, ("power", "status"), "Unable to get"),
        ({"effect": "drop", "operation": "power.get"}, ("power", "status"), "Unable to get"),
        ({"effect": "hang", "operation": "login"}, ("power", "status"), "RMCP+ session"),
        (
            {"effect": "delay", "seconds": 3, "operation": "power.get"},
            ("power", "status"),
            "Unable to get",
        ),
    ],
    ids=lambda v: f"{v['effect']}/{v.get('operation', '*')}" if isinstance(v, dict) else "",
)
def test_each_effect_fails_ipmitool_as_a_bmc_would(
    stock_vbmc: StockVbmc,
    proxy_host: Start,
    rule: dict[str, Any],
    args: tuple[str, ...],
    message: str,
) -> None:
    host = proxy_host(_spec(stock_vbmc), [rule])
    result = ipmitool(_port(host), *args)
    assert result.returncode != 0
    assert message in result.stderr
    events = _events(host)
    assert events
    assert {e["effect"] for e in events} == {rule["effect"]}
    assert all(e["node"] == "vm1" and e["protocol"] == "ipmi" for e in events)


def test_malformed_reply_strips_the_answer(stock_vbmc: StockVbmc, proxy_host: Start) -> None:
    host = proxy_host(_spec(stock_vbmc), [{"effect": "malformed_reply", "operation": "power.get"}])
    # ipmitool does not check the length of a chassis status: the missing
    # data reads as "off" although the domain is running.
    assert ipmitool(stock_vbmc.ports["test"], "power", "status").stdout.strip().endswith("on")
    assert ipmitool(_port(host), "power", "status").stdout.strip().endswith("off")


def test_short_delay_succeeds_late(stock_vbmc: StockVbmc, proxy_host: Start) -> None:
    host = proxy_host(
        _spec(stock_vbmc), [{"effect": "delay", "seconds": 0.4, "operation": "login"}]
    )
    start = time.monotonic()
    result = ipmitool(_port(host), "power", "status")
    assert result.returncode == 0
    assert time.monotonic() - start >= 0.4


def test_duplicate_reaches_the_bmc_twice(stock_vbmc: StockVbmc, proxy_host: Start) -> None:
    host = proxy_host(_spec(stock_vbmc))
    counters = host.proxies["vm1"].counters
    ipmitool(_port(host), "power", "on")
    one_run = counters["relayed_up"]  # packets of a whole ipmitool run
    host.add_faults("vm1", [{"effect": "duplicate", "operation": "power.set", "copies": 2}])
    assert ipmitool(_port(host), "power", "on").returncode == 0
    assert counters["relayed_up"] - one_run == one_run + 2  # Chassis Control sent 3 times


def test_a_request_is_decided_once_whatever_its_retransmissions(
    stock_vbmc: StockVbmc, proxy_host: Start
) -> None:
    # ipmitool rebuilds each retransmission with a new session sequence
    # number; the proxy still sees one request, so a one-shot hang loses
    # the request for good instead of only its first copy.
    host = proxy_host(_spec(stock_vbmc), [{"effect": "hang", "operation": "power.get", "times": 1}])
    result = ipmitool(_port(host), "power", "status", retries=2)
    assert result.returncode != 0
    proxy = host.proxies["vm1"]
    assert proxy.counters["retransmits"] >= 1
    assert proxy.plan.counts() == {"hang on power.get x1": 1}
    assert ipmitool(_port(host), "power", "status").returncode == 0


def test_bmc_reboot_silences_the_bmc_then_drops_old_sessions(
    stock_vbmc: StockVbmc, proxy_host: Start, pyghmi_suite3: None
) -> None:
    host = proxy_host(_spec(stock_vbmc))
    port, proxy = _port(host), host.proxies["vm1"]
    ipmi = _pyghmi(port)
    assert ipmi.get_power() == {"powerstate": "on"}
    rule = {"effect": "bmc_reboot", "operation": "login", "times": 1, "duration": 2.0}
    host.add_faults("vm1", [rule])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:  # a login starts: reboot
        sock.sendto(rmcp.channel_auth_request(), ("127.0.0.1", port))
        deadline = time.monotonic() + 2
        while not host.node_status("vm1")["bmc_down"] and time.monotonic() < deadline:
            time.sleep(0.01)
    assert host.node_status("vm1")["bmc_down"]
    result = ipmitool(port, "power", "status")  # nothing answers during the window
    assert "RMCP+ session" in result.stderr
    deadline = time.monotonic() + 5
    while host.node_status("vm1")["bmc_down"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ipmitool(port, "power", "status").returncode == 0  # a new session works
    # The session opened before the reboot is gone: its packets are dropped.
    before = proxy.counters["dropped"]
    ipmi.ipmi_session.send_payload(
        payload=bytearray(b"\x20\x00\xe0\x81\x00\x01\x7e"), payload_type=0, retry=False
    )
    deadline = time.monotonic() + 2
    while proxy.counters["dropped"] == before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proxy.counters["dropped"] == before + 1


def test_pyghmi_accepts_forged_answers_and_later_renumbered_ones(
    stock_vbmc: StockVbmc, proxy_host: Start, pyghmi_suite3: None
) -> None:
    rule = {"effect": "busy", "operation": "power.get", "times": 2}
    host = proxy_host(_spec(stock_vbmc), [rule])
    ipmi = command.Command(
        "127.0.0.1", VBMC_USER.encode(), VBMC_PASSWORD.encode(), port=_port(host)
    )
    for _ in range(2):
        assert ipmi.raw_command(netfn=0, command=1)["code"] == 0xC0
    # The BMC's own answers now carry sequence numbers shifted past the
    # forged ones, re-signed: pyghmi (which drops lower numbers) takes them.
    assert ipmi.get_power() == {"powerstate": "on"}
    host.add_faults("vm1", [{"effect": "internal_error", "operation": "boot.get", "times": 1}])
    with pytest.raises(pyghmi_exceptions.IpmiException):
        ipmi.get_bootdev()
    assert ipmi.get_bootdev()["bootdev"] == "hd"


# -- credentials ---------------------------------------------------------------------


def test_without_credentials_only_wire_and_login_faults(
    stock_vbmc: StockVbmc, proxy_host: Start
) -> None:
    host = proxy_host(_spec(stock_vbmc, credentials=False))
    port = _port(host)
    assert ipmitool(port, "power", "status").returncode == 0
    assert host.proxies["vm1"].counters["sessions_opaque"] == 1
    host.add_faults("vm1", [{"effect": "busy", "operation": "login", "times": 1}])
    assert "insufficient resources" in ipmitool(port, "power", "status").stderr
    host.add_faults("vm1", [{"effect": "hang", "operation": "opaque", "times": 1}])
    assert ipmitool(port, "power", "status").returncode != 0
    assert [e["effect"] for e in _events(host)] == ["busy", "hang"]


def test_wrong_proxy_password_leaves_sessions_opaque_and_says_so(
    stock_vbmc: StockVbmc, proxy_host: Start, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "not-the-bmc-password"
    host = proxy_host(
        _spec(stock_vbmc, password=wrong), [{"effect": "busy", "operation": "power.get"}]
    )
    with caplog.at_level(logging.INFO):
        result = ipmitool(_port(host), "power", "status")
    assert result.returncode == 0  # the effect could not be carried out: nothing injected
    assert _events(host) == []
    assert host.proxies["vm1"].counters["sessions_opaque"] == 1
    assert host.status()["nodes"]["vm1"]["proxy"]["readable_sessions"] == 0
    assert "does not match" in caplog.text
    assert wrong not in caplog.text
    assert wrong not in json.dumps(host.status())


# -- lifecycle -----------------------------------------------------------------------


@pytest.mark.vbmc  # starts its own stock vbmcd (not through the stock_vbmc fixture)
def test_stop_leaves_no_port_thread_or_process(tmp_path: Path) -> None:
    vbmc = StockVbmc(tmp_path / "vbmc", ["test"])
    vbmc.start()
    host = ProxyHost([_spec(vbmc)], events_path=tmp_path / "events.jsonl")
    host.start()
    bmc_port, proxy_port, pid = vbmc.ports["test"], _port(host), vbmc.pid
    assert ipmitool(proxy_port, "power", "status").returncode == 0
    host.stop()
    vbmc.stop()
    host.stop()  # twice is fine
    assert port_is_free(proxy_port)
    assert port_is_free(bmc_port)
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert port_is_free(proxy_port, socket.SOCK_DGRAM)
