"""One Redfish engine answers every request of every shape, the default
``hwlab`` one included (issue 45): no shape falls through to a second
service, and the lab's Redfish server loads no second engine."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from bmaas.fakes.machine import FakeMachine
from bmaas.hwlab.http import Request
from bmaas.hwlab.redfish.bmc import Bmc
from bmaas.hwlab.redfish.shapes import names, resolve
from bmaas.hwlab.redfish.shapes.engine import serve
from bmaas.hwlab.redfish.shapes.state import ShapeState


def _bmc(name: str) -> Bmc:
    machine = FakeMachine("m1")
    found = resolve(name)
    bmc = Bmc(machine, username="u", password="p", system_id=found.system_id if found else None)
    if found is not None:
        bmc.shape = ShapeState(found, machine)
    return bmc


def _call(bmc: Bmc, method: str, target: str, body: Any = None) -> tuple[int, dict[str, str], Any]:
    raw = b"" if body is None else json.dumps(body).encode()
    code, headers, data = serve(bmc, bmc.shape, Request(method, target, "HTTP/1.1", [], raw), [])
    shown = json.loads(data) if data.startswith(b"{") else data
    return code, dict(headers), shown


@pytest.mark.parametrize("name", names())
def test_every_shape_answers_every_request_itself(name: str) -> None:
    bmc = _bmc(name)
    assert _call(bmc, "GET", "/redfish")[2] == {"v1": "/redfish/v1/"}
    code, headers, xml = _call(bmc, "GET", "/redfish/v1/$metadata")
    assert (code, headers["Content-Type"]) == (200, "application/xml")
    assert b"ComputerSystem.v1_13_0" in xml
    assert _call(bmc, "GET", "/redfish/v1/odata")[0] == 200
    root = _call(bmc, "GET", "/redfish/v1")[2]
    assert root["EventService"] == {"@odata.id": "/redfish/v1/EventService"}
    login = {"UserName": "u", "Password": "p"}
    code, headers, session = _call(bmc, "POST", "/redfish/v1/SessionService/Sessions", login)
    assert code == 201
    assert headers["Location"] == session["@odata.id"]
    assert bmc.session_for(headers["X-Auth-Token"]) is not None
    listed = _call(bmc, "GET", "/redfish/v1/SessionService/Sessions")
    assert listed[1]["Allow"] == "GET, POST"
    assert listed[2]["Members"] == [{"@odata.id": session["@odata.id"]}]
    assert _call(bmc, "DELETE", session["@odata.id"])[0] == 204
    assert bmc.sessions() == []
    missing = _call(bmc, "GET", "/redfish/v1/Nothing")
    assert (missing[0], missing[1]["OData-Version"]) == (404, "4.0")


@pytest.mark.parametrize("name", ["hwlab", "idrac9", "xcc"])
def test_a_boot_patch_names_every_bad_property_on_every_shape(name: str) -> None:
    bmc = _bmc(name)
    bad = {"Boot": {"BootSourceOverrideEnabled": "Sometimes", "Colour": "red"}, "AssetTag": "x"}
    code, _headers, body = _call(bmc, "PATCH", bmc.shape.shape.system_path, bad)
    assert code == 400
    ids = [i["MessageId"] for i in body["error"]["@Message.ExtendedInfo"]]
    assert ids == [
        "Base.1.8.PropertyNotWritable",
        "Base.1.8.PropertyUnknown",
        "Base.1.8.PropertyValueNotInList",
    ]


def test_the_redfish_lab_loads_no_second_engine() -> None:
    """sushy-tools' Flask application once served the default shape beside
    the shapes engine; the lab's server imports neither."""
    code = (
        "import sys, bmaas.hwlab.redfish.server; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'flask', 'sushy_tools', 'jinja2', 'werkzeug'}))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert loaded.stdout.strip() == "[]"
