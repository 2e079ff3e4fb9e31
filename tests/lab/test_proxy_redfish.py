"""The Redfish proxy in front of a stock sushy-emulator (fake driver), with
curl and sushy as clients, TLS terminated by the proxy. The fake driver lands
power changes 1-11 s later at random: these tests assert answers, not state."""

from __future__ import annotations

import dataclasses
import errno
import json
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import sushy

from bmaas.faults import InputError
from bmaas.hwlab.control import ControlServer, LabClient
from bmaas.hwlab.proxy import ProxyHost, ProxySpec
from bmaas.hwlab.proxy.stock import StockSushy
from tests.lab.redfish_support import dribble

pytestmark = pytest.mark.lab

Start = Callable[..., ProxyHost]
RESET_ON = ("-X", "POST", "-H", "Content-Type: application/json", "-d", '{"ResetType": "On"}')


def _spec(upstream: StockSushy, **kw: Any) -> ProxySpec:
    return ProxySpec(
        "rf1",
        "redfish",
        upstream.host,
        upstream.port,
        upstream_tls=upstream.tls,
        tls=kw.pop("tls", True),
        **kw,
    )


def _base(host: ProxyHost) -> str:
    return host.proxies["rf1"].url  # type: ignore[attr-defined, no-any-return]


def _cert(host: ProxyHost) -> str:
    return str(host.proxies["rf1"].cert_path)  # type: ignore[attr-defined]


def curl(
    host: ProxyHost, path: str, *args: str, max_time: float = 5
) -> tuple[int, int, dict[str, str], bytes]:
    """(curl exit code, HTTP status, headers, body) for one request."""
    result = subprocess.run(
        [
            "curl",
            *("-sS", "-i", "--max-time", str(max_time), "--cacert", _cert(host)),
            *args,
            _base(host) + path,
        ],
        capture_output=True,
        timeout=30,
        check=False,
    )
    if result.returncode:
        return result.returncode, 0, {}, b""
    head, _, body = result.stdout.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return 0, int(lines[0].split()[1]), headers, body


@pytest.fixture
def system(stock_sushy: StockSushy) -> str:
    return "/redfish/v1/Systems/" + stock_sushy.system_id("node1")


# -- no rules ------------------------------------------------------------------------


def test_curl_through_the_proxy_matches_the_service(
    stock_sushy: StockSushy, proxy_host: Start, system: str
) -> None:
    host = proxy_host(_spec(stock_sushy))
    for path in ("/redfish/v1/", system):
        with urllib.request.urlopen(stock_sushy.url + path) as direct:  # noqa: S310
            expected = json.loads(direct.read())
        code, status, headers, body = curl(host, path)
        assert (code, status) == (0, 200)
        assert headers["content-type"] == "application/json"
        assert json.loads(body) == expected


def test_sushy_through_the_proxy(stock_sushy: StockSushy, proxy_host: Start, system: str) -> None:
    host = proxy_host(_spec(stock_sushy))
    root = sushy.Sushy(_base(host) + "/redfish/v1", username="u", password="p", verify=_cert(host))
    node = root.get_system(system)
    assert node.power_state in (sushy.PowerState.ON, sushy.PowerState.OFF)
    node.set_system_boot_options(sushy.BootSource.PXE, enabled=sushy.BootSourceOverrideEnabled.ONCE)
    node.reset_system(sushy.ResetType.ON)
    assert host.proxies["rf1"].counters["relayed"] >= 4
    assert host.events is not None
    assert host.events.count == 0


def test_clients_verify_the_proxy_certificate(stock_sushy: StockSushy, proxy_host: Start) -> None:
    host = proxy_host(_spec(stock_sushy))
    result = subprocess.run(
        ["curl", "-sS", "--max-time", "5", _base(host) + "/redfish/v1/"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 60  # peer certificate cannot be authenticated


# -- effects ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "status", "check"),
    [
        ({"effect": "busy", "retry_after": 2}, 503, lambda h, b: h["retry-after"] == "2"),
        (
            {"effect": "internal_error", "message_id": "Acme.1.0.Kaput"},
            500,
            lambda h, b: (
                json.loads(b)["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "Acme.1.0.Kaput"
            ),
        ),
        ({"effect": "auth_fail"}, 401, lambda h, b: h["www-authenticate"].startswith("Basic")),
        ({"effect": "unsupported"}, 501, lambda h, b: "ActionNotSupported" in b.decode()),
    ],
    ids=lambda v: v["effect"] if isinstance(v, dict) else str(v) if isinstance(v, int) else "",
)
def test_bmc_effects_answer_for_the_bmc_without_touching_it(
    stock_sushy: StockSushy,
    proxy_host: Start,
    system: str,
    rule: dict[str, Any],
    status: int,
    check: Callable[[dict[str, str], bytes], bool],
) -> None:
    host = proxy_host(_spec(stock_sushy), [{**rule, "operation": "power.get"}])
    code, got, headers, body = curl(host, system)
    assert (code, got) == (0, status)
    assert check(headers, body)
    assert host.proxies["rf1"].counters["relayed"] == 0


def test_unsupported_action_is_405(stock_sushy: StockSushy, proxy_host: Start, system: str) -> None:
    host = proxy_host(_spec(stock_sushy), [{"effect": "unsupported", "operation": "power.set"}])
    payload = '{"ResetType": "On"}'
    reset = system + "/Actions/ComputerSystem.Reset"
    code, status, _, _ = curl(
        host, reset, "-X", "POST", "-H", "Content-Type: application/json", "-d", payload
    )
    assert (code, status) == (0, 405)


def test_malformed_reply_is_invalid_json(
    stock_sushy: StockSushy, proxy_host: Start, system: str
) -> None:
    host = proxy_host(_spec(stock_sushy))
    root = sushy.Sushy(_base(host) + "/redfish/v1", username="u", password="p", verify=_cert(host))
    host.add_faults("rf1", [{"effect": "malformed_reply", "operation": "power.get"}])
    code, status, _, body = curl(host, system)
    assert (code, status) == (0, 200)
    with pytest.raises(json.JSONDecodeError):
        json.loads(body)
    with pytest.raises(ValueError, match=r"(?i)expecting|json|unterminated"):
        root.get_system(system)  # sushy lets the decode error through


@pytest.mark.parametrize(("effect", "exit_code"), [("drop", 56), ("hang", 28)])
def test_drop_resets_and_hang_never_answers(
    stock_sushy: StockSushy, proxy_host: Start, system: str, effect: str, exit_code: int
) -> None:
    host = proxy_host(_spec(stock_sushy), [{"effect": effect, "operation": "power.get"}])
    code, _, _, _ = curl(host, system, max_time=1)
    assert code == exit_code  # 56: connection reset; 28: timed out
    assert host.proxies["rf1"].counters["relayed"] == 0


def test_delay_answers_late(stock_sushy: StockSushy, proxy_host: Start, system: str) -> None:
    host = proxy_host(
        _spec(stock_sushy), [{"effect": "delay", "seconds": 0.5, "operation": "probe"}]
    )
    start = time.monotonic()
    assert curl(host, "/redfish/v1/")[1] == 200
    assert time.monotonic() - start >= 0.5
    assert curl(host, system, max_time=0.3)[0] == 0  # other operations are not delayed


def test_trickle_dribbles_the_relayed_answer(stock_sushy: StockSushy, proxy_host: Start) -> None:
    rule = {"effect": "trickle", "bytes": 32, "every": 0.02, "operation": "probe"}
    host = proxy_host(_spec(stock_sushy, tls=False), [rule])
    port = host.proxies["rf1"].port  # type: ignore[attr-defined]
    chunks = dribble(port)
    answer = b"".join(c for _, c in chunks)
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert b'"RedfishVersion"' in answer  # relayed whole, only slowly
    # Never ahead of the trickle's schedule: 32 bytes, then 32 more every
    # 0.02 s at the earliest. A busy client may read several of them at once
    # (the kernel coalesces what waited), so chunk sizes say nothing; how much
    # had arrived by when does.
    received = 0
    for at, chunk in chunks:
        received += len(chunk)
        assert received <= 32 * (int(at / 0.02) + 1), (at, received)
    assert len(chunks) > 1
    assert chunks[-1][0] >= (len(answer) // 32 - 1) * 0.02 * 0.9


def test_duplicate_sends_the_action_twice(
    stock_sushy: StockSushy, proxy_host: Start, system: str
) -> None:
    host = proxy_host(_spec(stock_sushy), [{"effect": "duplicate", "operation": "power.set"}])
    reset = system + "/Actions/ComputerSystem.Reset"
    code, status, _, _ = curl(host, reset, *RESET_ON)
    assert (code, status) == (0, 204)
    assert host.proxies["rf1"].counters["relayed"] == 2


def test_bmc_reboot_refuses_connections_for_the_window(
    stock_sushy: StockSushy, proxy_host: Start
) -> None:
    host = proxy_host(
        _spec(stock_sushy),
        [{"effect": "bmc_reboot", "operation": "probe", "duration": 1, "times": 1}],
    )
    assert curl(host, "/redfish/v1/")[0] == 56  # the request in flight is cut
    assert curl(host, "/redfish/v1/")[0] == 7  # connection refused
    assert host.node_status("rf1")["bmc_down"]
    # and the port stays the BMC's through the window: with two suites on the
    # machine, another process took it once and the BMC never listened again
    with socket.socket() as other, pytest.raises(OSError, match="in use") as taken:
        other.bind(("127.0.0.1", host.proxies["rf1"].port))
    assert taken.value.errno == errno.EADDRINUSE
    time.sleep(1.2)
    assert curl(host, "/redfish/v1/")[1] == 200
    assert not host.node_status("rf1")["bmc_down"]


# -- sessions and the upstream's certificate -------------------------------------------


class _SessionService(BaseHTTPRequestHandler):
    """A tiny upstream that issues X-Auth-Tokens, like a BMC's SessionService."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(201)
        self.send_header("X-Auth-Token", "tok-1")
        host, port = self.server.server_address[:2]
        self.send_header("Location", f"http://{host}:{port}/redfish/v1/SessionService/Sessions/1")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def session_service() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SessionService)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_sessions_opened_before_a_reboot_are_rejected_after_it(
    session_service: ThreadingHTTPServer, proxy_host: Start
) -> None:
    port = session_service.server_address[1]
    host = proxy_host(ProxySpec("rf1", "redfish", "127.0.0.1", int(port), tls=True))
    login = ("-X", "POST", "-d", '{"UserName": "u", "Password": "p"}')
    _, status, headers, _ = curl(host, "/redfish/v1/SessionService/Sessions", *login)
    assert (status, headers["x-auth-token"]) == (201, "tok-1")
    # The absolute Location the BMC gave points back at the proxy.
    assert headers["location"] == _base(host) + "/redfish/v1/SessionService/Sessions/1"
    assert curl(host, "/redfish/v1/", "-H", "X-Auth-Token: tok-1")[1] == 200
    host.add_faults(
        "rf1", [{"effect": "bmc_reboot", "operation": "probe", "duration": 0.3, "times": 1}]
    )
    curl(host, "/redfish/v1/")
    time.sleep(0.5)
    assert curl(host, "/redfish/v1/")[1] == 200
    _, status, _, body = curl(host, "/redfish/v1/", "-H", "X-Auth-Token: tok-1")
    assert status == 401
    assert b"NoValidSession" in body


def test_https_upstream_is_verified_as_configured(tmp_path: Path, proxy_host: Start) -> None:
    upstream = StockSushy(tmp_path / "tls-sushy", ["node1"], tls_enabled=True)
    upstream.start()
    try:
        pinned = proxy_host(_spec(upstream, verify_ca=str(upstream.cert_path)))
        assert curl(pinned, "/redfish/v1/")[1] == 200
        strict = proxy_host(dataclasses.replace(_spec(upstream), verify_ca=True))
        _, status, _, body = curl(strict, "/redfish/v1/")
        assert status == 502
        assert b"CERTIFICATE_VERIFY_FAILED" in body
    finally:
        upstream.stop()


# -- runtime control ---------------------------------------------------------------------


def test_control_api_drives_a_running_proxy(
    stock_sushy: StockSushy, proxy_host: Start, system: str
) -> None:
    host = proxy_host(_spec(stock_sushy))
    control = ControlServer(host, token="proxy-test-token")
    control.start()
    try:
        client = LabClient(control.url, token="proxy-test-token")
        assert client.add_faults("rf1", [{"effect": "busy", "operation": "power.get"}]) == 1
        assert curl(host, system)[1] == 503
        status = client.status()
        assert status["nodes"]["rf1"]["rules"] == ["busy on power.get"]
        assert status["events"] == 1
        with pytest.raises(InputError, match="hardware"):
            client.add_faults("rf1", [{"effect": "power_lost"}])
        with pytest.raises(InputError, match="cannot switch its power"):
            client.power("rf1", "off")
        client.clear_faults()
        assert curl(host, system)[1] == 200
    finally:
        control.stop()
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", int(control.url.rsplit(":", 1)[1]))) != 0
