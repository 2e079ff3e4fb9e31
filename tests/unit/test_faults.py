"""The fault taxonomy: codes, scopes, messages, pickling, chaining."""

from __future__ import annotations

import pickle

import pytest

from bmaas import faults
from bmaas.faults import (
    FAULT_CLASSES,
    Attempt,
    BmaasError,
    BMCAuthError,
    BMCBusy,
    BMCFault,
    BMCInternalError,
    BMCNotBack,
    BMCProtocolError,
    BMCTimeout,
    BMCUnreachable,
    BMCUpdating,
    BootFailure,
    InputError,
    LeaseLost,
    NoCandidates,
    NodeUnavailable,
    PowerFailure,
    PowerPending,
    ProvisionFailed,
    RequestRejected,
    RetryScope,
    SettingsNotApplied,
    SlotTimeout,
    TaskStuck,
    UnclassifiedFault,
    UnsupportedOperation,
)

SAME, OTHER, NEVER = RetryScope.SAME_NODE, RetryScope.OTHER_NODE, RetryScope.NEVER

EXPECTED = [
    (BmaasError, "bmaas_error", NEVER),
    (InputError, "input_error", NEVER),
    (BMCFault, "bmc_fault", OTHER),
    (BMCUnreachable, "bmc_unreachable", SAME),
    (BMCTimeout, "bmc_timeout", SAME),
    (BMCBusy, "bmc_busy", SAME),
    (BMCAuthError, "bmc_auth_error", OTHER),  # never here (accounts lock), elsewhere
    (BMCInternalError, "bmc_internal_error", SAME),
    (BMCProtocolError, "bmc_protocol_error", OTHER),
    (UnsupportedOperation, "unsupported_operation", OTHER),  # another node may have it
    (PowerFailure, "power_failure", OTHER),
    (BootFailure, "boot_failure", OTHER),
    (BMCUpdating, "bmc_updating", SAME),  # issue 51: ask later, never counted
    (SettingsNotApplied, "settings_not_applied", OTHER),  # never success
    (TaskStuck, "task_stuck", OTHER),  # never restarted here
    (RequestRejected, "request_rejected", NEVER),  # the request is wrong
    (BMCNotBack, "bmc_not_back", OTHER),
    (UnclassifiedFault, "unclassified_fault", OTHER),
    (SlotTimeout, "slot_timeout", SAME),
    (PowerPending, "power_pending", SAME),
    (NodeUnavailable, "node_unavailable", OTHER),
    (LeaseLost, "lease_lost", NEVER),
    (NoCandidates, "no_candidates", NEVER),
    (ProvisionFailed, "provision_failed", NEVER),
]

BMC_CLASSES = [cls for cls, _, _ in EXPECTED if issubclass(cls, BMCFault)]


def test_every_class_is_in_the_table() -> None:
    assert {cls for cls, _, _ in EXPECTED} == set(FAULT_CLASSES.values())
    assert set(FAULT_CLASSES) == {code for _, code, _ in EXPECTED}


@pytest.mark.parametrize(
    ("cls", "code", "scope"), EXPECTED, ids=lambda v: getattr(v, "__name__", v)
)
def test_code_and_scope(cls: type[BmaasError], code: str, scope: RetryScope) -> None:
    assert cls.code == code
    assert cls.retry is scope
    assert code == code.lower()
    assert " " not in code


def test_input_error_is_a_value_error() -> None:
    assert issubclass(InputError, ValueError)


@pytest.mark.parametrize("cls", BMC_CLASSES, ids=lambda c: c.__name__)
def test_bmc_fault_message_names_node_operation_address_elapsed(cls: type[BMCFault]) -> None:
    fault = cls(
        "details here",
        node="r1-n04",
        driver="ipmi",
        operation="power.get",
        address="10.0.0.4:623",
        elapsed=1.234,
    )
    text = str(fault)
    for part in ("r1-n04", "power.get", "ipmi", "10.0.0.4:623", "1.23s", "details here"):
        assert part in text, (part, text)


@pytest.mark.parametrize("cls", BMC_CLASSES, ids=lambda c: c.__name__)
def test_bmc_fault_pickles_with_attributes_and_cause(cls: type[BMCFault]) -> None:
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except OSError as exc:
            raise cls(
                "boom",
                node="n1",
                driver="redfish",
                operation="boot.set",
                address="https://bmc:8443",
                elapsed=0.5,
                status="503",
            ) from exc
    except BMCFault as fault:
        original = fault
    copy = pickle.loads(pickle.dumps(original))
    assert type(copy) is cls
    assert str(copy) == str(original)
    assert (copy.node, copy.driver, copy.operation, copy.address, copy.elapsed, copy.status) == (
        "n1",
        "redfish",
        "boot.set",
        "https://bmc:8443",
        0.5,
        "503",
    )
    assert copy.cause_text == "ConnectionRefusedError: [Errno 111] Connection refused"
    assert copy.to_dict()["code"] == cls.code


def test_busy_carries_retry_after_through_pickle() -> None:
    fault = BMCBusy("node busy", node="n1", operation="power.set", retry_after=2.5, status="0xC0")
    copy = pickle.loads(pickle.dumps(fault))
    assert copy.retry_after == 2.5
    assert "retry after 2.5s" in str(copy)
    assert "[0xC0]" in str(copy)


def test_internal_error_carries_message_id() -> None:
    fault = BMCInternalError("oops", node="n1", message_id="Base.1.8.InternalError")
    copy = pickle.loads(pickle.dumps(fault))
    assert copy.message_id == "Base.1.8.InternalError"
    assert "Base.1.8.InternalError" in str(copy)


def test_cause_keyword_sets_dunder_cause() -> None:
    cause = TimeoutError("timed out")
    fault = BMCTimeout("no answer", node="n1", cause=cause)
    assert fault.__cause__ is cause
    assert fault.cause_text == "TimeoutError: timed out"


def _parse_power(reply: dict[str, str]) -> str:
    try:
        return reply["PowerState"]
    except KeyError as exc:
        raise BMCProtocolError("missing PowerState", node="n1") from exc


def test_raise_from_keeps_cause() -> None:
    with pytest.raises(BMCProtocolError) as info:
        _parse_power({})
    assert isinstance(info.value.__cause__, KeyError)


def test_address_never_keeps_credentials() -> None:
    fault = BMCAuthError("no", node="n1", address="https://admin:hunter2@bmc.example:443/redfish")
    assert "hunter2" not in str(fault)
    assert "hunter2" not in repr(fault.to_dict())
    assert fault.address == "https://bmc.example:443/redfish"
    assert "hunter2" not in repr(pickle.loads(pickle.dumps(fault)).__dict__)


def test_input_error_names_file_line_field_node() -> None:
    err = InputError("must be 1-65535", source="inv.yaml", line=12, field="ipmi_port", node="n4")
    assert str(err) == "inv.yaml:12: node 'n4': ipmi_port: must be 1-65535"
    copy = pickle.loads(pickle.dumps(err))
    assert str(copy) == str(err)
    assert isinstance(copy, ValueError)


def test_node_unavailable_and_no_candidates_messages_and_pickle() -> None:
    nu = NodeUnavailable("held by request r7", node="n2", reason="claimed")
    assert str(nu) == "node n2 unavailable (claimed): held by request r7"
    assert str(pickle.loads(pickle.dumps(nu))) == str(nu)
    nc = NoCandidates("no node of class 'gpu'", request="r1")
    assert str(nc) == "request r1: no node of class 'gpu'"
    assert pickle.loads(pickle.dumps(nc)).request == "r1"


def test_provision_failed_lists_every_attempt_and_pickles() -> None:
    f1 = BMCTimeout("no answer", node="n1", operation="power.set", elapsed=3.0)
    f2 = PowerFailure("stayed off", node="n2", operation="power.set", elapsed=9.0)
    attempts = [Attempt.from_fault("n1", f1, 3.1), Attempt.from_fault("n2", f2, 9.2)]
    err = ProvisionFailed("retries exhausted", request="r1", attempts=attempts, cause=f2)
    text = str(err)
    assert "request r1 failed after 2 attempt(s)" in text
    assert "n1: BMCTimeout after 3.10s" in text
    assert "n2: PowerFailure after 9.20s" in text
    copy = pickle.loads(pickle.dumps(err))
    assert copy.attempts == attempts
    assert copy.to_dict()["attempts"][1]["fault_code"] == "power_failure"
    assert err.__cause__ is f2


def test_no_fault_class_has_a_credential_attribute() -> None:
    for cls in FAULT_CLASSES.values():
        fault = cls("x")
        for name in vars(fault):
            assert not any(w in name.lower() for w in ("password", "token", "secret", "key"))


def test_module_docstring_draws_the_whole_tree() -> None:
    doc = faults.__doc__ or ""
    for cls in FAULT_CLASSES.values():
        assert cls.__name__ in doc


def test_a_slot_timeout_is_not_a_bmc_fault_and_never_says_busy() -> None:
    fault = SlotTimeout(
        "4 of 4 in flight", node="n1", address="redfish:https://u:p@bmc", waited=2.5
    )
    assert not isinstance(fault, BMCFault)
    assert fault.address == "redfish:https://bmc"
    assert str(fault).startswith("n1 via redfish:https://bmc after waiting 2.50s: ")
    assert "busy" not in str(fault).lower()
    assert pickle.loads(pickle.dumps(fault)).waited == 2.5


def test_a_fault_has_its_scope_when_only_the_taxonomy_is_imported() -> None:
    """bmaas.faults imports nothing of the table (no cycle); the package loads
    the table, which registers the derivation: a fresh interpreter that
    imports only the taxonomy still reads every scope from the table."""
    import subprocess
    import sys

    code = (
        "from bmaas.faults import BMCBusy, BMCAuthError, PowerFailure;"
        "print(BMCBusy.retry, BMCAuthError('x').retry, PowerFailure.retry)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["same_node", "other_node", "other_node"]


@pytest.mark.parametrize(
    ("driver", "address", "via"),
    [
        # the label the gate, the pool and the silence book name a BMC by
        ("redfish", "redfish:http://10.0.0.5:8000", "via redfish http://10.0.0.5:8000:"),
        ("ipmi", "ipmi:10.0.0.4:623", "via ipmi 10.0.0.4:623:"),
        # the driver's own address, as most faults carry it
        ("redfish", "https://10.0.0.9", "via redfish https://10.0.0.9:"),
        ("ipmi", "[fd00::4]:623", "via ipmi [fd00::4]:623:"),
    ],
)
def test_a_fault_names_the_protocol_once(driver: str, address: str, via: str) -> None:
    """Issue 48: a silent BMC's "no answer" said ``via redfish redfish:http://...``."""
    fault = BMCTimeout("no answer", node="n1", driver=driver, operation="power.get")
    fault.address = address
    assert str(fault).startswith(f"n1: power.get {via} BMC did not answer in time")
    assert str(fault).count(driver) == 1
