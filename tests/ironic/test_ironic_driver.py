"""bmaas-ipmi and bmaas-redfish on a real Ironic: the happy paths."""

from __future__ import annotations

from typing import Any

import pytest

from bmaas import faulttext
from bmaas.hwlab.harness import ironic as harness

BMAAS_TYPES = ["bmaas-ipmi", "bmaas-redfish"]


@pytest.mark.parametrize("driver", BMAAS_TYPES)
def test_enroll_validate_power_boot_deploy_undeploy(
    driver: str, ironic_node: Any, baremetal: Any
) -> None:
    node, _ = ironic_node(driver)  # manage + provide: power reads through bmaas
    assert node.provision_state == "available"
    assert node.power_interface == "bmaas"
    assert node.management_interface == "bmaas"

    result = baremetal.baremetal.validate_node(node, required=None)
    assert result["power"].result, result["power"].reason
    assert result["management"].result, result["management"].reason

    baremetal.baremetal.set_node_power_state(node, "power on", wait=True, timeout=60)
    assert baremetal.baremetal.get_node(node.id).power_state == "power on"
    baremetal.baremetal.set_node_power_state(node, "rebooting", wait=True, timeout=60)
    assert baremetal.baremetal.get_node(node.id).power_state == "power on"
    baremetal.baremetal.set_node_power_state(node, "soft power off", wait=True, timeout=60)
    assert baremetal.baremetal.get_node(node.id).power_state == "power off"
    # a reboot of a node that is off powers it on, as Ironic expects
    baremetal.baremetal.set_node_power_state(node, "rebooting", wait=True, timeout=60)
    assert baremetal.baremetal.get_node(node.id).power_state == "power on"
    baremetal.baremetal.set_node_power_state(node, "power off", wait=True, timeout=60)
    assert baremetal.baremetal.get_node(node.id).power_state == "power off"

    for device, persistent in (("pxe", True), ("disk", False)):
        baremetal.baremetal.set_node_boot_device(node, device, persistent=persistent)
        got = baremetal.baremetal.get_node_boot_device(node)
        assert got["boot_device"] == device
        assert got["persistent"] is persistent
    supported = baremetal.baremetal.get_node_supported_boot_devices(node)
    assert set(supported["supported_boot_devices"]) >= {"pxe", "disk", "cdrom", "bios"}

    # ramdisk deploy: pxe boot sets the boot device and powers the node on
    baremetal.baremetal.set_node_provision_state(node, "active", wait=True, timeout=120)
    deployed = baremetal.baremetal.get_node(node.id)
    assert deployed.power_state == "power on"
    baremetal.baremetal.set_node_provision_state(node, "deleted", wait=True, timeout=120)
    assert baremetal.baremetal.get_node(node.id).provision_state == "available"
    assert baremetal.baremetal.get_node(node.id).power_state == "power off"


def test_switching_an_enrolled_stock_node_to_bmaas(ironic_node: Any, baremetal: Any) -> None:
    node, _ = ironic_node("ipmi", provide=False)
    # `baremetal node set --driver bmaas-ipmi --reset-interfaces`
    baremetal.baremetal.patch_node(
        node, [{"op": "replace", "path": "/driver", "value": "bmaas-ipmi"}], reset_interfaces=True
    )
    node = baremetal.baremetal.get_node(node.id)
    assert (node.driver, node.power_interface) == ("bmaas-ipmi", "bmaas")
    baremetal.baremetal.set_node_power_state(node, "power on", wait=True, timeout=60)
    assert baremetal.baremetal.get_node(node.id).power_state == "power on"


def test_foreign_driver_info_keys_are_ignored_and_a_typo_is_named(
    ironic_node: Any, baremetal: Any
) -> None:
    node, _ = ironic_node("bmaas-ipmi", provide=False)
    # keys of other interfaces and stock ipmi-only keys are fine
    baremetal.baremetal.patch_node(
        node,
        [
            {"op": "add", "path": "/driver_info/ipmi_terminal_port", "value": 9001},
            {"op": "add", "path": "/driver_info/rescue_kernel", "value": "file:///k"},
        ],
    )
    assert baremetal.baremetal.validate_node(node, required=None)["power"].result
    # a misspelled key of bmaas's own fails validation, naming the key
    baremetal.baremetal.patch_node(
        node, [{"op": "add", "path": "/driver_info/ipmi_pasword", "value": "x"}]
    )
    power = baremetal.baremetal.validate_node(node, required=None)["power"]
    assert not power.result
    parsed = faulttext.parse(power.reason)
    assert parsed is not None
    assert parsed.code == "input_error"
    assert "ipmi_pasword" in power.reason
    assert "did you mean 'ipmi_password'" in power.reason


def test_failures_never_show_the_password(
    ironic_node: Any, ironic_lab: Any, baremetal: Any
) -> None:
    node, _ = ironic_node("bmaas-redfish")
    secret = "s3cr3t-" + node.id[:8]
    baremetal.baremetal.patch_node(
        node, [{"op": "replace", "path": "/driver_info/redfish_password", "value": secret}]
    )
    baremetal.baremetal.set_node_power_state(node, "power on", wait=False)
    node = harness.wait_for_power_settled(baremetal, node, timeout=60)
    text = harness.failure_text(baremetal, node) or ""
    parsed = faulttext.parse(text)
    assert parsed is not None
    assert parsed.code == "bmc_auth_error"
    assert secret not in text
    assert secret not in ironic_lab.state_dir.joinpath("events.jsonl").read_text()
    assert secret not in harness.history_text(baremetal, node)


def test_the_conductor_log_never_shows_the_password(ironic: Any, ironic_lab: Any) -> None:
    """Every password of the lab (all nodes share the lab's) is absent from
    what the conductor logged while the other tests ran."""
    password = ironic_lab.inventory()["nodes"][0]["driver_info"]["ipmi_password"]
    assert password not in ironic.log_path.read_text(errors="replace")


_PARSE_CONF = """
import sys
from oslo_config import cfg
from bmaas.drivers.ironic import conf
opts = cfg.ConfigOpts()
opts.register_opts(conf.OPTS, group=conf.GROUP)
opts(["--config-file", sys.argv[1]])
try:
    print(opts.bmaas.call_deadline, opts.bmaas.sync_deadline)
except cfg.ConfigFileValueError as exc:
    print("refused:", exc)
"""


@pytest.mark.parametrize(
    ("value", "expected"),
    [("nan", "refused: "), ("inf", "refused: "), ("-1", "refused: "), ("2.5", "2.5 15.0")],
)
def test_the_bmaas_section_takes_finite_seconds_only(
    tmp_path: Any, value: str, expected: str
) -> None:
    """oslo's FloatOpt lets nan through its bounds; [bmaas] refuses it (a NaN
    budget would make every Deadline in the conductor meaningless)."""
    import subprocess

    config = tmp_path / "ironic.conf"
    config.write_text(f"[bmaas]\ncall_deadline = {value}\n")
    python = harness.find_venv() / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", _PARSE_CONF, str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.startswith(expected), done.stdout + done.stderr


_KEEP = """
import sys
import ironic.conf
from bmaas.deadline import Deadline
from bmaas.drivers.ironic import calls, host
calls.conf.CONF(sys.argv[1:], project="ironic")
rt = host.runtime()
print(rt.pool.idle, rt.keeper.running)
rt.close(Deadline.after(5.0))
"""


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # Ironic's default 120 s: 11 keepalives would cost more than a login
        ("", "240.0 False"),
        ("[conductor]\nsync_power_state_interval = 300\n", "600.0 False"),
        ("[conductor]\nsync_power_state_interval = 60\n", "120.0 True"),
        ("[bmaas]\nkeep_sessions = True\n", "240.0 True"),
        ("[bmaas]\nkeep_sessions = false\n", "60.0 False"),
    ],
)
def test_the_conductor_keeps_sessions_across_its_sync_interval(
    tmp_path: Any, config: str, expected: str
) -> None:
    """Issue 26: inside the conductor nobody sent keepalives, so bmaas-ipmi
    logged in to every BMC every sync cycle. The first call sizes the pool's
    idle from Ironic's own interval and starts the keeper where keepalives
    cost less than a login a cycle (``auto``), or always (``true``)."""
    import subprocess

    conf_file = tmp_path / "ironic.conf"
    conf_file.write_text(config)
    python = harness.find_venv() / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", _KEEP, "--config-file", str(conf_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip().splitlines()[-1] == expected, done.stdout + done.stderr
