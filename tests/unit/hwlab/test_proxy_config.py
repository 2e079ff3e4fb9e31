"""What a proxy accepts: rules it can carry out, proxy specs, lab files with
proxied nodes, and the control methods that have no sockets behind them."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from bmaas.driver import Operation
from bmaas.fakes.faults import Effect, FaultRule, Layer
from bmaas.faults import (
    BMCAuthError,
    BMCBusy,
    BMCTimeout,
    BMCUnreachable,
    InputError,
)
from bmaas.hwlab.lab import Lab
from bmaas.hwlab.labspec import load_labfile
from bmaas.hwlab.proxy import ProxyHost, ProxySpec
from bmaas.hwlab.proxy.effects import (
    ACKNOWLEDGED,
    EXPECTED_FAULTS,
    OPAQUE,
    SUPPORTED,
    check_rule,
    expected_fault,
    supported_rules,
)
from bmaas.hwlab.proxy.serve import load_rules
from bmaas.hwlab.proxy.spec import parse_hostport, parse_proxy, parse_upstream
from bmaas.secrets import Secret


def rule(**kw: object) -> FaultRule:
    return FaultRule.from_dict(kw)


# -- rules ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("effect", "protocol"),
    [
        (effect, protocol)
        for protocol in ("ipmi", "redfish")
        for effect in Effect
        # those a proxy carries out by acknowledging: test_proxy_power_stuck.py
        if effect.layer is Layer.HARDWARE and effect not in ACKNOWLEDGED[protocol]
    ],
)
def test_hardware_effects_are_refused_naming_the_rule(effect: Effect, protocol: str) -> None:
    params = {"seconds": 3} if effect is Effect.SLOW_POWER else {}
    with pytest.raises(InputError) as info:
        check_rule(
            rule(effect=str(effect), name="stuck-psu", **params),
            protocol,
            credentials=True,
            where="rules[2]",
        )
    text = str(info.value)
    assert "stuck-psu" in text
    assert "rules[2]" in text
    assert "hardware" in text
    assert "proxy" in text


@pytest.mark.parametrize(
    "effect", ["busy", "internal_error", "unsupported", "auth_fail", "malformed_reply"]
)
def test_ipmi_bmc_effects_in_session_need_credentials(effect: str) -> None:
    with pytest.raises(InputError, match="username and password"):
        check_rule(rule(effect=effect, operation="power.*"), "ipmi", credentials=False, where="r")
    with pytest.raises(InputError, match="username and password"):
        check_rule(rule(effect=effect), "ipmi", credentials=False, where="r")  # '*' too
    # The login is in the clear: no credentials needed there.
    check_rule(rule(effect=effect, operation="login"), "ipmi", credentials=False, where="r")
    # With credentials, or on Redfish, anything goes.
    check_rule(rule(effect=effect, operation="power.*"), "ipmi", credentials=True, where="r")
    check_rule(rule(effect=effect, operation="power.*"), "redfish", credentials=False, where="r")


def test_ipmi_wire_rules_without_credentials_must_be_able_to_match() -> None:
    check_rule(rule(effect="hang"), "ipmi", credentials=False, where="r")
    check_rule(rule(effect="drop", operation=OPAQUE), "ipmi", credentials=False, where="r")
    check_rule(rule(effect="bmc_reboot", operation="login"), "ipmi", credentials=False, where="r")
    with pytest.raises(InputError, match="never matches"):
        check_rule(rule(effect="hang", operation="power.get"), "ipmi", credentials=False, where="r")
    # A rule aimed at the other protocol never fires here: harmless.
    check_rule(
        rule(effect="busy", operation="power.get", protocol="redfish"),
        "ipmi",
        credentials=False,
        where="r",
    )


@pytest.mark.parametrize("operation", ["boot.get", "boot_progress.get", "boot.g*"])
def test_redfish_rules_that_can_never_fire_are_refused(operation: str) -> None:
    with pytest.raises(InputError, match="never matches") as info:
        check_rule(rule(effect="busy", operation=operation), "redfish", credentials=True, where="r")
    assert "power.get" in str(info.value)  # says what to write instead
    assert "\n" not in str(info.value)


def test_redfish_rules_that_can_fire_are_kept() -> None:
    for operation in ("*", "power.get", "boot.*", "boot.set", "vmedia.*", "login", "probe"):
        check_rule(rule(effect="busy", operation=operation), "redfish", credentials=True, where="r")
    # aimed at IPMI only: never fires on Redfish, harmless
    check_rule(
        rule(effect="busy", operation="boot.get", protocol="ipmi"),
        "redfish",
        credentials=True,
        where="r",
    )


@pytest.mark.parametrize("protocol", ["ipmi", "redfish"])
def test_session_limit_is_refused_a_proxy_cannot_count_sessions(protocol: str) -> None:
    limit = rule(effect="session_limit", sessions=2, operation="login", name="two-slots")
    with pytest.raises(InputError) as info:
        check_rule(limit, protocol, credentials=True, where="rules[0]")
    text = str(info.value)
    assert "two-slots" in text
    assert "rules[0]" in text
    assert "cannot count" in text
    assert Effect.SESSION_LIMIT not in SUPPORTED[protocol]


def test_expected_faults_cover_every_proxy_effect_but_duplicate() -> None:
    proxy_effects = {e for e in Effect if e.layer is not Layer.HARDWARE} - {Effect.SESSION_LIMIT}
    # and power_stuck on both: the Reset or Chassis Control acknowledged, never relayed
    assert proxy_effects | {Effect.POWER_STUCK} == SUPPORTED["ipmi"]
    # and on Redfish the firmware update effects: SimpleUpdate answered with a
    # task the proxy serves (bmaas.hwlab.proxy.updates)
    updates = {
        Effect.TASK_HANG,
        Effect.UPDATE_REJECTED,
        Effect.VERSION_UNCHANGED,
        Effect.UPDATE_REBOOT,
    }
    assert proxy_effects | {Effect.POWER_STUCK} | updates == SUPPORTED["redfish"]
    # an incident's fault is the incident's own (bmaas.fakes.incidents), not the effect's
    assert set(EXPECTED_FAULTS) == proxy_effects - {Effect.DUPLICATE, Effect.INCIDENT}
    assert expected_fault(Effect.DUPLICATE, "ipmi", "power.set") is None
    assert expected_fault(Effect.BUSY, "redfish", "power.get") is BMCBusy
    assert expected_fault(Effect.AUTH_FAIL, "ipmi", "login") is BMCAuthError
    assert expected_fault(Effect.HANG, "ipmi", "power.get") is BMCTimeout
    assert expected_fault(Effect.HANG, "ipmi", Operation.LOGIN) is BMCUnreachable
    assert expected_fault(Effect.HANG, "redfish", Operation.LOGIN) is BMCTimeout
    assert expected_fault(Effect.BMC_REBOOT, "redfish", "probe") is BMCUnreachable


def test_profile_rules_the_proxy_cannot_do_are_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spec = ProxySpec("n1", "ipmi", "127.0.0.1", 623)
    rules = [rule(effect="power_stuck", name="psu"), rule(effect="hang"), rule(effect="busy")]
    with caplog.at_level(logging.WARNING):
        kept = supported_rules(rules, spec, why="profile rule")
    assert [r.effect for r in kept] == [Effect.HANG]
    assert "psu" in caplog.text
    assert "username and password" in caplog.text


def test_load_rules_from_file_and_profile(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("seed: 11\nrules:\n  - {effect: busy, operation: power.get}\n")
    spec = ProxySpec("n1", "redfish", "127.0.0.1", 8000)
    rules, seed = load_rules(spec, rules_file=str(path))
    assert seed == 11
    assert [r.effect for r in rules] == [Effect.BUSY]
    rules, seed = load_rules(spec, rules_file=str(path), profile="dead-bmc", seed=3)
    assert seed == 3
    assert [r.effect for r in rules] == [Effect.HANG, Effect.BUSY]
    # all hardware: a proxy does only power_stuck (acknowledged, never relayed)
    rules, _ = load_rules(spec, profile="brownout")
    assert {r.effect for r in rules} <= {Effect.POWER_STUCK}
    ipmi = ProxySpec("n1", "ipmi", "127.0.0.1", 623, username="u", password=Secret("p"))
    assert {r.effect for r in load_rules(ipmi, profile="brownout")[0]} <= {Effect.POWER_STUCK}
    # without the credentials an IPMI proxy cannot answer in the session: nothing
    bare = ProxySpec("n1", "ipmi", "127.0.0.1", 623)
    assert load_rules(bare, profile="brownout")[0] == []


# -- specs ------------------------------------------------------------------------


def test_parse_hostport_and_upstream() -> None:
    assert parse_hostport("10.0.0.1", default_port=623, field="f") == ("10.0.0.1", 623)
    assert parse_hostport("[::1]:6230", default_port=623, field="f") == ("::1", 6230)
    assert parse_upstream("bmc1:6230", "ipmi") == ("bmc1", 6230, False)
    assert parse_upstream("https://bmc1", "redfish") == ("bmc1", 443, True)
    assert parse_upstream("http://bmc1:8000/", "redfish") == ("bmc1", 8000, False)
    assert parse_upstream("bmc1", "redfish") == ("bmc1", 80, False)
    with pytest.raises(InputError, match="port"):
        parse_hostport("bmc:99999", default_port=0, field="--listen")
    with pytest.raises(InputError, match="scheme"):
        parse_upstream("https://bmc1", "ipmi")
    with pytest.raises(InputError, match="without a path"):
        parse_upstream("https://bmc1/redfish/v1", "redfish")


def test_proxy_spec_never_shows_its_password() -> None:
    spec = ProxySpec("n1", "ipmi", "h", 623, username="admin", password=Secret("pa55-word"))
    assert "pa55-word" not in repr(spec)
    assert "pa55-word" not in str(spec)
    assert spec.credentials


def test_parse_proxy_errors_name_the_field() -> None:
    with pytest.raises(InputError, match=r"proxy\.protocol: must be ipmi or redfish"):
        parse_proxy("n1", {"protocol": "snmp", "upstream": "h"})
    with pytest.raises(InputError, match=r"proxy\.upstream: is required"):
        parse_proxy("n1", {"protocol": "ipmi"})
    with pytest.raises(InputError, match=r"proxy\.stock: must be one of"):
        parse_proxy("n1", {"protocol": "ipmi", "stock": "sushy"})
    with pytest.raises(InputError, match=r"proxy\.bogus: unknown key"):
        parse_proxy("n1", {"protocol": "ipmi", "upstream": "h", "bogus": 1})
    with pytest.raises(InputError, match=r"proxy\.domain: only with 'stock'"):
        parse_proxy("n1", {"protocol": "ipmi", "upstream": "h", "domain": "d"})
    spec = parse_proxy(
        "n1", {"protocol": "redfish", "upstream": "https://b:8443", "verify_ca": False}
    )
    assert (spec.upstream, spec.verify_ca, spec.serves_tls) == ("https://b:8443", False, True)


LABFILE = """\
seed: 5
nodes:
  - name: real-01
    proxy: {protocol: ipmi, upstream: "10.1.1.1:623", username: root, password: calvin}
    faults:
      - {effect: busy, operation: power.get}
  - name: vm-01
    proxy: {protocol: ipmi, stock: vbmc, domain: test}
  - name: rf-01
    credentials: {username: ops, password: opspw}
    proxy: {protocol: redfish, stock: sushy}
"""


def test_lab_file_declares_proxied_nodes(tmp_path: Path) -> None:
    path = tmp_path / "lab.yaml"
    path.write_text(LABFILE)
    spec = load_labfile(str(path))
    real, vm, rf = spec.nodes
    assert real.proxy is not None
    assert real.proxy.upstream == "10.1.1.1:623"
    assert real.protocols == ("ipmi",)
    assert real.username == "root"
    assert real.password.reveal() == "calvin"
    assert vm.proxy is not None
    assert vm.proxy.stock == "vbmc"
    assert vm.proxy.password.reveal() == "password"  # virtualbmc's default
    assert rf.proxy is not None
    assert rf.proxy.username == "ops"
    assert rf.protocols == ("redfish",)


@pytest.mark.parametrize(
    ("fragment", "message"),
    [
        (
            "    faults: [{effect: power_lost, name: psu}]\n",
            r"lab\.yaml:\d+: node 'real-01': nodes\[0\]\.faults\[0\]: rule 'psu'",
        ),
        ("    count: 2\n", r"nodes\[0\]\.count: a proxied node fronts one BMC"),
        ("    credentials: [x]\n", r"nodes\[0\]\.credentials: must be a mapping"),
    ],
)
def test_lab_file_proxy_errors_name_file_and_field(
    tmp_path: Path, fragment: str, message: str
) -> None:
    path = tmp_path / "lab.yaml"
    name = "'real-{n:02d}'" if "count" in fragment else "real-01"
    path.write_text(
        f"nodes:\n  - name: {name}\n    proxy: {{protocol: ipmi, upstream: h}}\n{fragment}"
    )
    with pytest.raises(InputError, match=message):
        load_labfile(str(path))


# -- the host's control methods, without starting anything --------------------------


def test_host_refuses_what_it_cannot_do_and_adds_the_rest() -> None:
    ipmi = ProxySpec("n1", "ipmi", "127.0.0.1", 623)
    host = ProxyHost([ipmi])
    with pytest.raises(InputError, match="hardware"):
        host.add_faults("n1", [{"effect": "hang"}, {"effect": "boot_crash"}])
    assert host.proxies["n1"].plan.rules == []  # all or nothing
    with pytest.raises(InputError, match="session keys"):  # acknowledged in session: keys
        host.add_faults("n1", [{"effect": "power_stuck", "operation": "power.set"}])
    with pytest.raises(InputError, match="username and password"):
        host.add_faults("n1", [{"effect": "busy", "operation": "power.get"}])
    assert host.add_faults("n1", [{"effect": "busy", "operation": "login"}]) == 1
    with pytest.raises(InputError, match="no proxied node 'n2'"):
        host.add_faults("n2", [{"effect": "hang"}])
    with pytest.raises(InputError, match="cannot switch its power"):
        host.power("n1", "on")
    host.clear_faults()
    assert host.proxies["n1"].plan.rules == []
    with pytest.raises(InputError, match="hardware"):
        ProxyHost([ipmi], rules={"n1": [rule(effect="boot_crash")]})


def test_a_lab_profile_gives_proxied_nodes_only_what_a_proxy_can_do(tmp_path: Path) -> None:
    path = tmp_path / "lab.yaml"
    path.write_text(
        "profile: chaos\nnodes:\n"
        "  - {name: p1, proxy: {protocol: ipmi, upstream: h}}\n"
        "  - {name: r1, proxy: {protocol: redfish, upstream: 'http://h:80'}}\n"
    )
    lab = Lab(load_labfile(str(path)), tmp_path / "state")
    for node in lab.spec.nodes:
        assert node.proxy is not None
        for item in node.rules:
            check_rule(item, node.proxy.protocol, credentials=node.proxy.credentials, where="r")
    assert any(node.rules for node in lab.spec.nodes)  # chaos at these shares picks every node
