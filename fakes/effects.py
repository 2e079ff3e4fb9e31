"""Every fault effect, defined once: what it is, where it lives, what it takes.

:data:`EFFECTS` is the one table. Each :class:`EffectDef` says the effect's
layer (who can carry it out), its parameters with their validation, which
operations it applies to, how it applies to IPMI (one datagram per answer),
the fault class a bmaas driver raises when a call meets it, and the fault
matrix's scenario(s) for it. Whoever serves a machine — the in-process
:class:`bmaas.fakes.driver.FakeDriver`, hwlab's IPMI and Redfish emulators, hwlab's
fault proxies — turns the effects that fired on one request into one
:class:`Action` with :func:`decide`, and only the protocol's own table
(``hwlab/answers.py``) says what goes on the wire.

Adding an effect is one entry here plus its answers in each protocol's table.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Callable, Collection, Iterable, Mapping
from enum import StrEnum
from typing import Any

from bmaas import validate
from bmaas.driver import Operation
from bmaas.fakes.incidents import INCIDENTS, Incident
from bmaas.faults import (
    BMCAuthError,
    BMCBusy,
    BMCFault,
    BMCInternalError,
    BMCProtocolError,
    BMCTimeout,
    BMCUnreachable,
    UnsupportedOperation,
)
from bmaas.policy import policy_for

__all__ = [
    "EFFECTS",
    "EFFECT_PARAMS",
    "Act",
    "Action",
    "Case",
    "Effect",
    "EffectDef",
    "Firing",
    "Layer",
    "Param",
    "decide",
    "describe_trigger",
    "incident_cases",
    "incident_of",
    "incident_record",
    "trickle_seconds",
]


class Layer(StrEnum):
    """Where a fault lives, which decides who carries it out."""

    WIRE = "wire"  # the network between client and BMC
    BMC = "bmc"  # the management controller's firmware
    HARDWARE = "hardware"  # the server behind the BMC


class Effect(StrEnum):
    HANG = "hang"
    DROP = "drop"
    DELAY = "delay"
    TRICKLE = "trickle"
    DUPLICATE = "duplicate"
    BUSY = "busy"
    AUTH_FAIL = "auth_fail"
    INTERNAL_ERROR = "internal_error"
    MALFORMED_REPLY = "malformed_reply"
    UNSUPPORTED = "unsupported"
    BMC_REBOOT = "bmc_reboot"
    POWER_STUCK = "power_stuck"
    POWER_LOST = "power_lost"
    SLOW_POWER = "slow_power"
    BOOT_NOT_PERSISTED = "boot_not_persisted"
    BOOT_ONCE_PERSISTENT = "boot_once_persistent"
    BOOT_CRASH = "boot_crash"
    BIOS_PENDING = "bios_pending"
    BIOS_PARTIAL = "bios_partial"
    TASK_HANG = "task_hang"
    UPDATE_REJECTED = "update_rejected"
    VERSION_UNCHANGED = "version_unchanged"
    UPDATE_REBOOT = "update_reboot"
    INCIDENT = "incident"
    SESSION_LIMIT = "session_limit"
    OVERLOAD = "overload"

    @property
    def layer(self) -> Layer:
        return EFFECTS[self].layer

    @property
    def spec(self) -> EffectDef:
        return EFFECTS[self]


class Act(StrEnum):
    """What a server does about an effect (see :func:`decide`)."""

    SILENT = "silent"  # answer nothing (bmc_reboot also takes the BMC down)
    DELAY = "delay"  # answer later
    TRICKLE = "trickle"  # answer slowly, a few bytes at a time
    DUPLICATE = "duplicate"  # act on the request more than once
    ANSWER = "answer"  # answer an error in the BMC's place
    CORRUPT = "corrupt"  # answer something the protocol does not allow
    MACHINE = "machine"  # handed to the simulated machine


@dataclasses.dataclass(frozen=True)
class Param:
    kind: type
    default: Any = None
    required: bool = False
    low: float | None = None
    high: float | None = None
    #: the values a text parameter may take (None: any)
    choices: tuple[str, ...] | None = None
    #: a number that must be > low, not just >= low
    above_low: bool = False

    def check(self, value: Any) -> tuple[Any, str | None]:
        """The value as its kind, or the reason it is refused. Numbers follow
        :mod:`bmaas.validate`: finite, whole where whole, and a float with
        no upper bound of its own is a time of at most one day."""
        if self.kind is str:
            text = str(value)
            if self.choices is not None and text not in self.choices:
                return None, f"must be one of {', '.join(self.choices)}, not {value!r}"
            return text, None
        try:
            if self.kind is int:
                return validate.whole(value, low=self.low, high=self.high), None
            high = validate.MAX_SECONDS if self.high is None else self.high
            return validate.number(value, low=self.low, high=high, low_open=self.above_low), None
        except ValueError as exc:
            return None, str(exc)


@dataclasses.dataclass(frozen=True)
class Case:
    """One fault-matrix scenario: a rule, a call, and what each protocol gives."""

    name: str
    rule: Mapping[str, Any]
    #: "fault class" or "ok:<power state>", per protocol
    expected: Mapping[str, str]
    action: str = "read"
    #: power the machine on (behind the BMC) before the call
    start_on: bool = False
    #: make one untimed call first, whatever it gives, to set the fault off
    prime: bool = False
    #: what the same call gives through bmaas's operation retry within a
    #: budget, per protocol (empty: not asserted)
    outcome: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class EffectDef:
    layer: Layer
    act: Act
    summary: str
    params: Mapping[str, Param] = dataclasses.field(default_factory=dict)
    #: operation globs the effect applies to (a rule must name one of them)
    operations: tuple[str, ...] = ("*",)
    #: what a bmaas driver raises when a call meets it (None: the call succeeds)
    fault: type[BMCFault] | None = None
    #: IPMI's login runs over UDP: no answer there means no session at all
    ipmi_login_fault: type[BMCFault] | None = None
    #: how it applies to IPMI, whose answers are one datagram each
    ipmi: str = "as described"
    #: what the fake driver's fault says (real drivers quote the BMC)
    says: str = ""
    cases: tuple[Case, ...] = ()

    def applies_to(self, operation_glob: str) -> bool:
        """Whether a rule's operation glob can meet an operation this effect acts on."""
        if "*" in self.operations:
            return True  # any operation, named or not (the IPMI proxy's "opaque")
        names = [str(op) for op in Operation]
        return any(
            fnmatch.fnmatchcase(name, operation_glob) and fnmatch.fnmatchcase(name, mine)
            for name in names
            for mine in self.operations
        )


def _both(outcome: str) -> dict[str, str]:
    return {"ipmi": outcome, "redfish": outcome}


_SECONDS = Param(float, required=True, low=0.0)
#: the matrix's action for a firmware update (hwlab.harness.matrix)
_FW = "firmware_update"

#: the one table of effects
EFFECTS: dict[Effect, EffectDef] = {
    Effect.HANG: EffectDef(
        Layer.WIRE,
        Act.SILENT,
        "answer nothing, ever (the connection stays open); scope=all: the event stream "
        "goes silent too (no keepalive, no event), else it lives on",
        # a wedged web API behind a live event stream is a field case of its
        # own (issue 48): a live stream must not be taken for a live API
        {"scope": Param(str, None, choices=("api", "all"))},
        fault=BMCTimeout,
        ipmi_login_fault=BMCUnreachable,
        cases=(
            Case("hang", {"operation": "power.get"}, _both("BMCTimeout")),
            Case("hang-api", {"operation": "power.get", "scope": "api"}, _both("BMCTimeout")),
            Case("hang-all", {"operation": "power.get", "scope": "all"}, _both("BMCTimeout")),
        ),
    ),
    Effect.DROP: EffectDef(
        Layer.WIRE,
        Act.SILENT,
        "lose the request (rate: share of requests lost)",
        {"rate": Param(float, 1.0, low=0.0, high=1.0)},
        fault=BMCTimeout,
        ipmi_login_fault=BMCUnreachable,
        ipmi="the datagram (and its retransmissions) is not answered",
        cases=(Case("drop", {"rate": 1.0, "operation": "power.get"}, _both("BMCTimeout")),),
    ),
    Effect.DELAY: EffectDef(
        Layer.WIRE,
        Act.DELAY,
        "answer after `seconds` (the BMC acts at once)",
        {"seconds": _SECONDS},
        fault=BMCTimeout,  # past the call's deadline; shorter delays succeed
        ipmi_login_fault=BMCUnreachable,
        cases=(
            Case("delay", {"seconds": 2.0, "operation": "power.get"}, _both("BMCTimeout")),
            Case("delay-short", {"seconds": 0.2, "operation": "power.get"}, _both("ok:off")),
        ),
    ),
    Effect.TRICKLE: EffectDef(
        Layer.WIRE,
        Act.TRICKLE,
        "answer `bytes` bytes every `every` seconds (a dribbling, slow-loris server)",
        {
            "bytes": Param(int, 1, low=1, high=65536),
            "every": Param(float, 0.3, low=0.0, high=60.0, above_low=True),
        },
        fault=BMCTimeout,  # once the call's total deadline passes
        ipmi_login_fault=BMCUnreachable,
        ipmi=(
            "an IPMI answer is one datagram and cannot arrive in pieces: it is sent whole "
            "when its last byte would have, after ceil(size / bytes) * every seconds"
        ),
        # 8 bytes every 0.25 s: an IPMI answer (~40 bytes) takes >1 s, a Redfish
        # ComputerSystem (~3 KB) about 90 s. Each read gap (0.25 s) is shorter
        # than a per-read timeout: only a client with a total deadline gives up
        # in time (Redfish: the `budget` branch's driver).
        cases=(
            Case(
                "trickle",
                {"bytes": 8, "every": 0.25, "operation": "power.get"},
                _both("BMCTimeout"),
            ),
        ),
    ),
    Effect.DUPLICATE: EffectDef(
        Layer.WIRE,
        Act.DUPLICATE,
        "the request reaches the BMC 1 + `copies` times; the client reads one answer",
        {"copies": Param(int, 1, low=1, high=10)},
        cases=(
            Case(
                "duplicate",
                {"copies": 2, "operation": "power.set"},
                _both("ok:on"),
                action="power_on",
            ),
        ),
    ),
    Effect.BUSY: EffectDef(
        Layer.BMC,
        Act.ANSWER,
        "'try later' (IPMI 0xC0, HTTP 503 + Retry-After when `retry_after` is set)",
        {"retry_after": Param(float, None, low=0.0)},
        fault=BMCBusy,
        says="node busy",
        cases=(Case("busy", {"retry_after": 1, "operation": "power.get"}, _both("BMCBusy")),),
    ),
    Effect.AUTH_FAIL: EffectDef(
        Layer.BMC,
        Act.ANSWER,
        "reject the credentials (scope=session: the session expires, a fresh login works)",
        {"scope": Param(str, None, choices=("credentials", "session"))},
        fault=BMCAuthError,
        says="login rejected",
        cases=(Case("auth_fail", {}, _both("BMCAuthError")),),
    ),
    Effect.INTERNAL_ERROR: EffectDef(
        Layer.BMC,
        Act.ANSWER,
        "the BMC fails the request (IPMI 0xFF, HTTP 500 naming `message_id`)",
        {"message_id": Param(str, "Base.1.8.InternalError")},
        fault=BMCInternalError,
        says="the BMC reported an internal error",
        cases=(Case("internal_error", {"operation": "power.get"}, _both("BMCInternalError")),),
    ),
    Effect.MALFORMED_REPLY: EffectDef(
        Layer.BMC,
        Act.CORRUPT,
        "a reply the protocol does not allow (IPMI: no data; HTTP: JSON cut in half)",
        fault=BMCProtocolError,
        says="reply could not be decoded",
        cases=(Case("malformed_reply", {"operation": "power.get"}, _both("BMCProtocolError")),),
    ),
    Effect.UNSUPPORTED: EffectDef(
        Layer.BMC,
        Act.ANSWER,
        "the BMC lacks the command (IPMI 0xC1, HTTP 405/501)",
        fault=UnsupportedOperation,
        says="the BMC does not support this command",
        cases=(Case("unsupported", {"operation": "power.get"}, _both("UnsupportedOperation")),),
    ),
    Effect.BMC_REBOOT: EffectDef(
        Layer.BMC,
        Act.SILENT,
        "unreachable for `duration` seconds, sessions lost. Without `times` the rule "
        "fires again on the first request after each window: a BMC that never comes back",
        {"duration": Param(float, 30.0, low=0.0)},
        fault=BMCUnreachable,  # calls during the window (the request that starts it is lost)
        # The read that sets the BMC rebooting is lost with it (prime); what is
        # measured is a call made during the reboot window.
        cases=(
            Case(
                "bmc_reboot",
                {"duration": 3.0, "times": 1},
                _both("BMCUnreachable"),
                prime=True,
            ),
            # A BMC rebooting to apply a firmware update (Ironic bug 2141575:
            # power sync skips nodes in a firmware update): unreachable for a
            # while, not broken. Shorter than the "briefly" retry
            # (unreachable_attempts x unreachable_wait), it ends in success.
            Case(
                "firmware_update",
                {"duration": 2.0, "times": 1},
                _both("BMCUnreachable"),
                prime=True,
                outcome=_both("ok:off"),
            ),
        ),
    ),
    Effect.POWER_STUCK: EffectDef(
        Layer.HARDWARE,
        Act.MACHINE,
        "power action accepted, state never changes",
        operations=("power.set",),
        cases=(Case("power_stuck", {"operation": "power.set"}, _both("PowerFailure"), "power_on"),),
    ),
    Effect.POWER_LOST: EffectDef(
        Layer.HARDWARE,
        Act.MACHINE,
        "the machine turns off on its own",
        # IPMI's chassis status carries a "power fault" bit, which the driver
        # raises as PowerFailure; Redfish reads the node off.
        cases=(
            Case(
                "power_lost",
                {"operation": "power.get"},
                {"ipmi": "PowerFailure", "redfish": "ok:off"},
                start_on=True,
            ),
        ),
    ),
    Effect.SLOW_POWER: EffectDef(
        Layer.HARDWARE,
        Act.MACHINE,
        "a power transition takes `seconds`",
        {"seconds": _SECONDS},
        operations=("power.set",),
        cases=(
            Case(
                "slow_power",
                {"seconds": 5.0, "operation": "power.set"},
                _both("PowerFailure"),
                "power_on",
            ),
        ),
    ),
    Effect.BOOT_NOT_PERSISTED: EffectDef(
        Layer.HARDWARE,
        Act.MACHINE,
        "boot device accepted, not stored",
        operations=("boot.set",),
        cases=(Case("boot_not_persisted", {}, _both("BootFailure"), "boot_pxe"),),
    ),
    # Stock sushy-tools and several real BMCs keep no one-time override apart
    # from a persistent one (Ironic's force_persistent_boot_device exists for
    # them): a capability quirk, never a BootFailure.
    Effect.BOOT_ONCE_PERSISTENT: EffectDef(
        Layer.HARDWARE,
        Act.MACHINE,
        "a one-time boot override is stored as persistent (reads back Continuous)",
        operations=("boot.set",),
        cases=(
            Case(
                "boot_once_persistent",
                {},
                _both("ok:boot_once_kept_persistent"),
                "boot_pxe_once",
            ),
        ),
    ),
    Effect.BOOT_CRASH: EffectDef(
        Layer.HARDWARE,
        Act.MACHINE,
        "powers on, falls back off `up_for` seconds later",
        {"up_for": Param(float, 5.0, low=0.0)},
        operations=("power.set",),
        cases=(
            Case(
                "boot_crash",
                {"up_for": 0.3, "operation": "power.set"},
                _both("ok:off"),
                "power_on_then_settle",
            ),
        ),
    ),
    # A BIOS change the BMC takes and the next POST does not apply (issue 51:
    # Ironic verifies the attributes after the reboot; Metal3 #2873). The
    # driver's verify_bios reads it back: SettingsNotApplied, never success.
    Effect.BIOS_PENDING: EffectDef(
        Layer.HARDWARE,
        Act.MACHINE,
        "a BIOS change is taken; the next boot applies none of it (it stays pending)",
        operations=("bios.set",),
        cases=(
            Case(
                "bios_pending",
                {"operation": "bios.set"},
                {"redfish": "SettingsNotApplied"},
                "bios_set_reboot_verify",
            ),
        ),
    ),
    Effect.BIOS_PARTIAL: EffectDef(
        Layer.HARDWARE,
        Act.MACHINE,
        "a BIOS change is taken; the next boot applies part of it (one setting stays pending)",
        operations=("bios.set",),
        cases=(
            Case(
                "bios_partial",
                {"operation": "bios.set"},
                {"redfish": "SettingsNotApplied"},
                "bios_set_reboot_verify",
            ),
        ),
    ),
    # Firmware updates (issue 51): Ironic's 2025-26 notes on tasks that stay
    # RUNNING, BMCs rebooting mid-update and versions that did not change;
    # the DMTF Update registry's VerificationFailed. The driver follows the
    # task (bmaas.updates) and reads the version back.
    Effect.TASK_HANG: EffectDef(
        Layer.HARDWARE,
        Act.MACHINE,
        "a firmware update is taken; its task stays Running for ever, nothing lands",
        operations=("firmware.update",),
        cases=(Case("task_hang", {"operation": "firmware.update"}, {"redfish": "TaskStuck"}, _FW),),
    ),
    Effect.UPDATE_REJECTED: EffectDef(
        Layer.HARDWARE,
        Act.MACHINE,
        "a firmware update is taken; its task ends Exception with the Update registry's "
        "VerificationFailed, nothing lands",
        operations=("firmware.update",),
        cases=(
            Case(
                "update_rejected",
                {"operation": "firmware.update"},
                {"redfish": "RequestRejected"},
                _FW,
            ),
        ),
    ),
    Effect.VERSION_UNCHANGED: EffectDef(
        Layer.HARDWARE,
        Act.MACHINE,
        "a firmware update's task completes; the component keeps its old version",
        operations=("firmware.update",),
        cases=(
            Case(
                "version_unchanged",
                {"operation": "firmware.update"},
                {"redfish": "SettingsNotApplied"},
                _FW,
            ),
        ),
    ),
    Effect.UPDATE_REBOOT: EffectDef(
        Layer.HARDWARE,
        Act.MACHINE,
        "the BMC reboots as a firmware update lands (down `duration` seconds); the task "
        "completes once it is back, with the new `version` or the old",
        {
            "duration": Param(float, 2.0, low=0.0),
            "version": Param(str, "new", choices=("new", "old")),
        },
        operations=("firmware.update",),
        cases=(
            Case(
                "update_reboot",
                {"operation": "firmware.update", "duration": 1.0},
                {"redfish": "ok"},
                _FW,
            ),
            Case(
                "update_reboot_old",
                {"operation": "firmware.update", "duration": 1.0, "version": "old"},
                {"redfish": "SettingsNotApplied"},
                _FW,
            ),
        ),
    ),
    Effect.INCIDENT: EffectDef(
        Layer.BMC,
        Act.ANSWER,
        "a vendor's documented answer (`incident`, see `hwlab effects`), on its trigger: "
        "the incident's operation and power window unless the rule names its own",
        {"incident": Param(str, required=True, choices=tuple(INCIDENTS))},
        ipmi="the incident's completion code, or its RMCP+ status at login",
        says="the BMC gave a vendor incident's answer",
        # its fault depends on the incident: see bmaas.fakes.incidents and incident_cases()
    ),
    # iDRAC answers RAC0218 ("the maximum number of user sessions is reached")
    # as HTTP 503; IPMI BMCs answer Open Session with RMCP+ status 0x01. It
    # triggers on the BMC's state, not by chance: only where the server knows
    # the sessions it holds (hwlab's emulators; a proxy cannot count them and
    # refuses the rule: bmaas.hwlab.proxy.effects.REFUSED).
    Effect.SESSION_LIMIT: EffectDef(
        Layer.BMC,
        Act.ANSWER,
        "at most `sessions` sessions at once: a login beyond them is refused (Redfish 503 "
        "naming `message_id`, IPMI RMCP+ status 0x01 'insufficient resources for session')",
        {
            "sessions": Param(int, required=True, low=0),
            "message_id": Param(str, "Base.1.8.SessionLimitExceeded"),
        },
        operations=("login",),
        fault=BMCBusy,
        ipmi="Open Session answered with RMCP+ status 0x01 while the BMC holds `sessions`",
        says="the maximum number of sessions is reached",
        # The matrix's client holds its session before the rule is added: a
        # client that keeps its session is never refused. The refusal itself:
        # tests/lab/test_session_limit.py.
        cases=(Case("session_limit", {"sessions": 0, "operation": "login"}, _both("ok:off")),),
    ),
    # Supermicro BMCs that stop answering after a burst of IPMI commands until
    # reset; iDRACs that stall under parallel Redfish clients. Triggered by the
    # load the BMC sees, in the engine: more than `max_concurrent` requests in
    # flight (where the server counts them: hwlab's Redfish emulator) or more
    # than `max_rate` requests in the last second; then silent for `duration`.
    Effect.OVERLOAD: EffectDef(
        Layer.BMC,
        Act.SILENT,
        "stop answering for `duration` seconds once more than `max_concurrent` requests "
        "are in flight or more than `max_rate` arrive within one second",
        {
            "max_concurrent": Param(int, None, low=1),
            "max_rate": Param(float, None, low=0.0),
            "duration": Param(float, 10.0, low=0.0),
        },
        fault=BMCTimeout,
        ipmi_login_fault=BMCUnreachable,
        ipmi="rate only (the emulator serves one datagram at a time); no answer while down",
        says="the BMC stopped answering (overloaded)",
        cases=(Case("overload", {"max_rate": 0, "duration": 3.0}, _both("BMCTimeout")),),
    ),
}


@dataclasses.dataclass(frozen=True)
class Firing:
    """One effect that fired: what the event log records."""

    time: float
    node: str
    protocol: str
    operation: str
    effect: Effect
    rule: str
    params: Mapping[str, Any]

    @property
    def layer(self) -> Layer:
        return self.effect.layer

    def to_dict(self) -> dict[str, Any]:
        return {
            "time": round(self.time, 6),
            "node": self.node,
            "protocol": self.protocol,
            "operation": self.operation,
            "effect": str(self.effect),
            "rule": self.rule,
            "params": dict(self.params),
        }


def incident_of(firing: Firing) -> Incident | None:
    """The vendor incident an ``incident`` firing replays (None for any other effect)."""
    if firing.effect is not Effect.INCIDENT:
        return None
    return INCIDENTS[str(firing.params["incident"])]


#: the matrix's window for a windowed incident: short, so the retry outlives it
INCIDENT_WINDOW = 2.0


def incident_cases() -> tuple[Case, ...]:
    """One matrix scenario per incident and protocol it applies to: the
    single call's fault class (``expected``) and what bmaas's retry makes of
    it within a budget (``outcome``). A windowed incident gets a window
    shorter than the budget; one without a window and retried here fires
    once (a transient answer), one that is never retried fires every time.
    """
    cases: list[Case] = []
    for incident in INCIDENTS.values():
        trigger = incident.trigger
        rule: dict[str, Any] = {"incident": incident.name}
        retried = incident.fault is None or policy_for(incident.fault).retried_here
        if trigger.within is not None:
            rule["within"] = INCIDENT_WINDOW
        elif retried:
            rule["times"] = 1
        action = _INCIDENT_ACTIONS.get(trigger.operation.split(".")[0], "read")
        ok = _OK[action]
        for protocol in incident.protocols:
            seen = incident.fault.__name__ if incident.fault is not None else ok
            here = dict(rule, protocol=protocol)
            if action == "login" and protocol == "ipmi" and "times" in here:
                # pyghmi answers a refused Open Session by proposing another
                # cipher once: a transient refusal must outlast that resend
                here["times"] = 2
            if action == "login" and protocol == "redfish":
                # redfish_auth_type "auto" (the default): sushy falls back to
                # Basic auth when no session can be created, so the call succeeds
                seen = ok
            cases.append(
                Case(
                    f"{incident.name}/{protocol}",
                    here,
                    {protocol: seen},
                    action=action,
                    start_on=trigger.power == "on",
                    # never retried: one call to the BMC, no retry storm
                    outcome={protocol: ok if retried else f"{seen} x1"},
                )
            )
    return tuple(cases)


#: the matrix call that meets an incident, by the trigger's operation family
_INCIDENT_ACTIONS = {
    "power": "power_on",
    "boot": "boot_pxe",
    "vmedia": "vmedia_insert",
    "login": "login",
}
_OK = {
    "power_on": "ok:on",
    "boot_pxe": "ok",
    "vmedia_insert": "ok",
    "login": "ok:off",
    "read": "ok:off",
}


#: parameters each effect takes (a view of :data:`EFFECTS`)
EFFECT_PARAMS: dict[Effect, Mapping[str, Param]] = {e: d.params for e, d in EFFECTS.items()}


def trickle_seconds(size: int, trickle: tuple[int, float]) -> float:
    """How long an answer of ``size`` bytes trickled ``(bytes, every)`` takes to arrive whole."""
    step, every = trickle
    return -(-max(size, 1) // step) * every


@dataclasses.dataclass
class Action:
    """What the effects that fired on one request ask of whoever serves it."""

    #: hang, drop or bmc_reboot: nothing is answered (and nothing executed)
    silent: Firing | None = None
    delay: float = 0.0
    #: (bytes, every) of a trickled answer
    trickle: tuple[int, float] | None = None
    copies: int = 0
    #: a BMC-layer error answered in the BMC's place (the request is not executed)
    answer: Firing | None = None
    #: malformed_reply: answer something the protocol does not allow
    corrupt: Firing | None = None
    hardware: list[Firing] = dataclasses.field(default_factory=list)
    #: firings acted on, and firings this server could not carry out (with why)
    carried: list[Firing] = dataclasses.field(default_factory=list)
    skipped: list[tuple[Firing, str]] = dataclasses.field(default_factory=list)

    @property
    def hangs(self) -> bool:
        return self.silent is not None and self.silent.effect is Effect.HANG

    @property
    def reboot(self) -> float | None:
        """Seconds the BMC is down for, when ``bmc_reboot`` fired."""
        if self.silent is not None and self.silent.effect is Effect.BMC_REBOOT:
            return float(self.silent.params["duration"])
        return None


def decide(
    firings: Iterable[Firing],
    *,
    forge: bool = True,
    machine: bool = True,
    acknowledge: Collection[Effect] = (),
    why_not_forge: str = "cannot answer in the BMC's place here",
) -> Action:
    """One :class:`Action` from the effects that fired on one request.

    ``forge=False``: this server cannot answer in the BMC's place (an IPMI
    proxy without the session keys), so BMC answers and corruptions are
    skipped. ``machine=False``: there is no machine to hand hardware effects
    to (a proxy in front of real hardware), except those in ``acknowledge``:
    answered as accepted in the BMC's place and never carried out (a Redfish
    proxy's ``power_stuck``: the power action acknowledged, the machine never
    told).
    """
    action = Action()
    for firing in firings:
        act = EFFECTS[firing.effect].act
        if act is Act.MACHINE and not machine and firing.effect in acknowledge and forge:
            if action.answer is None:
                action.answer = firing
                action.carried.append(firing)
            continue
        if act is Act.MACHINE:
            if machine:
                action.hardware.append(firing)
            else:
                action.skipped.append((firing, "a hardware effect needs the machine"))
            continue
        if act in (Act.ANSWER, Act.CORRUPT) and not forge:
            action.skipped.append((firing, why_not_forge))
            continue
        if act is Act.SILENT:
            action.silent = firing
            action.carried.append(firing)
            break  # nothing else happens to a request that is never answered
        if act is Act.DELAY:
            action.delay += float(firing.params["seconds"])
        elif act is Act.TRICKLE:
            if action.trickle is None:
                action.trickle = (int(firing.params["bytes"]), float(firing.params["every"]))
        elif act is Act.DUPLICATE:
            action.copies += int(firing.params["copies"])
        elif act is Act.CORRUPT:
            action.corrupt = firing
        elif action.answer is None:
            action.answer = firing
        else:
            continue  # one error answer per request: the first one wins
        action.carried.append(firing)
    return action


def describe_effects(out: Callable[[str], None] = print) -> None:
    """One line per effect: name, layer, parameters, summary; then each
    vendor incident with its trigger, answer and source (``hwlab effects``)."""
    for effect, spec in EFFECTS.items():
        params = " ".join(
            f"{k}={'<required>' if p.required else p.default}" for k, p in spec.params.items()
        )
        out(f"{effect:<20} {spec.layer:<9} {params:<28} {spec.summary}")
    out("")
    out("incidents (effect=incident incident=NAME; vendor profiles group them):")
    for incident in INCIDENTS.values():
        out(f"  {incident.name:<27} {incident.vendor:<10} {incident.summary}")
        out(f"  {'':<27} {'trigger':<10} {describe_trigger(incident)}")
        out(f"  {'':<27} {'source':<10} {incident.source}")


def describe_trigger(incident: Incident) -> str:
    """``power.set, off < 60 s (a power-on within 60 s of the power-off)``."""
    trigger = incident.trigger
    text = trigger.operation
    if trigger.power is not None and trigger.within is not None:
        text += f", {trigger.power} < {trigger.within:g} s"
    return f"{text} ({trigger.what})" if trigger.what else text


def incident_record(incident: Incident) -> dict[str, Any]:
    """An incident as ``hwlab effects --json`` prints it."""
    return {
        "vendor": incident.vendor,
        "summary": incident.summary,
        "trigger": describe_trigger(incident),
        "source": incident.source,
        "protocols": list(incident.protocols),
        "redfish_status": incident.redfish.status if incident.redfish else None,
        "message_ids": incident.redfish.message_ids if incident.redfish else [],
        "ipmi_code": incident.ipmi_code,
        "rmcp_status": incident.rmcp_status,
        "bmaas_fault": incident.fault.__name__ if incident.fault else None,
        "outcome": incident.outcome,
    }
