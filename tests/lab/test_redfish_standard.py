"""hwlab's Redfish BMCs meet the Redfish standard (DSP0266) where sushy-tools
does not: one ``@odata.id`` per resource, equal to its URI; a Manager that
answers for every system of a shared service; boot overrides cleared and
``BootSourceOverrideMode``; UEFI HTTP boot (``UefiHttp``, ``HttpBootUri``);
``$metadata``, ``odata`` and ``/redfish`` without login; ETag (and If-Match:
412), Allow, Location, OData-Version, Cache-Control and Link headers; virtual
media by PATCH. The fault proxy relays all of it.
"""

from __future__ import annotations

import base64
import http.client
import json
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bmaas.driver import BootDevice, BootSetting, OtherBootDevice, PowerAction, PowerState
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.machine import FakeMachine
from bmaas.faults import BootFailure, UnsupportedOperation
from bmaas.hwlab.proxy import ProxyHost, ProxySpec
from bmaas.hwlab.redfish import RedfishServer
from tests.budgets import ask
from tests.lab.redfish_support import HARDWARE, PASSWORD, USERNAME, driver_for

pytestmark = pytest.mark.lab

AUTH = "Basic " + base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
#: a crawl of one lab service reads fewer resources than this
MAX_RESOURCES = 200


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        return json.loads(self.body)


def call(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    *,
    auth: bool = True,
    headers: dict[str, str] | None = None,
) -> Answer:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    sent = {"Content-Type": "application/json", **(headers or {})}
    if auth:
        sent["Authorization"] = AUTH
    try:
        conn.request(method, path, None if body is None else json.dumps(body), sent)
        response = conn.getresponse()
        return Answer(response.status, dict(response.getheaders()), response.read())
    finally:
        conn.close()


@pytest.fixture(scope="module")
def server() -> Iterator[RedfishServer]:
    with RedfishServer() as s:
        yield s


_count = iter(range(1, 10_000))


@pytest.fixture
def one(server: RedfishServer) -> tuple[int, FakeMachine]:
    """One machine behind its own BMC: (port, machine)."""
    machine = FakeMachine(f"std-{next(_count)}", HARDWARE)
    return server.add(machine, username=USERNAME, password=PASSWORD), machine


@pytest.fixture
def shared(server: RedfishServer) -> tuple[int, list[FakeMachine]]:
    """Three machines as the systems of one Redfish service: (port, machines)."""
    machines = [FakeMachine(f"shared-{next(_count)}", HARDWARE) for _ in range(3)]
    return server.add_service(machines, username=USERNAME, password=PASSWORD), machines


def links(document: Any) -> Iterator[str]:
    """Every ``@odata.id`` a body links to (its own aside)."""
    if isinstance(document, dict):
        for key, value in document.items():
            if key == "@odata.id" and isinstance(value, str):
                yield value
            else:
                yield from links(value)
    elif isinstance(document, list):
        for item in document:
            yield from links(item)


def crawl(port: int) -> dict[str, Any]:
    """Every resource reachable from the service root, by the URI it was read at."""
    seen: dict[str, Any] = {}
    todo = ["/redfish/v1/"]
    while todo:
        assert len(seen) < MAX_RESOURCES, "the crawl does not end"
        uri = todo.pop()
        if uri in seen:
            continue
        answer = call(port, "GET", uri)
        assert answer.status == 200, (uri, answer.status, answer.body[:300])
        seen[uri] = document = answer.json()
        own = document.get("@odata.id")
        todo += [link for link in links(document) if link != own and link not in seen]
    return seen


def _norm(uri: str) -> str:
    return uri.rstrip("/") or "/"


# -- one id per resource, a Manager for every system -------------------------------------


def test_every_resource_states_the_uri_it_is_served_at_once(
    shared: tuple[int, list[FakeMachine]], server: RedfishServer
) -> None:
    port, machines = shared
    resources = crawl(port)
    for uri, document in resources.items():
        assert _norm(document["@odata.id"]) == _norm(uri), uri
    systems = sorted(u for u in resources if u.count("/") == 4 and "/Systems/" in u)
    assert systems == sorted(f"/redfish/v1/Systems/{m.name}" for m in machines)
    bmc = server.bmc(port)
    assert not [u for u in resources if bmc.uuid in u]  # no second id, by UUID
    # a request by UUID is pointed at the one id
    moved = call(port, "GET", f"/redfish/v1/Systems/{bmc.uuid}/VirtualMedia/Cd")
    assert moved.status == 308
    assert moved.headers["Location"] == f"/redfish/v1/Systems/{machines[0].name}/VirtualMedia/Cd"


def test_every_system_of_a_shared_service_has_a_manager_that_answers(
    shared: tuple[int, list[FakeMachine]],
) -> None:
    port, machines = shared
    members = call(port, "GET", "/redfish/v1/Managers").json()["Members"]
    assert [m["@odata.id"] for m in members] == [f"/redfish/v1/Managers/{m.name}" for m in machines]
    service_uuid = call(port, "GET", "/redfish/v1/").json()["UUID"]
    for machine in machines:
        system = call(port, "GET", f"/redfish/v1/Systems/{machine.name}").json()
        (managed_by,) = system["Links"]["ManagedBy"]
        manager = call(port, "GET", managed_by["@odata.id"])
        assert manager.status == 200, machine.name
        body = manager.json()
        assert body["Links"]["ManagerForServers"] == [{"@odata.id": system["@odata.id"]}]
        assert body["ServiceEntryPointUUID"] == service_uuid  # a real UUID, not null
        # its virtual media is the system's own
        slots = call(port, "GET", body["VirtualMedia"]["@odata.id"]).json()["Members"]
        cd = next(s["@odata.id"] for s in slots if s["@odata.id"].endswith("/Cd"))
        image = f"http://127.0.0.1:1/{machine.name}.iso"
        insert = call(port, "POST", f"{cd}/Actions/VirtualMedia.InsertMedia", {"Image": image})
        assert insert.status == 204
        assert machine.media == image
    assert [m.media for m in machines] == [f"http://127.0.0.1:1/{m.name}.iso" for m in machines]


# -- boot overrides -------------------------------------------------------------------------


def _boot(port: int, machine: FakeMachine) -> dict[str, Any]:
    boot: dict[str, Any] = call(port, "GET", f"/redfish/v1/Systems/{machine.name}").json()["Boot"]
    return boot


def test_boot_mode_is_read_and_patched(one: tuple[int, FakeMachine]) -> None:
    port, machine = one
    boot = _boot(port, machine)
    assert boot["BootSourceOverrideMode"] == "UEFI"
    assert boot["BootSourceOverrideMode@Redfish.AllowableValues"] == ["UEFI", "Legacy"]
    system = f"/redfish/v1/Systems/{machine.name}"
    patch = call(port, "PATCH", system, {"Boot": {"BootSourceOverrideMode": "Legacy"}})
    assert patch.status == 204
    assert _boot(port, machine)["BootSourceOverrideMode"] == "Legacy"
    bad = call(port, "PATCH", system, {"Boot": {"BootSourceOverrideMode": "Bios"}})
    assert bad.status == 400
    assert "BootSourceOverrideMode 'Bios'" in bad.json()["error"]["message"]
    assert _boot(port, machine)["BootSourceOverrideMode"] == "Legacy"


def test_the_driver_sets_the_boot_mode_a_node_names(
    server: RedfishServer, one: tuple[int, FakeMachine]
) -> None:
    port, machine = one
    driver = driver_for(server, port, boot_mode="bios")
    ask(driver.set_boot_device, BootDevice.PXE, persistent=False)
    assert _boot(port, machine)["BootSourceOverrideMode"] == "Legacy"
    assert ask(driver.get_boot_mode) == "bios"


@pytest.mark.parametrize(
    "clear",
    [
        {"BootSourceOverrideEnabled": "Disabled"},
        {"BootSourceOverrideTarget": "None"},
    ],
)
def test_an_override_is_cleared_and_set_again(
    one: tuple[int, FakeMachine], clear: dict[str, str]
) -> None:
    port, machine = one
    system = f"/redfish/v1/Systems/{machine.name}"
    once = {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}
    assert call(port, "PATCH", system, {"Boot": once}).status == 204
    assert machine.boot_device().device is BootDevice.PXE
    assert call(port, "PATCH", system, {"Boot": clear}).status == 204
    boot = _boot(port, machine)
    assert (boot["BootSourceOverrideEnabled"], boot["BootSourceOverrideTarget"]) == (
        "Disabled",
        "None",
    )
    assert machine.boot_device().device is BootDevice.DISK  # its own boot order
    # no override to make persistent without a target
    lone = call(port, "PATCH", system, {"Boot": {"BootSourceOverrideEnabled": "Continuous"}})
    assert lone.status == 400
    assert call(port, "PATCH", system, {"Boot": once}).status == 204
    boot = _boot(port, machine)
    assert (boot["BootSourceOverrideEnabled"], boot["BootSourceOverrideTarget"]) == ("Once", "Pxe")


def test_a_boot_patch_names_every_bad_property_and_changes_nothing(
    one: tuple[int, FakeMachine],
) -> None:
    port, machine = one
    before = _boot(port, machine)
    bad = call(
        port,
        "PATCH",
        f"/redfish/v1/Systems/{machine.name}",
        {"Boot": {"BootSourceOverrideEnabled": "Sometimes", "Colour": "red"}, "AssetTag": "x"},
    )
    assert bad.status == 400
    ids = [i["MessageId"] for i in bad.json()["error"]["@Message.ExtendedInfo"]]
    assert ids == [
        "Base.1.8.PropertyNotWritable",
        "Base.1.8.PropertyUnknown",
        "Base.1.8.PropertyValueNotInList",
    ]
    assert _boot(port, machine) == before


# -- documents without login -----------------------------------------------------------------


def test_metadata_odata_and_versions_need_no_login(one: tuple[int, FakeMachine]) -> None:
    port, machine = one
    assert call(port, "GET", "/redfish", auth=False).json() == {"v1": "/redfish/v1/"}
    odata = call(port, "GET", "/redfish/v1/odata", auth=False)
    assert odata.status == 200
    assert {"name": "Systems", "kind": "Singleton", "url": "/redfish/v1/Systems"} in odata.json()[
        "value"
    ]
    for path in ("/redfish/v1/$metadata", "/redfish/v1/%24metadata"):
        metadata = call(port, "GET", path, auth=False)
        assert metadata.status == 200, path
        assert metadata.headers["Content-Type"].startswith("application/xml")
    edmx = "{http://docs.oasis-open.org/odata/ns/edmx}"
    included = {
        node.attrib["Namespace"]
        for node in ET.fromstring(metadata.body).iter(f"{edmx}Include")  # noqa: S314 - our own XML
    }
    # every type the service answers with is declared
    types = {d["@odata.type"].lstrip("#").rpartition(".")[0] for d in crawl(port).values()}
    assert types <= included, types - included
    # the rest still needs credentials
    assert call(port, "GET", f"/redfish/v1/Systems/{machine.name}", auth=False).status == 401


# -- headers --------------------------------------------------------------------------------


def test_the_etag_follows_the_resource_and_if_match_guards_a_patch(
    one: tuple[int, FakeMachine],
) -> None:
    port, machine = one
    system = f"/redfish/v1/Systems/{machine.name}"
    first = call(port, "GET", system)
    tag = first.headers["ETag"]
    assert first.json()["@odata.etag"] == tag
    assert call(port, "GET", system).headers["ETag"] == tag  # unchanged resource, same tag
    pxe = {"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Continuous"}}
    assert call(port, "PATCH", system, pxe, headers={"If-Match": tag}).status == 204
    changed = call(port, "GET", system).headers["ETag"]
    assert changed != tag
    # a PATCH based on the old read is refused and changes nothing
    cd = {"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Continuous"}}
    stale = call(port, "PATCH", system, cd, headers={"If-Match": tag})
    assert stale.status == 412
    assert stale.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == (
        "Base.1.8.PreconditionFailed"
    )
    assert machine.boot_device().device is BootDevice.PXE
    assert call(port, "GET", system).headers["ETag"] == changed
    assert call(port, "PATCH", system, cd, headers={"If-Match": "*"}).status == 204
    assert machine.boot_device().device is BootDevice.CDROM
    # a power change is a change of the resource too
    reset = f"{system}/Actions/ComputerSystem.Reset"
    before = call(port, "GET", system).headers["ETag"]
    assert call(port, "POST", reset, {"ResetType": "On"}).status == 204
    assert machine.power_state() is not PowerState.OFF
    assert call(port, "GET", system).headers["ETag"] != before


def test_a_vmedia_slot_has_an_etag_that_changes_with_its_image(
    one: tuple[int, FakeMachine],
) -> None:
    port, machine = one
    slot = f"/redfish/v1/Systems/{machine.name}/VirtualMedia/Cd"
    empty = call(port, "GET", slot)
    assert empty.json()["Image"] is None
    assert empty.json()["Inserted"] is False
    image = "http://127.0.0.1:1/boot.iso"
    patch = call(
        port,
        "PATCH",
        slot,
        {"Image": image, "Inserted": True},
        headers={"If-Match": empty.headers["ETag"]},
    )
    assert patch.status == 204
    assert machine.media == image
    full = call(port, "GET", slot)
    assert (full.json()["Image"], full.json()["Inserted"]) == (image, True)
    assert full.headers["ETag"] != empty.headers["ETag"]
    stale = call(port, "PATCH", slot, {"Image": None}, headers={"If-Match": empty.headers["ETag"]})
    assert stale.status == 412
    assert machine.media == image
    assert call(port, "PATCH", slot, {"Inserted": False}).status == 204
    assert machine.media is None
    unknown = call(port, "PATCH", slot, {"Colour": "red"})
    assert unknown.status == 400


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/redfish/v1/", "GET"),
        ("/redfish/v1/Systems", "GET"),
        ("/redfish/v1/Systems/{name}", "GET, PATCH"),
        ("/redfish/v1/Systems/{name}/VirtualMedia/Cd", "GET, PATCH"),
        ("/redfish/v1/Managers/{name}", "GET"),
        ("/redfish/v1/SessionService/Sessions", "GET, POST"),
    ],
)
def test_allow_lists_the_methods_a_resource_takes(
    one: tuple[int, FakeMachine], path: str, allowed: str
) -> None:
    port, machine = one
    answer = call(port, "GET", path.format(name=machine.name))
    assert answer.status == 200
    assert answer.headers["Allow"] == allowed


def test_a_refused_method_is_405_with_allow(one: tuple[int, FakeMachine]) -> None:
    port, machine = one
    refused = call(port, "PATCH", f"/redfish/v1/Managers/{machine.name}", {"DateTime": "x"})
    assert refused.status == 405
    assert refused.headers["Allow"] == "GET"


def test_a_session_login_answers_where_the_session_is(one: tuple[int, FakeMachine]) -> None:
    port, _machine = one
    login = call(
        port,
        "POST",
        "/redfish/v1/SessionService/Sessions",
        {"UserName": USERNAME, "Password": PASSWORD},
        auth=False,
    )
    assert login.status == 201
    location = login.headers["Location"]
    assert login.json()["@odata.id"] == location
    token = login.headers["X-Auth-Token"]
    session = call(port, "GET", location, auth=False, headers={"X-Auth-Token": token})
    assert session.status == 200
    assert session.json()["@odata.id"] == location


def test_every_answer_says_its_odata_version(one: tuple[int, FakeMachine]) -> None:
    port, machine = one
    system = f"/redfish/v1/Systems/{machine.name}"
    answers = [
        call(port, "GET", system),  # 200
        call(port, "GET", system, auth=False),  # 401
        call(port, "GET", "/redfish/v1/Nothing"),  # 404
        call(port, "PATCH", system, {"Boot": {"BootSourceOverrideMode": "UEFI"}}),  # 204
    ]
    assert [a.status for a in answers] == [200, 401, 404, 204]
    assert all(a.headers.get("OData-Version") == "4.0" for a in answers)
    read = answers[0].headers
    assert read["Cache-Control"] == "no-cache"
    assert read["Link"] == (
        "<http://redfish.dmtf.org/schemas/v1/ComputerSystem.v1_13_0.json>; rel=describedby"
    )
    newer = call(port, "GET", system, headers={"OData-Version": "4.1"})
    assert newer.status == 412


def test_fault_effects_still_apply_to_a_boot_patch(one: tuple[int, FakeMachine]) -> None:
    port, machine = one
    machine.plan.add(FaultRule.from_dict({"effect": "boot_not_persisted", "operation": "boot.set"}))
    system = f"/redfish/v1/Systems/{machine.name}"
    pxe = {"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}
    assert call(port, "PATCH", system, pxe).status == 204
    assert machine.boot_device().device is BootDevice.DISK  # accepted, not kept
    assert (
        call(port, "PATCH", system, {"Boot": {"BootSourceOverrideEnabled": "Disabled"}}).status
        == 204
    )
    assert _boot(port, machine)["BootSourceOverrideEnabled"] != "Disabled"  # not kept either


# -- UEFI HTTP boot (Ironic's redfish-https, bmaas-https) ------------------------------------


def test_uefi_http_boot_is_listed_set_with_its_uri_and_read_back(
    one: tuple[int, FakeMachine],
) -> None:
    """``UefiHttp`` among the targets and ``HttpBootUri`` on the Boot object;
    a PATCH sets both, the read shows both while the machine holds the
    network boot it set; another target replaces it; a URI that is not a
    string is 400 and changes nothing."""
    port, machine = one
    system = f"/redfish/v1/Systems/{machine.name}"
    boot = _boot(port, machine)
    assert "UefiHttp" in boot["BootSourceOverrideTarget@Redfish.AllowableValues"]
    assert boot["HttpBootUri"] is None
    http = {
        "BootSourceOverrideTarget": "UefiHttp",
        "BootSourceOverrideEnabled": "Continuous",
        "HttpBootUri": "http://conductor:8080/redfish/boot-1.iso",
    }
    assert call(port, "PATCH", system, {"Boot": http}).status == 204
    boot = _boot(port, machine)
    assert {k: boot[k] for k in http} == http
    assert machine.boot_device() == BootSetting(BootDevice.PXE, persistent=True)  # a network boot
    bad = call(port, "PATCH", system, {"Boot": {"HttpBootUri": 7}})
    assert bad.status == 400
    assert "HttpBootUri" in bad.json()["error"]["message"]
    assert _boot(port, machine)["HttpBootUri"] == http["HttpBootUri"]
    pxe = {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Continuous"}
    assert call(port, "PATCH", system, {"Boot": pxe}).status == 204
    assert _boot(port, machine)["BootSourceOverrideTarget"] == "Pxe"


def test_a_one_time_uefi_http_boot_is_used_up_by_the_boot(one: tuple[int, FakeMachine]) -> None:
    port, machine = one
    system = f"/redfish/v1/Systems/{machine.name}"
    once = {"BootSourceOverrideTarget": "UefiHttp", "BootSourceOverrideEnabled": "Once"}
    assert call(port, "PATCH", system, {"Boot": once}).status == 204
    assert _boot(port, machine)["BootSourceOverrideTarget"] == "UefiHttp"
    machine.force_power(PowerState.OFF)
    machine.set_power(PowerAction.ON)
    _await(lambda: machine.power_state() is PowerState.ON)
    assert machine.last_boot_device is BootDevice.PXE
    assert _boot(port, machine)["BootSourceOverrideTarget"] != "UefiHttp"


def test_the_driver_sets_uefi_http_boot_and_checks_the_read_back(
    server: RedfishServer, one: tuple[int, FakeMachine]
) -> None:
    port, machine = one
    driver = driver_for(server, port)
    uri = "http://conductor:8080/redfish/boot-2.iso"
    ask(driver.set_http_boot, uri, persistent=False)
    boot = _boot(port, machine)
    assert (boot["BootSourceOverrideTarget"], boot["BootSourceOverrideEnabled"]) == (
        "UefiHttp",
        "Once",
    )
    assert boot["HttpBootUri"] == uri
    assert ask(driver.get_boot_device) == BootSetting(OtherBootDevice("UefiHttp"), False)
    # a BMC that takes the PATCH and keeps no override: BootFailure, typed
    ask(driver.set_boot_device, BootDevice.DISK, persistent=True)
    machine.plan.add(FaultRule.from_dict({"effect": "boot_not_persisted", "operation": "boot.set"}))
    with pytest.raises(BootFailure):
        ask(driver.set_http_boot, uri, persistent=True)


def test_a_system_without_uefi_http_refuses_before_sending(
    server: RedfishServer,
) -> None:
    """The XCC shape lists no ``UefiHttp``: UnsupportedOperation, no PATCH."""
    machine = FakeMachine(f"xcc-{next(_count)}", HARDWARE)
    port = server.add(machine, username=USERNAME, password=PASSWORD, shape="xcc")
    driver = driver_for(server, port)
    before = machine.boot_device()
    with pytest.raises(UnsupportedOperation, match="UefiHttp"):
        ask(driver.set_http_boot, "http://c/boot.iso", persistent=False)
    assert machine.boot_device() == before


def test_a_vendor_shape_listing_uefi_http_takes_the_uri(server: RedfishServer) -> None:
    """iDRAC 9 lists ``UefiHttp``: its Boot object has ``HttpBootUri``, set
    and read back through the driver."""
    machine = FakeMachine(f"idrac-{next(_count)}", HARDWARE)
    port = server.add(machine, username=USERNAME, password=PASSWORD, shape="idrac9")
    driver = driver_for(server, port)
    uri = "https://conductor/redfish/boot-3.iso"
    ask(driver.set_http_boot, uri, persistent=True)
    system = ask(driver.probe).extra["system"]
    boot = call(port, "GET", system).json()["Boot"]
    assert (boot["BootSourceOverrideTarget"], boot["HttpBootUri"]) == ("UefiHttp", uri)


def _await(done: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < end, "the machine did not get there"
        time.sleep(0.02)


# -- through the fault proxy ----------------------------------------------------------------


def test_the_proxy_relays_etags_allow_location_and_412(
    one: tuple[int, FakeMachine], tmp_path: Path
) -> None:
    port, machine = one
    host = ProxyHost(
        [ProxySpec("std", "redfish", "127.0.0.1", port, tls=False)],
        events_path=tmp_path / "events.jsonl",
        tls_dir=tmp_path / "tls",
    )
    host.start()
    try:
        via = host.proxies["std"].port
        system = f"/redfish/v1/Systems/{machine.name}"
        read = call(via, "GET", system)
        assert read.headers["Allow"] == "GET, PATCH"
        tag = read.headers["ETag"]
        pxe = {"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}
        assert call(via, "PATCH", system, pxe, headers={"If-Match": tag}).status == 204
        assert call(via, "PATCH", system, pxe, headers={"If-Match": tag}).status == 412
        login = call(
            via,
            "POST",
            "/redfish/v1/SessionService/Sessions",
            {"UserName": USERNAME, "Password": PASSWORD},
            auth=False,
        )
        assert login.headers["Location"].startswith("/redfish/v1/SessionService/Sessions/")
        assert call(via, "GET", "/redfish/v1/$metadata", auth=False).status == 200
    finally:
        host.stop()
