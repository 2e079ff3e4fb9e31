"""A node's driver_info through the bmaas interfaces' ``validate`` inside
Ironic (issue 36): every problem at once, one line each naming its key, as
Ironic's own exception: ``MissingParameterValue`` when only required keys
are missing, ``InvalidParameterValue`` (its base class) when anything else
is wrong too; never the password. Runs in the Ironic venv
(``scripts/ironic-env.sh``, hence the ``ironic`` mark); no Ironic service is
started (a stand-in task), so it is no group of tests/ironic/."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.ironicscript import run_json

pytestmark = pytest.mark.ironic

_VALIDATE = """
import json, sys, types
import ironic.conf
from ironic.common import exception
from bmaas.drivers.ironic import calls
from bmaas.drivers.ironic.management import BmaasManagement
from bmaas.drivers.ironic.power import BmaasPower
calls.conf.CONF([], project="ironic", default_config_files=[])
driver, info = sys.argv[1], json.loads(sys.argv[2])
node = types.SimpleNamespace(name="n1", uuid="u-1", driver=driver, driver_info=info)
task = types.SimpleNamespace(node=node, shared=False)
out = []
for iface in (BmaasPower(), BmaasManagement()):
    try:
        iface.validate(task)
    except exception.IronicException as exc:
        out.append({
            "class": type(exc).__name__,
            "invalid": isinstance(exc, exception.InvalidParameterValue),
            "text": str(exc),
        })
    else:
        out.append({"class": None})
print(json.dumps(out))
"""


def _validate(driver: str, info: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = run_json(_VALIDATE, driver, json.dumps(info))
    return result


def test_many_bad_keys_are_one_invalid_parameter_value_with_a_line_each() -> None:
    info = {
        "ipmi_port": "nope",
        "ipmi_pasword": "hunter2",
        "ipmi_cipher_suite": 0,
        "ipmi_priv_level": "root",
        "ipmi_password": ["hunter2"],
        "deploy_kernel": "file:///k",
    }
    for answer in _validate("bmaas-ipmi", info):  # the power and the management interface
        assert answer["class"] == "InvalidParameterValue", answer
        head, *lines = answer["text"].splitlines()
        assert head.startswith("[bmaas input_error retry=never] node 'n1': driver_info: 6 problems")
        assert [line.split(": ")[1] for line in lines] == [
            "driver_info.ipmi_port",
            "driver_info.ipmi_pasword",
            "driver_info.ipmi_cipher_suite",
            "driver_info.ipmi_priv_level",
            "driver_info.ipmi_password",
            "driver_info.ipmi_address",
        ]
        assert "hunter2" not in answer["text"]


def test_only_missing_keys_is_missing_parameter_value() -> None:
    for answer in _validate("bmaas-redfish", {"redfish_address": "https://bmc", "x": 1}):
        assert answer["class"] == "MissingParameterValue", answer
        assert answer["invalid"]  # Ironic's MissingParameterValue is an InvalidParameterValue
        head, *lines = answer["text"].splitlines()
        assert "driver_info: 2 problems (redfish_username, redfish_password)" in head
        assert lines == [
            "node 'n1': driver_info.redfish_username: is required",
            "node 'n1': driver_info.redfish_password: is required",
        ]


def test_one_problem_stays_one_line_and_good_info_validates() -> None:
    (power, _mgmt) = _validate("bmaas-ipmi", {"ipmi_address": "10.0.0.5", "ipmi_port": 0})
    assert power["class"] == "InvalidParameterValue"
    assert "\n" not in power["text"]
    assert "node 'n1': driver_info.ipmi_port: must be a port" in power["text"]
    good = _validate("bmaas-ipmi", {"ipmi_address": "10.0.0.5", "ipmi_password": "pw"})
    assert good == [{"class": None}, {"class": None}]
