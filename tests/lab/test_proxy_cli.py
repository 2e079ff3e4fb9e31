"""``hwlab proxy`` in the foreground, driven by ``hwlab fault``/``status``/``down``,
and ``hwlab up`` with a lab file of proxied nodes in front of stock emulators."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from bmaas.hwlab.daemon import pid_alive
from bmaas.hwlab.proxy.stock import StockVbmc
from tests.lab.proxy_support import HWLAB, VBMC_PASSWORD, hwlab, ipmitool, port_is_free, wait_ready

pytestmark = pytest.mark.lab


def test_hwlab_proxy_runs_until_down_and_obeys_fault_commands(
    stock_vbmc: StockVbmc, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    process = subprocess.Popen(
        [
            HWLAB,
            "proxy",
            *("--protocol", "ipmi", "--upstream", f"127.0.0.1:{stock_vbmc.ports['test']}"),
            *("--node", "vm1", "--username", "admin", "--state-dir", str(state)),
        ],
        env={**os.environ, "HWLAB_PROXY_PASSWORD": VBMC_PASSWORD},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        info = wait_ready(state, process)
        port = info["nodes"]["vm1"]["ports"]["ipmi"]
        inventory = yaml.safe_load((state / "inventory.yaml").read_text())
        assert inventory["nodes"][0]["driver_info"]["ipmi_port"] == port
        assert oct((state / "inventory.yaml").stat().st_mode & 0o777) == "0o600"
        assert VBMC_PASSWORD not in (state / "lab.json").read_text()

        assert ipmitool(port, "power", "status").returncode == 0
        added = hwlab(
            "fault", "add", "vm1", "effect=busy,operation=power.get", "--state-dir", str(state)
        )
        assert added.returncode == 0, added.stderr
        assert "Node busy" in ipmitool(port, "power", "status").stderr
        status = json.loads(hwlab("status", "--json", "--state-dir", str(state)).stdout)
        assert status["nodes"]["vm1"]["fired"] == {"busy on power.get": 1}
        refused = hwlab("fault", "add", "vm1", "effect=power_lost", "--state-dir", str(state))
        assert refused.returncode == 2
        assert "hardware" in refused.stderr
        assert "Traceback" not in refused.stderr
        power = hwlab("power", "vm1", "off", "--state-dir", str(state))
        assert power.returncode == 2
        assert "proxy" in power.stderr
        assert hwlab("fault", "clear", "--all", "--state-dir", str(state)).returncode == 0
        assert ipmitool(port, "power", "status").returncode == 0
        events = [json.loads(line) for line in (state / "events.jsonl").read_text().splitlines()]
        assert [(e["node"], e["effect"]) for e in events] == [("vm1", "busy")]

        assert hwlab("down", "--state-dir", str(state)).returncode == 0
        out, _ = process.communicate(timeout=10)
        assert process.returncode == 0
        assert "proxy stopped" in out
        assert not (state / "lab.json").exists()
        assert port_is_free(port)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.communicate(timeout=10)  # reap it and close the pipes


def test_hwlab_proxy_reads_its_password_from_a_file_never_from_argv(tmp_path: Path) -> None:
    """Issue 36: `--password` was in every user's `ps`. From a file: the
    password reaches the proxy (its inventory) and not its command line; the
    proxy's control API takes its owner's CLI and refuses a request without
    its token."""
    password = "file-only-s3cret"
    secret = tmp_path / "bmc.pass"
    secret.write_text(password + "\n")
    state = tmp_path / "state"
    process = subprocess.Popen(
        [
            HWLAB,
            "proxy",
            *("--protocol", "ipmi", "--upstream", "127.0.0.1:9", "--node", "bmc"),
            *("--username", "admin", "--password-file", str(secret), "--state-dir", str(state)),
        ],
        env={k: v for k, v in os.environ.items() if k != "HWLAB_PROXY_PASSWORD"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        info = wait_ready(state, process)
        inventory = yaml.safe_load((state / "inventory.yaml").read_text())
        assert inventory["nodes"][0]["driver_info"]["ipmi_password"] == password
        cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
        assert password.encode() not in cmdline
        assert b"bmc.pass" in cmdline  # the one we started
        assert oct(state.stat().st_mode & 0o777) == "0o700"
        for name in ("token", "lab.json", "hwlab.pid", "inventory.yaml", "events.jsonl"):
            assert oct((state / name).stat().st_mode & 0o777) == "0o600", name
        status = hwlab("status", "--json", "--state-dir", str(state))
        assert status.returncode == 0, status.stderr
        assert "bmc" in json.loads(status.stdout)["nodes"]
        port = int(info["control_url"].rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                f"POST /shutdown HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}".encode()
            )
            assert sock.recv(65536).startswith(b"HTTP/1.1 401 ")
        assert process.poll() is None  # still serving
        assert hwlab("down", "--state-dir", str(state)).returncode == 0
        out, err = process.communicate(timeout=10)
        assert process.returncode == 0, err
        assert password not in out + err
        assert not (state / "token").exists()
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.communicate(timeout=10)


def test_hwlab_proxy_refuses_hardware_rules_before_listening(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    # boot_crash: a hardware effect no proxy carries out (power_stuck is one
    # both proxies do: the Reset or Chassis Control acknowledged, never relayed)
    rules.write_text("rules:\n  - {name: psu, effect: boot_crash, operation: power.set}\n")
    result = hwlab(
        "proxy",
        *("--protocol", "redfish", "--upstream", "http://127.0.0.1:9", "--rules", str(rules)),
        *("--state-dir", str(tmp_path / "state")),
        timeout=30,
    )
    assert result.returncode == 2
    assert "rule 'psu'" in result.stderr
    assert "hardware" in result.stderr
    assert not (tmp_path / "state" / "lab.json").exists()


def test_hwlab_proxy_refuses_redfish_rules_that_can_never_fire(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {name: slow-boot-read, effect: busy, operation: boot.get}\n")
    result = hwlab(
        "proxy",
        *("--protocol", "redfish", "--upstream", "http://127.0.0.1:9", "--rules", str(rules)),
        *("--state-dir", str(tmp_path / "state")),
        timeout=30,
    )
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, result.stderr
    assert "rule 'slow-boot-read'" in errors[0]
    assert "never matches" in errors[0]
    assert not (tmp_path / "state" / "lab.json").exists()


LABFILE = """\
seed: 3
nodes:
  - name: vm-ipmi
    proxy: {protocol: ipmi, stock: vbmc, domain: test, libvirt_uri: "test:///default"}
    faults:
      - {effect: busy, operation: power.get, times: 1}
  - name: vm-redfish
    proxy: {protocol: redfish, stock: sushy}
"""


@pytest.mark.vbmc
def test_hwlab_up_brings_up_stock_emulators_behind_proxies(tmp_path: Path) -> None:
    labfile = tmp_path / "lab.yaml"
    labfile.write_text(LABFILE)
    state = tmp_path / "state"
    up = hwlab("up", "--lab-file", str(labfile), "--state-dir", str(state), "--json", timeout=120)
    try:
        assert up.returncode == 0, up.stderr + (state / "hwlab.log").read_text()
        inventory = yaml.safe_load((state / "inventory.yaml").read_text())
        nodes = {n["name"]: n for n in inventory["nodes"]}
        ipmi_info = nodes["vm-ipmi"]["driver_info"]
        assert nodes["vm-ipmi"]["driver"] == "ipmi"
        assert ipmi_info["ipmi_password"] == "password"
        assert "Node busy" in ipmitool(ipmi_info["ipmi_port"], "power", "status").stderr
        assert ipmitool(ipmi_info["ipmi_port"], "power", "status").returncode == 0
        redfish = nodes["vm-redfish"]["driver_info"]
        assert redfish["redfish_system_id"].startswith("/redfish/v1/Systems/")
        curl = [
            "curl",
            "-sS",
            "--max-time",
            "5",
            redfish["redfish_address"] + redfish["redfish_system_id"],
        ]
        system = json.loads(
            subprocess.run(curl, capture_output=True, check=True, timeout=30).stdout
        )
        assert system["Name"] == "vm-redfish"
        added = hwlab(
            "fault",
            "add",
            "vm-redfish",
            "effect=internal_error,operation=power.get",
            "--state-dir",
            str(state),
        )
        assert added.returncode == 0, added.stderr
        assert b"InternalError" in subprocess.run(curl, capture_output=True, timeout=30).stdout
        status = json.loads(hwlab("status", "--json", "--state-dir", str(state)).stdout)
        assert status["events"] == 2
        pid = json.loads((state / "lab.json").read_text())["pid"]
    finally:
        down = hwlab("down", "--state-dir", str(state), timeout=60)
    assert down.returncode == 0
    assert not pid_alive(pid)
    assert port_is_free(ipmi_info["ipmi_port"])
    assert not _running(str(tmp_path))  # no vbmcd, BMC or sushy-emulator left


def _running(marker: str) -> bool:
    """Whether any process has ``marker`` (this test's temp dir) on its command line."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                return True
        except OSError:
            continue
    return False
