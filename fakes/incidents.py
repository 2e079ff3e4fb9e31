"""Field incidents: what real BMCs answer when they fail in documented ways.

A vendor incident is data, not a code path: an answer per protocol (the
vendor's status, ``error.code`` and ``@Message.ExtendedInfo`` as the cited
reports show them; an IPMI completion code or RMCP+ login status) and a
trigger (which operation, and a power window: "for 60 s after a power-off",
"while the system is in POST after a power-on"). hwlab serves them through
its one effect engine as the ``incident`` effect (:mod:`bmaas.fakes.effects`):
``{effect: incident, incident: idrac10-power-on-conflict}`` takes the
incident's trigger as the rule's defaults, and the protocol answer tables
(:mod:`bmaas.hwlab.answers`) put the body below on the wire. Vendor profiles
(:mod:`bmaas.hwlab.profiles`) group them; ``hwlab effects`` lists them with their
sources.

Every row names its source: an Ironic bug or release note, a sushy test, a
DMTF or vendor message registry, or the public report the body was taken
from. Where a report quotes only the MessageId, the message text is the
registry's format with its arguments filled in.

``fault`` is what a bmaas driver raises for one call that meets the
incident (None: the call succeeds), and ``outcome`` is what happens through
bmaas's retry within a budget; the fault matrix asserts both.

Two incidents of the issue are not answers and live elsewhere: a BMC that
reboots for a firmware update is the ``bmc_reboot`` effect (the ``firmware
update`` rows of the vendor profiles), and the session-count trigger of
iDRAC's RAC0218 is the generic ``session_limit`` effect (built apart); the
RAC0218 body is here, answerable to a login.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from bmaas.faults import (
    BMCBusy,
    BMCFault,
    BMCInternalError,
    UnsupportedOperation,
)

__all__ = ["INCIDENTS", "Incident", "RedfishReply", "Trigger", "dell_body", "ilo_body"]


@dataclasses.dataclass(frozen=True)
class RedfishReply:
    """One Redfish error answer, exactly as the vendor sends it."""

    status: int
    body: Mapping[str, Any]
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def message_ids(self) -> list[str]:
        info = self.body.get("error", {}).get("@Message.ExtendedInfo", [])
        return [str(m["MessageId"]) for m in info if "MessageId" in m]


@dataclasses.dataclass(frozen=True)
class Trigger:
    """When the vendor gives the answer: an operation glob, and optionally a
    power window — the machine has been ``power`` ("on", "off", or "changed":
    either, since its last transition) for less than ``within`` seconds."""

    operation: str
    power: str | None = None
    within: float | None = None
    what: str = ""


@dataclasses.dataclass(frozen=True)
class Incident:
    name: str
    vendor: str
    summary: str
    trigger: Trigger
    #: where the answer and the trigger come from
    source: str
    redfish: RedfishReply | None = None
    #: IPMI completion code for an in-session request
    ipmi_code: int | None = None
    #: RMCP+ status of a refused Open Session (a login-time incident)
    rmcp_status: int | None = None
    #: the BMC carries the request out and answers this anyway: the answer a
    #: resent copy gets once the first copy has acted ("already on")
    executes: bool = False
    #: what a bmaas driver raises for one call that meets it (None: success)
    fault: type[BMCFault] | None = None
    #: what happens through bmaas (asserted by the fault matrix)
    outcome: str = ""

    @property
    def protocols(self) -> tuple[str, ...]:
        found = []
        if self.redfish is not None:
            found.append("redfish")
        if self.ipmi_code is not None or self.rmcp_status is not None:
            found.append("ipmi")
        return tuple(found)


def dell_body(
    message_id: str,
    message: str,
    resolution: str,
    severity: str,
    code: str = "Base.1.12.GeneralError",
) -> dict[str, Any]:
    """An iDRAC error body: ``Base.x.GeneralError`` around one ExtendedInfo
    entry (the shape of every iDRAC answer quoted below)."""
    return {
        "error": {
            "@Message.ExtendedInfo": [
                {
                    "Message": message,
                    "MessageArgs": [],
                    "MessageArgs@odata.count": 0,
                    "MessageId": message_id,
                    "RelatedProperties": [],
                    "RelatedProperties@odata.count": 0,
                    "Resolution": resolution,
                    "Severity": severity,
                }
            ],
            "code": code,
            "message": "A general error has occurred. See ExtendedInfo for more information",
        }
    }


def ilo_body(message_id: str, *args: str) -> dict[str, Any]:
    """An iLO 5 error body: ``iLO.0.10.ExtendedInfo`` with MessageId and
    MessageArgs only (iLO leaves the text to its registry)."""
    return {
        "error": {
            "code": "iLO.0.10.ExtendedInfo",
            "message": "See @Message.ExtendedInfo for more information.",
            "@Message.ExtendedInfo": [{"MessageArgs": list(args), "MessageId": message_id}],
        }
    }


def _base_body(
    message_id: str, message: str, resolution: str, severity: str, *args: str
) -> dict[str, Any]:
    """A DMTF-shaped body, as bmcweb (OpenBMC) and Supermicro send them."""
    return {
        "error": {
            "code": "Base.1.8.GeneralError",
            "message": "A general error has occurred. See ExtendedInfo for more information.",
            "@Message.ExtendedInfo": [
                {
                    "@odata.type": "#Message.v1_1_1.Message",
                    "MessageId": message_id,
                    "Message": message,
                    "MessageArgs": list(args),
                    "Severity": severity,
                    "Resolution": resolution,
                }
            ],
        }
    }


_SUPERMICRO_LICENCE = {
    "error": {
        "code": "Base.v1_4_0.GeneralError",
        "Message": "A general error has occurred. See ExtendedInfo for more information.",
        "@Message.ExtendedInfo": [
            {
                "MessageId": "SMC.1.0.OemLicenseNotPassed",
                "Severity": "Warning",
                "Resolution": "Please activate at least one license in above message.",
                "Message": "Not licensed to perform this request. The following licenses "
                "DCMS  were needed",
                "MessageArgs": ["DCMS "],
                "RelatedProperties": [""],
            }
        ],
    }
}

_IDRAC10_CONFLICT = {
    "error": {
        "@Message.ExtendedInfo": [
            {
                "Message": "The parameter 'ResetType' with the requested value of 'On' does "
                "not meet the constraints of the implementation.",
                "MessageArgs": ["ResetType", "On"],
                "MessageArgs@odata.count": 2,
                "MessageId": "Base.1.18.ActionParameterValueConflict",
                "RelatedProperties": [],
                "RelatedProperties@odata.count": 0,
                "Resolution": "Change the parameter value to one that meets the constraints "
                "of the implementation and resubmit the request.",
                "Severity": "Warning",
            }
        ],
        "code": "Base.1.18.GeneralError",
        "message": "A general error has occurred. See ExtendedInfo for more information",
    }
}

_POWER_CHANGE = "power.set"

#: the catalogue, by name
INCIDENTS: dict[str, Incident] = {
    i.name: i
    for i in (
        Incident(
            "idrac10-power-on-conflict",
            "idrac10",
            "409 ActionParameterValueConflict on ComputerSystem.Reset On for up to ~60 s "
            "after a power-off",
            Trigger(_POWER_CHANGE, "off", 60.0, "a power-on within 60 s of the power-off"),
            "Ironic bug 2162995 (release note redfish-power-on-conflict-retry, "
            "[redfish]power_on_conflict_retry_*); DMTF Base 1.18 ActionParameterValueConflict",
            RedfishReply(409, _IDRAC10_CONFLICT),
            fault=BMCBusy,
            outcome="retried on the same node with backoff; on once the window closes",
        ),
        Incident(
            "ilo-post-window",
            "ilo5",
            "400 UnableToModifyDuringSystemPOST on a boot override while the system is in POST",
            Trigger("boot.set", "on", 20.0, "a boot change within 20 s of a power-on (POST)"),
            "Ironic bug 2136275 (release note redfish-post-boot-retry, "
            "[redfish]post_boot_retry_*); HPE iLO 5 message registry iLO.2.18",
            RedfishReply(
                400, ilo_body("iLO.2.18.UnableToModifyDuringSystemPOST", "BootSourceOverrideTarget")
            ),
            fault=BMCBusy,
            outcome="retried on the same node with backoff; applied once POST ends",
        ),
        Incident(
            "ilo-settling",
            "ilo5",
            "400 InvalidOperationForSystemState while a previous power change settles",
            Trigger(_POWER_CHANGE, "changed", 5.0, "a power change within 5 s of the last one"),
            "sushy connector check_retry_on_exception (test_op_retry_on_server_400_ilo_not_ready); "
            "HPE iLO 5 message registry iLO.2.16 InvalidOperationForSystemState",
            RedfishReply(400, ilo_body("iLO.2.16.InvalidOperationForSystemState")),
            fault=BMCBusy,
            outcome="power re-read: not there yet, so retried with backoff until it settles",
        ),
        Incident(
            "ilo-already-on",
            "ilo5",
            "400 InvalidOperationForSystemState ['Power is on'] to an On the node already took",
            Trigger(_POWER_CHANGE, what="a resent On whose first copy turned the node on"),
            "Ironic release note catch-redfish-409 (2025-10, commit 3e778ef95); "
            "HPE iLO 5 registry ('attempting to turn the power off when it is already off')",
            RedfishReply(400, ilo_body("iLO.2.16.InvalidOperationForSystemState", "Power is on")),
            executes=True,
            outcome="power re-read: already on, so success",
        ),
        Incident(
            "idrac-already-on",
            "idrac9",
            "409 PSU501 'Server is already powered ON.' to an On the node already took",
            Trigger(_POWER_CHANGE, what="a resent On whose first copy turned the node on"),
            "Ironic release note catch-redfish-409 (2025-10); body from "
            "dell/dellemc-openmanage-ansible-modules#115 (IDRAC.2.1.PSU501)",
            RedfishReply(
                409,
                dell_body(
                    "IDRAC.2.1.PSU501",
                    "Server is already powered ON.",
                    "No response action is required.",
                    "Informational",
                    "Base.1.5.GeneralError",
                ),
            ),
            executes=True,
            outcome="power re-read: already on, so success",
        ),
        Incident(
            "idrac-lc-busy",
            "idrac9",
            "400 SYS518: the Lifecycle Controller is still busy with a previous operation",
            Trigger("boot.set", "changed", 10.0, "a boot change within 10 s of a power change"),
            "sushy connector check_retry_on_exception (test_op_retry_on_server_500_sys518, "
            "IDRAC.2.7.SYS518); message text paraphrased, the reports quote the id only",
            RedfishReply(
                400,
                dell_body(
                    "IDRAC.2.7.SYS518",
                    "iDRAC is not ready: the Lifecycle Controller is busy with a previous "
                    "operation.",
                    "Wait until the previous operation completes and retry.",
                    "Warning",
                ),
            ),
            fault=BMCBusy,
            outcome="retried on the same node with backoff",
        ),
        Incident(
            "idrac-session-limit",
            "idrac9",
            "503 RAC0218 'The maximum number of user sessions is reached.' on login",
            Trigger("login", what="a login past the session count (session_limit effect)"),
            "stmcginnis/gofish#75 and bb-Ricardo/check_redfish#89 (IDRAC.2.1.RAC0218)",
            RedfishReply(
                503,
                dell_body(
                    "IDRAC.2.1.RAC0218",
                    "The maximum number of user sessions is reached.",
                    "Close one or more sessions before opening another session.",
                    "Informational",
                    "Base.1.5.GeneralError",
                ),
            ),
            fault=BMCBusy,
            outcome="retried on the same node with backoff; never an auth error",
        ),
        Incident(
            "idrac-licence",
            "idrac9",
            "403 LIC501 'A required license is missing or expired.' on a licence-gated feature",
            Trigger("vmedia.*", what="virtual media without an iDRAC Enterprise licence"),
            "dell/dellemc-openmanage-ansible-modules (LIC501 treated as 'skipped'); "
            "Dell iDRAC event and error message registry LIC501",
            RedfishReply(
                403,
                dell_body(
                    "IDRAC.2.8.LIC501",
                    "A required license is missing or expired.",
                    "Obtain an appropriate license and try again, or contact your service "
                    "provider for more details.",
                    "Warning",
                ),
            ),
            fault=UnsupportedOperation,
            outcome="unsupported at once: no retry, never BMCAuthError",
        ),
        Incident(
            "supermicro-licence",
            "supermicro",
            "403 SMC OemLicenseNotPassed 'Not licensed to perform this request ... DCMS'",
            Trigger("vmedia.*", what="a DCMS-licensed feature without the licence"),
            "metal-stack/go-hal#67 (verbatim body); Supermicro SFT-DCMS-SINGLE licence",
            RedfishReply(403, _SUPERMICRO_LICENCE),
            fault=UnsupportedOperation,
            outcome="unsupported at once: no retry, never BMCAuthError",
        ),
        Incident(
            "ilo-licence",
            "ilo5",
            "400 iLO.2.14.LicenseKeyRequired on virtual media without an iLO Advanced licence",
            Trigger("vmedia.*", what="scripted virtual media on iLO Standard"),
            "HPE iLO 5 message registry iLO.2.14 LicenseKeyRequired (the body as "
            "Cray-HPE/hms-capmc's tests quote it, MIT; iLO answers its registry's errors 400)",
            RedfishReply(400, ilo_body("iLO.2.14.LicenseKeyRequired")),
            fault=UnsupportedOperation,
            outcome="unsupported at once: no retry, never counted",
        ),
        Incident(
            "xcc-licence",
            "xcc",
            "405 on remote media without the XCC licence tier that has it",
            Trigger("vmedia.*", what="virtual media on an XCC without the remote media tier"),
            "issue 47 finding 8 (a licence refusal answered 405; the recorded tree is not "
            "in tests/fixtures): DMTF Base registry body, as XCC answers its refusals "
            "(lenovo/python-redfish-lenovo#308 quotes one)",
            RedfishReply(
                405,
                _base_body(
                    "Base.1.8.OperationNotAllowed",
                    "The HTTP method is not allowed on this resource.",
                    "Upgrade the XClarity Controller licence to one with remote media.",
                    "Critical",
                ),
            ),
            fault=UnsupportedOperation,
            outcome="unsupported at once: no retry, never counted",
        ),
        Incident(
            "vmedia-internal-error",
            "idrac9",
            "transient 500 on VirtualMedia.InsertMedia (an eject still in progress)",
            Trigger("vmedia.insert", what="an insert right after an eject"),
            "Ironic release note fix-redfish-vmedia-insert-retry (2026-06), story 2008504",
            RedfishReply(
                500,
                _base_body(
                    "Base.1.8.InternalError",
                    "The request failed due to an internal service error.  The service is "
                    "still operational.",
                    "Resubmit the request.  If the problem persists, consider resetting the "
                    "service.",
                    "Critical",
                ),
            ),
            fault=BMCInternalError,
            outcome="once more on the same node, then elsewhere",
        ),
        Incident(
            "vmedia-unavailable",
            "openbmc",
            "transient 503 ServiceTemporarilyUnavailable (Retry-After) on InsertMedia",
            Trigger("vmedia.insert", what="an insert while the media service restarts"),
            "Ironic release note fix-redfish-vmedia-insert-retry (2026-06); DMTF Base 1.8 "
            "ServiceTemporarilyUnavailable",
            RedfishReply(
                503,
                _base_body(
                    "Base.1.8.ServiceTemporarilyUnavailable",
                    "The service is temporarily unavailable.  Retry in 1 seconds.",
                    "Wait for the indicated retry duration and retry the operation.",
                    "Critical",
                    "1",
                ),
                (("Retry-After", "1"),),
            ),
            fault=BMCBusy,
            outcome="retried after Retry-After on the same node",
        ),
        Incident(
            "ipmi-node-busy",
            "openbmc",
            "completion code 0xC0 node busy",
            Trigger("power.*", what="any request while the BMC is busy"),
            "IPMI 2.0 table 5-2; Ironic ipmitool IPMITOOL_RETRYABLE_FAILURES ('Node busy')",
            ipmi_code=0xC0,
            fault=BMCBusy,
            outcome="retried on the same node with backoff",
        ),
        Incident(
            "ipmi-timeout",
            "supermicro",
            "completion code 0xC3 timeout while processing the command",
            Trigger("power.*", what="a request the BMC gave up on"),
            "IPMI 2.0 table 5-2; Ironic ipmitool IPMITOOL_RETRYABLE_FAILURES ('Timeout')",
            ipmi_code=0xC3,
            fault=BMCBusy,
            outcome="retried on the same node with backoff",
        ),
        Incident(
            "ipmi-cannot-respond",
            "idrac9",
            "completion code 0xCE command response could not be provided",
            Trigger("power.*", what="a request while the BMC's resources are exhausted"),
            "IPMI 2.0 table 5-2 (0xCE)",
            ipmi_code=0xCE,
            fault=BMCBusy,
            outcome="retried on the same node with backoff",
        ),
        Incident(
            "ipmi-not-in-present-state",
            "ilo5",
            "completion code 0xD5 not supported in present state, right after a power change",
            Trigger(_POWER_CHANGE, "changed", 5.0, "a power change within 5 s of the last one"),
            "IPMI 2.0 table 5-2 (0xD5)",
            ipmi_code=0xD5,
            fault=BMCBusy,
            outcome="retried on the same node with backoff until the state passes",
        ),
        Incident(
            "ipmi-no-session-slot",
            "supermicro",
            "RMCP+ Open Session status 0x01 'insufficient resources for session'",
            Trigger("login", what="a login past the BMC's session slots"),
            "IPMI 2.0 table 13-15; Ironic ipmitool IPMITOOL_RETRYABLE_FAILURES "
            "('insufficient resources for session')",
            rmcp_status=0x01,
            fault=BMCBusy,
            outcome="retried on the same node with backoff",
        ),
    )
}

#: the power windows a trigger may name
POWER_WINDOWS = ("on", "off", "changed")
