"""Virtual media and UEFI HTTP boot through a real Ironic (issue 35):
``bmaas-redfish`` boots from the CD with ``bmaas-virtual-media`` and over
UEFI HTTP with ``bmaas-https`` (every BMC request through bmaas);
a ``ramdisk`` deploy with
a boot ISO goes to active with the ISO in the BMC's CD slot, on hwlab and
on stock sushy-tools, beside stock ``redfish`` in the same Ironic; the node
vmedia API attaches and detaches; a BMC that refuses the insert fails the
deploy typed and within the budget.

This module starts an Ironic of its own with the virtual media boot
interfaces enabled and a web server on ``[deploy]http_url`` serving its
``http_root`` (sushy-tools downloads the image it is given, as a BMC does;
hwlab records the URL only)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import http.server
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from bmaas import faulttext
from bmaas.hwlab.harness import ironic as harness
from bmaas.hwlab.lab import Lab
from tests.ironic.conftest import _NEXT
from tests.ironic.conftest import SETTINGS as SESSION_SETTINGS
from tests.sushy_emulator import sushy_emulator

#: (hardware type, boot interface): stock first, the figures beside it
CASES = (
    ("redfish", "redfish-virtual-media"),
    ("bmaas-redfish", "bmaas-virtual-media"),
)
#: the same over UEFI HTTP boot (Redfish UefiHttp + HttpBootUri)
HTTPS_CASES = (
    ("redfish", "redfish-https"),
    ("bmaas-redfish", "bmaas-https"),
)
#: the node vmedia API (POST/DELETE /v1/nodes/{node}/vmedia: 1.89; GET: 1.93)
VMEDIA_VERSION = "1.93"
#: sushy-tools lands a power change 1-11 s after the request: a budget that fits
SETTINGS = dataclasses.replace(
    SESSION_SETTINGS, power_timeout=30, bmaas_operation_deadline=30.0, bmaas_sync_deadline=8.0
)
#: a published ISO's path on the conductor's web server
PUBLISHED = re.compile(r"^/redfish/boot-(?P<node>[0-9a-f-]{36})\.iso$")


class _Served:
    """The conductor's web server: ``http_root`` on a free loopback port,
    with the paths asked for (a BMC's download shows here)."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.gets: list[str] = []
        served = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self) -> None:
                served.gets.append(self.path)
                super().do_GET()

            def log_message(self, *args: Any) -> None:
                pass

        handler = functools.partial(Handler, directory=str(root))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclasses.dataclass
class VmediaIronic:
    service: harness.IronicService
    conn: Any
    served: _Served
    boot_iso: Path


@pytest.fixture(scope="module")
def vmedia_ironic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VmediaIronic]:
    workdir = tmp_path_factory.mktemp("ironic-vmedia")
    with contextlib.ExitStack() as stack:
        served = _Served(workdir / "httpboot")
        stack.callback(served.stop)
        settings = dataclasses.replace(
            SETTINGS,
            extra={
                "DEFAULT": {
                    "enabled_boot_interfaces": ",".join(
                        ["pxe", *(boot for _, boot in CASES + HTTPS_CASES)]
                    )
                },
                "deploy": {"http_url": served.url},
            },
        )
        service = harness.IronicService(workdir, settings)
        stack.callback(service.stop)
        service.start(timeout=180)
        conn = service.connect()
        stack.callback(conn.close)
        answer = conn.baremetal.get("/drivers/bmaas-redfish", microversion=VMEDIA_VERSION)
        offered = answer.json()["enabled_boot_interfaces"]
        assert {"bmaas-virtual-media", "bmaas-https"} <= set(offered), answer.text
        boot_iso = workdir / "images" / "boot.iso"
        boot_iso.write_bytes(b"bmaas lab boot iso\n" * 64)
        yield VmediaIronic(service, conn, served, boot_iso)


def _enroll(env: VmediaIronic, entry: dict[str, Any], driver: str, boot: str, name: str) -> Any:
    node = harness.enroll(
        env.conn,
        entry,
        driver=driver,
        name=name,
        kernel=env.service.kernel,
        ramdisk=env.service.ramdisk,
    )
    return env.conn.baremetal.update_node(
        node,
        boot_interface=boot,
        instance_info={**node.instance_info, "boot_iso": f"file://{env.boot_iso}"},
    )


def _deploy(env: VmediaIronic, node: Any) -> tuple[Any, float]:
    """Deploy ``node`` and wait: (the node as read after, seconds to settle)."""
    started = time.monotonic()
    env.conn.baremetal.set_node_provision_state(node, "active")
    end = started + 180
    while True:  # "deploy failed" keeps its target ("active"): wait_for_provision waits on
        done = env.conn.baremetal.get_node(node.id)
        if done.provision_state == "deploy failed" or (
            done.provision_state == "active" and not done.target_provision_state
        ):
            return done, time.monotonic() - started
        assert time.monotonic() < end, f"{done.name}: still {done.provision_state} after 180 s"
        time.sleep(0.25)


@pytest.fixture
def lab_node(vmedia_ironic: VmediaIronic, ironic_lab: Lab) -> Iterator[Callable[..., Any]]:
    entries = ironic_lab.inventory()["nodes"]
    used: list[str] = []

    def enroll(driver: str, boot: str) -> tuple[Any, str]:
        entry = entries[next(_NEXT)]
        used.append(entry["name"])
        name = f"vm-{driver}-{boot}-{entry['name']}"
        return _enroll(vmedia_ironic, entry, driver, boot, name), entry["name"]

    yield enroll
    for name in used:
        ironic_lab.clear_faults(name)


def _published(node: Any) -> str:
    return f"/redfish/boot-{node.id}.iso"


@pytest.mark.timeout(600)
def test_ramdisk_deploy_with_boot_iso_on_hwlab(
    vmedia_ironic: VmediaIronic, ironic_lab: Lab, lab_node: Callable[..., Any]
) -> None:
    env = vmedia_ironic
    figures = {}
    for driver, boot in CASES:
        node, lab_name = lab_node(driver, boot)
        assert node.boot_interface == boot
        done, took = _deploy(env, node)
        assert done.provision_state == "active", f"{driver}/{boot}: {done.last_error}"
        figures[f"{driver}/{boot}"] = round(took, 1)
        state = ironic_lab.status()["nodes"][lab_name]
        # the BMC holds the ISO Ironic published for this node, and boots it
        assert state["media"] == env.served.url + _published(node), state
        assert state["boot_device"] == "cdrom", state
        assert state["power"] == "on", state
        if driver == "bmaas-redfish" and boot == "bmaas-virtual-media":
            # undeploy: the instance's clean-up ejects through bmaas
            env.conn.baremetal.set_node_provision_state(node, "deleted")
            harness.wait_for_provision(env.conn, node, {"available"}, timeout=180)
            assert ironic_lab.status()["nodes"][lab_name]["media"] is None
    print(f"\nhwlab, seconds from 'active' asked to active: {figures}")


@pytest.mark.timeout(600)
def test_ramdisk_deploy_with_boot_iso_on_sushy_tools(
    vmedia_ironic: VmediaIronic, tmp_path: Path
) -> None:
    env = vmedia_ironic
    figures = {}
    with sushy_emulator(tmp_path / "emulator", len(CASES)) as emulator:
        for i, ((driver, boot), system) in enumerate(zip(CASES, emulator.systems, strict=True)):
            entry = {
                "name": f"st-{i}",
                "driver_info": {
                    "redfish_address": emulator.url,
                    "redfish_system_id": system,
                    "redfish_username": "admin",
                    "redfish_password": "password",
                },
            }
            node = _enroll(env, entry, driver, boot, f"st-{driver}-{boot}")
            done, took = _deploy(env, node)
            assert done.provision_state == "active", f"{driver}/{boot}: {done.last_error}"
            figures[f"{driver}/{boot}"] = round(took, 1)
            # sushy-tools downloaded the published ISO (as a BMC does) and shows it
            assert _published(node) in env.served.gets, env.served.gets
            # and took it by its InsertMedia action (the access log, colours and all)
            inserts = [
                line
                for line in emulator.log.read_text().splitlines()
                if f"POST {system}/" in line and "VirtualMedia.InsertMedia" in line
            ]
            assert inserts, f"{driver}/{boot}: no InsertMedia for {system}"
            assert all(line.rstrip(" -").endswith(" 204") for line in inserts), inserts
    print(f"\nsushy-tools, seconds from 'active' asked to active: {figures}")


@pytest.mark.timeout(300)
def test_node_vmedia_api_attaches_and_detaches(
    vmedia_ironic: VmediaIronic, ironic_lab: Lab, lab_node: Callable[..., Any]
) -> None:
    env = vmedia_ironic
    node, lab_name = lab_node("bmaas-redfish", "bmaas-virtual-media")
    # an image the operator serves: Ironic fetches it and publishes it for the
    # BMC ("Publishing images is not supported for driver bmaas-redfish" before)
    source = env.service.workdir / "httpboot" / "operator.iso"
    source.write_bytes(b"an operator's ISO\n")
    answer = env.conn.baremetal.post(
        f"/nodes/{node.id}/vmedia",
        json={"device_type": "cdrom", "image_url": env.served.url + "/operator.iso"},
        microversion=VMEDIA_VERSION,
    )
    assert answer.status_code == 204, answer.text
    published = f"{env.served.url}/redfish/cdrom-{node.id}.iso"
    _await_media(ironic_lab, lab_name, published, env, node)
    assert _cd_slots(env, node) == [
        {"media_types": ["CD", "DVD"], "inserted": True, "image": published}
    ]
    answer = env.conn.baremetal.delete(f"/nodes/{node.id}/vmedia", microversion=VMEDIA_VERSION)
    assert answer.status_code == 204, answer.text
    _await_media(ironic_lab, lab_name, None, env, node)
    assert _cd_slots(env, node) == [
        {"media_types": ["CD", "DVD"], "inserted": False, "image": None}
    ]


def _cd_slots(env: VmediaIronic, node: Any) -> Any:
    """``GET /v1/nodes/{node}/vmedia``: what the BMC's CD slots read now."""
    answer = env.conn.baremetal.get(f"/nodes/{node.id}/vmedia", microversion=VMEDIA_VERSION)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _await_media(lab: Lab, lab_name: str, want: str | None, env: VmediaIronic, node: Any) -> None:
    end = time.monotonic() + 60
    while True:
        media = lab.status()["nodes"][lab_name]["media"]
        if media == want:
            return
        if time.monotonic() > end:
            raise AssertionError(
                f"media {media!r}, not {want!r}; history: {harness.history_text(env.conn, node)}"
            )
        time.sleep(0.25)


@pytest.mark.timeout(300)
def test_a_refused_insert_fails_the_deploy_typed_within_the_budget(
    vmedia_ironic: VmediaIronic, ironic_lab: Lab, lab_node: Callable[..., Any]
) -> None:
    env = vmedia_ironic
    node, lab_name = lab_node("bmaas-redfish", "bmaas-virtual-media")
    ironic_lab.add_faults(lab_name, [{"effect": "internal_error", "operation": "vmedia.insert"}])
    done, _ = _deploy(env, node)
    assert done.provision_state == "deploy failed"
    text = harness.failure_text(env.conn, node) or ""
    parsed = faulttext.parse(text)
    assert parsed is not None, text
    assert parsed.code == "bmc_internal_error", text
    took = re.search(r"insert virtual media gave up after (\d+\.\d+)s", text)
    assert took is not None, text
    assert float(took[1]) <= SETTINGS.bmaas_operation_deadline * 1.1, text
    assert ironic_lab.status()["nodes"][lab_name]["media"] is None


def _system_boot(lab: Lab, lab_name: str) -> dict[str, Any]:
    """The Boot object of the node's system as its BMC serves it."""
    entry = next(e for e in lab.inventory()["nodes"] if e["name"] == lab_name)
    info = entry["driver_info"]
    address = info["redfish_address"].rstrip("/")
    with requests.Session() as http:
        http.auth = (info["redfish_username"], info["redfish_password"])
        http.verify = info.get("redfish_verify_ca", True)
        systems = http.get(f"{address}/redfish/v1/Systems", timeout=10).json()
        path = systems["Members"][0]["@odata.id"]
        boot: dict[str, Any] = http.get(f"{address}{path}", timeout=10).json()["Boot"]
    return boot


@pytest.mark.timeout(600)
def test_ramdisk_deploy_with_boot_iso_over_uefi_http_on_hwlab(
    vmedia_ironic: VmediaIronic, ironic_lab: Lab, lab_node: Callable[..., Any]
) -> None:
    """``bmaas-https`` beside stock ``redfish-https``: the boot ISO is
    published and the BMC is told to boot it over UEFI HTTP, persistently;
    the node goes to active and the BMC holds UefiHttp with the ISO's URL."""
    env = vmedia_ironic
    figures = {}
    for driver, boot in HTTPS_CASES:
        node, lab_name = lab_node(driver, boot)
        assert node.boot_interface == boot
        done, took = _deploy(env, node)
        assert done.provision_state == "active", f"{driver}/{boot}: {done.last_error}"
        figures[f"{driver}/{boot}"] = round(took, 1)
        shown = _system_boot(ironic_lab, lab_name)
        assert shown["BootSourceOverrideTarget"] == "UefiHttp", shown
        assert shown["BootSourceOverrideEnabled"] == "Continuous", shown
        assert shown["HttpBootUri"] == env.served.url + _published(node), shown
        # Ironic's management API names the override, stock and bmaas alike
        # (bmaas read it as "unknown" before: issue 48)
        answer = env.conn.baremetal.get(
            f"/nodes/{node.id}/management/boot_device", microversion=VMEDIA_VERSION
        )
        assert answer.json() == {"boot_device": "uefihttp", "persistent": True}, answer.text
        state = ironic_lab.status()["nodes"][lab_name]
        assert (state["power"], state["boot_device"], state["media"]) == ("on", "pxe", None)
        if driver == "bmaas-redfish":
            # undeploy: the published ISO is withdrawn, the node boots its disk again
            env.conn.baremetal.set_node_provision_state(node, "deleted")
            harness.wait_for_provision(env.conn, node, {"available"}, timeout=180)
            assert not (env.service.workdir / "httpboot" / _published(node).lstrip("/")).exists()
    print(f"\nhwlab over UEFI HTTP, seconds from 'active' asked to active: {figures}")


@pytest.mark.timeout(300)
def test_a_refused_uefi_http_boot_fails_the_deploy_typed_within_the_budget(
    vmedia_ironic: VmediaIronic, ironic_lab: Lab, lab_node: Callable[..., Any]
) -> None:
    env = vmedia_ironic
    node, lab_name = lab_node("bmaas-redfish", "bmaas-https")
    ironic_lab.add_faults(lab_name, [{"effect": "internal_error", "operation": "boot.set"}])
    done, _ = _deploy(env, node)
    assert done.provision_state == "deploy failed"
    text = harness.failure_text(env.conn, node) or ""
    parsed = faulttext.parse(text)
    assert parsed is not None, text
    assert parsed.code == "bmc_internal_error", text
    took = re.search(r"set UEFI HTTP boot gave up after (\d+\.\d+)s", text)
    assert took is not None, text
    assert float(took[1]) <= SETTINGS.bmaas_operation_deadline * 1.1, text
    assert _system_boot(ironic_lab, lab_name)["BootSourceOverrideTarget"] != "UefiHttp"


def _ask_active(env: VmediaIronic, node: Any) -> Any:
    """``PUT .../states/provision`` ``active``: Ironic's answer, as the API gives it."""
    return env.conn.baremetal.put(
        f"/nodes/{node.id}/states/provision",
        json={"target": "active"},
        microversion=VMEDIA_VERSION,
    )


@pytest.mark.timeout(600)
def test_uefi_http_boot_on_stock_sushy_tools_refused_at_the_api_or_typed(
    vmedia_ironic: VmediaIronic, tmp_path: Path
) -> None:
    """Issue 48, finding 4. A system whose Boot lists no ``UefiHttp``
    (sushy-tools in Legacy mode): the deploy is refused at Ironic's API
    (HTTP 400), stock ``redfish-https`` and ``bmaas-https`` alike, the node
    left ``available``; bmaas says ``[bmaas unsupported_operation
    retry=other_node]``. A UEFI one lists it, but sushy-tools' fake driver
    cannot keep an ``HttpBootUri``: ``bmaas-https`` fails the deploy typed
    ``unsupported_operation`` (its 400 "Failed to save HttpBootUri field
    value."), never ``unclassified_fault``, and Ironic does not fence it."""
    env = vmedia_ironic
    modes = ("Legacy", "Legacy", "UEFI")
    with sushy_emulator(tmp_path / "emulator", len(modes), boot_modes=modes) as emulator:
        cases = [*HTTPS_CASES, ("bmaas-redfish", "bmaas-https")]
        nodes = []
        for i, ((driver, boot), system) in enumerate(zip(cases, emulator.systems, strict=True)):
            entry = {
                "name": f"st-http-{i}",
                "driver_info": {
                    "redfish_address": emulator.url,
                    "redfish_system_id": system,
                    "redfish_username": "admin",
                    "redfish_password": "password",
                },
            }
            nodes.append(_enroll(env, entry, driver, boot, f"st-http-{modes[i]}-{driver}"))
        for (driver, _), node in zip(HTTPS_CASES, nodes[:2], strict=True):
            answer = _ask_active(env, node)
            assert answer.status_code == 400, f"{driver}: {answer.status_code} {answer.text}"
            assert env.conn.baremetal.get_node(node.id).provision_state == "available"
            if driver == "bmaas-redfish":
                parsed = faulttext.parse(answer.json()["error_message"])
                assert parsed is not None, answer.text
                assert (parsed.code, str(parsed.retry)) == ("unsupported_operation", "other_node")
                assert "UefiHttp is not one the system allows" in answer.text, answer.text
        done, _ = _deploy(env, nodes[2])
        assert done.provision_state == "deploy failed", done.provision_state
        text = harness.failure_text(env.conn, done) or ""
        parsed = faulttext.parse(text)
        assert parsed is not None, text
        assert parsed.code == "unsupported_operation", text
        assert "Failed to save HttpBootUri field value" in text, text
        assert not env.conn.baremetal.get_node(done.id).is_maintenance


def test_only_bmaas_redfish_boots_from_virtual_media(
    vmedia_ironic: VmediaIronic, ironic_lab: Lab
) -> None:
    """``bmaas-ipmi`` has no virtual media: Ironic refuses the interface (400)."""
    env = vmedia_ironic
    entry = ironic_lab.inventory()["nodes"][next(_NEXT)]
    node = harness.enroll(
        env.conn,
        entry,
        driver="bmaas-ipmi",
        name=f"vm-ipmi-{entry['name']}",
        kernel=env.service.kernel,
        ramdisk=env.service.ramdisk,
        provide=False,
    )
    answer = env.conn.baremetal.patch(
        f"/nodes/{node.id}",
        json=[{"op": "replace", "path": "/boot_interface", "value": "bmaas-virtual-media"}],
        microversion=VMEDIA_VERSION,
    )
    assert answer.status_code == 400, answer.text
    assert "is not supported by hardware type BmaasIPMIHardware" in answer.text
