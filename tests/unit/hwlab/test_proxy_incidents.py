"""Vendor incident rules on proxied nodes are held to what the proxy can
show a client, as on emulated nodes (issue 36): an incident with no answer
over the proxy's protocol (it would fire, be logged as fired, and change no
answer) is refused with one line naming the rule, at ``hwlab fault`` time
(the lab's and the proxy host's ``add_faults``: nothing added) and in a lab
file (exit 2, one ``error:`` line per refused rule, nothing started)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas.fakes.faults import FaultRule
from bmaas.faults import InputError
from bmaas.hwlab.cli import cli as hwlab_cli
from bmaas.hwlab.proxy import ProxyHost, ProxySpec
from bmaas.hwlab.proxy.effects import RuleProblems, check_rule

IPMI_ONLY = "ipmi-node-busy"  # an in-session completion code (0xC0)
REDFISH_ONLY = "idrac10-power-on-conflict"


def incident(name: str, **kw: object) -> FaultRule:
    return FaultRule.from_dict({"effect": "incident", "incident": name, **kw})


@pytest.mark.parametrize(
    ("name", "protocol", "answers"),
    [(REDFISH_ONLY, "ipmi", "redfish"), (IPMI_ONLY, "redfish", "ipmi")],
)
@pytest.mark.parametrize("aimed", [{}, {"protocol": "*"}])
def test_an_incident_of_the_other_protocol_is_refused(
    name: str, protocol: str, answers: str, aimed: dict[str, str]
) -> None:
    with pytest.raises(InputError) as caught:
        check_rule(incident(name, **aimed), protocol, credentials=True, where="rule[0]", node="p1")
    text = str(caught.value)
    assert text.startswith("node 'p1': rule[0]: rule '")
    assert f"incident '{name}' answers over {answers} only" in text
    assert f"the node speaks {protocol} only: it would fire and never be seen" in text
    assert "\n" not in text


def test_an_incident_of_the_proxy_s_own_protocol_is_kept() -> None:
    check_rule(incident(REDFISH_ONLY), "redfish", credentials=False, where="r")
    check_rule(incident(IPMI_ONLY), "ipmi", credentials=True, where="r")
    check_rule(incident("ipmi-no-session-slot"), "ipmi", credentials=False, where="r")  # login


def test_an_in_session_ipmi_incident_still_needs_the_credentials() -> None:
    with pytest.raises(InputError, match="username and password"):
        check_rule(incident(IPMI_ONLY), "ipmi", credentials=False, where="r")


def test_the_host_refuses_every_bad_rule_at_once_and_adds_none() -> None:
    host = ProxyHost([ProxySpec("p1", "ipmi", "127.0.0.1", 623)])
    rules = [
        {"effect": "incident", "incident": REDFISH_ONLY},
        {"effect": "hang"},
        {"effect": "power_stuck"},
    ]
    with pytest.raises(RuleProblems) as caught:
        host.add_faults("p1", rules)
    assert [p.field for p in caught.value.problems] == ["rule[0]", "rule[2]"]
    assert "answers over redfish only" in str(caught.value)
    assert "\n" not in str(caught.value)  # the control API's one line
    assert host.proxies["p1"].plan.rules == []


def test_a_lab_file_names_every_refused_rule_of_a_proxied_node(tmp_path: Path) -> None:
    path = tmp_path / "lab.yaml"
    path.write_text(
        "nodes:\n"
        "  - name: p1\n"
        "    proxy: {protocol: ipmi, upstream: '127.0.0.1:9', username: u, password: pw}\n"
        "    faults:\n"
        f"      - {{effect: incident, incident: {REDFISH_ONLY}}}\n"
        f"      - {{effect: incident, incident: {IPMI_ONLY}}}\n"
        "      - {effect: incident, incident: vmedia-unavailable, protocol: redfish}\n"
    )
    state = tmp_path / "state"
    args = ["up", "--lab-file", str(path), "--state-dir", str(state)]
    result = CliRunner().invoke(hwlab_cli, args, catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"error: {path}:5: node 'p1': nodes[0].faults[0]: ")
    assert f"incident '{REDFISH_ONLY}' answers over redfish only" in lines[0]
    assert lines[1].startswith(f"error: {path}:7: node 'p1': nodes[0].faults[2]: ")
    assert "incident 'vmedia-unavailable' answers over redfish only" in lines[1]
    assert not (state / "hwlab.pid").exists()  # nothing started
