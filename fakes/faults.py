"""Fault rules: which operation misbehaves, when, and how.

A rule is *which* (a glob over operation names such as ``power.*``, optionally
one protocol), *when* (every matching call by default; the ``nth`` matching
call(s); with ``probability`` drawn from the plan's seed; inside a time window
``after``/``until`` seconds since the plan started, on the machine's clock; at
most ``times`` times) and *what* (an :class:`Effect` and its parameters).

A :class:`FaultPlan` evaluates its rules on every BMC request and returns the
effects that fire. Same rules, same seed, same sequence of calls: same effects,
because each rule draws from its own ``random.Random`` seeded from the plan's
seed, the node and the rule's position (adding a rule does not reshuffle the
others). Wire and BMC effects are carried out by whoever serves the machine
(``fakes.driver.FakeDriver``, hwlab's IPMI and Redfish servers); hardware
effects by :class:`fakes.machine.FakeMachine`.

In YAML, a rule is one flat mapping::

    seed: 7
    rules:
      - name: busy-power
        operation: "power.*"
        effect: busy
        retry_after: 2
        probability: 0.1
        times: 5
"""

from __future__ import annotations

import dataclasses
import fnmatch
import random
import threading
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any

from bmaas import clock as _clock
from bmaas.faults import InputError
from bmaas.yamlsrc import line_of, load_file

__all__ = ["EFFECT_PARAMS", "Effect", "FaultPlan", "FaultRule", "Firing", "Layer"]


class Layer(StrEnum):
    """Where a fault lives, which decides who carries it out."""

    WIRE = "wire"  # the network between client and BMC
    BMC = "bmc"  # the management controller's firmware
    HARDWARE = "hardware"  # the server behind the BMC


class Effect(StrEnum):
    HANG = "hang"  # answer nothing, ever
    DROP = "drop"  # lose the request (param rate: share of requests lost)
    DELAY = "delay"  # answer after `seconds`
    DUPLICATE = "duplicate"  # the request reaches the BMC 1 + `copies` times
    BUSY = "busy"  # "try later" (IPMI 0xC0, HTTP 503), optional retry_after
    AUTH_FAIL = "auth_fail"  # reject the credentials (scope=session: the session expires)
    INTERNAL_ERROR = "internal_error"  # IPMI 0xFF, HTTP 500 (optional message_id)
    MALFORMED_REPLY = "malformed_reply"  # a reply the protocol does not allow
    UNSUPPORTED = "unsupported"  # IPMI 0xC1, HTTP 405/501
    BMC_REBOOT = "bmc_reboot"  # unreachable for `duration` seconds, sessions lost
    POWER_STUCK = "power_stuck"  # power action accepted, state never changes
    POWER_LOST = "power_lost"  # machine turns off on its own
    SLOW_POWER = "slow_power"  # power transition takes `seconds`
    BOOT_NOT_PERSISTED = "boot_not_persisted"  # boot device accepted, not stored
    BOOT_CRASH = "boot_crash"  # powers on, falls back off `up_for` seconds later

    @property
    def layer(self) -> Layer:
        return _LAYERS[self]


_LAYERS = {
    Effect.HANG: Layer.WIRE,
    Effect.DROP: Layer.WIRE,
    Effect.DELAY: Layer.WIRE,
    Effect.DUPLICATE: Layer.WIRE,
    Effect.BUSY: Layer.BMC,
    Effect.AUTH_FAIL: Layer.BMC,
    Effect.INTERNAL_ERROR: Layer.BMC,
    Effect.MALFORMED_REPLY: Layer.BMC,
    Effect.UNSUPPORTED: Layer.BMC,
    Effect.BMC_REBOOT: Layer.BMC,
    Effect.POWER_STUCK: Layer.HARDWARE,
    Effect.POWER_LOST: Layer.HARDWARE,
    Effect.SLOW_POWER: Layer.HARDWARE,
    Effect.BOOT_NOT_PERSISTED: Layer.HARDWARE,
    Effect.BOOT_CRASH: Layer.HARDWARE,
}


@dataclasses.dataclass(frozen=True)
class _Param:
    kind: type
    default: Any = None
    required: bool = False
    low: float | None = None
    high: float | None = None
    #: the values a text parameter may take (None: any)
    choices: tuple[str, ...] | None = None


#: parameters each effect takes, with defaults
EFFECT_PARAMS: dict[Effect, dict[str, _Param]] = {
    Effect.HANG: {},
    Effect.DROP: {"rate": _Param(float, 1.0, low=0.0, high=1.0)},
    Effect.DELAY: {"seconds": _Param(float, required=True, low=0.0)},
    Effect.DUPLICATE: {"copies": _Param(int, 1, low=1, high=10)},
    Effect.BUSY: {"retry_after": _Param(float, None, low=0.0)},
    # scope "session": the BMC forgets its sessions, a fresh login works (a
    # session that expires); default "credentials": the login itself is refused.
    Effect.AUTH_FAIL: {"scope": _Param(str, None, choices=("credentials", "session"))},
    Effect.INTERNAL_ERROR: {"message_id": _Param(str, "Base.1.8.InternalError")},
    Effect.MALFORMED_REPLY: {},
    Effect.UNSUPPORTED: {},
    Effect.BMC_REBOOT: {"duration": _Param(float, 30.0, low=0.0)},
    Effect.POWER_STUCK: {},
    Effect.POWER_LOST: {},
    Effect.SLOW_POWER: {"seconds": _Param(float, required=True, low=0.0)},
    Effect.BOOT_NOT_PERSISTED: {},
    Effect.BOOT_CRASH: {"up_for": _Param(float, 5.0, low=0.0)},
}

_WHEN_KEYS = {"nth", "probability", "after", "until", "times"}
_RULE_KEYS = {"name", "operation", "protocol", "effect"} | _WHEN_KEYS
# Rules are flat mappings, so no effect parameter may share a name with a rule key.
assert not any(_RULE_KEYS & set(p) for p in EFFECT_PARAMS.values())


@dataclasses.dataclass(frozen=True)
class FaultRule:
    effect: Effect
    operation: str = "*"
    protocol: str = "*"
    nth: tuple[int, ...] = ()
    probability: float | None = None
    after: float | None = None
    until: float | None = None
    times: int | None = None
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    name: str = ""

    def matches(self, operation: str, protocol: str) -> bool:
        return fnmatch.fnmatchcase(operation, self.operation) and (self.protocol in ("*", protocol))

    def describe(self) -> str:
        """One line, for status tables: ``busy on power.* p=0.1 (busy-power)``."""
        text = f"{self.effect} on {self.operation}"
        if self.protocol != "*":
            text += f"/{self.protocol}"
        if self.nth:
            text += " nth=" + ",".join(map(str, self.nth))
        if self.probability is not None:
            text += f" p={self.probability:g}"
        if self.after is not None or self.until is not None:
            text += f" t=[{self.after or 0:g},{'' if self.until is None else f'{self.until:g}'}]"
        if self.times is not None:
            text += f" x{self.times}"
        if self.params:
            text += " " + " ".join(f"{k}={v}" for k, v in self.params.items())
        return text + (f" ({self.name})" if self.name else "")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"effect": str(self.effect), "operation": self.operation}
        if self.protocol != "*":
            out["protocol"] = self.protocol
        if self.name:
            out["name"] = self.name
        if self.nth:
            out["nth"] = list(self.nth)
        for key in ("probability", "after", "until", "times"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        out.update(self.params)
        return out

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, source: str | None = None, where: str = "rule"
    ) -> FaultRule:
        """Validate one flat rule mapping; errors name ``source``, line and field."""

        def fail(message: str, key: str | None = None) -> InputError:
            field = f"{where}.{key}" if key else where
            return InputError(message, source=source, line=line_of(data, key), field=field)

        if not isinstance(data, Mapping):
            kind = type(data).__name__
            raise InputError(f"must be a mapping, not {kind}", source=source, field=where)
        if "effect" not in data:
            raise fail("is required", "effect")
        try:
            effect = Effect(str(data["effect"]))
        except ValueError:
            known = ", ".join(e.value for e in Effect)
            raise fail(f"unknown effect {data['effect']!r} (one of: {known})", "effect") from None
        spec = EFFECT_PARAMS[effect]
        for key in data:
            if key not in _RULE_KEYS and key not in spec:
                allowed = sorted(_RULE_KEYS | set(spec))
                raise fail(f"unknown key for effect {effect} (allowed: {', '.join(allowed)})", key)

        def number(
            key: str, kind: type, low: float | None = None, high: float | None = None
        ) -> Any:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise fail(f"must be a number, not {value!r}", key)
            if kind is int and not isinstance(value, int):
                raise fail(f"must be a whole number, not {value!r}", key)
            if low is not None and value < low:
                raise fail(f"must be >= {low:g}, not {value!r}", key)
            if high is not None and value > high:
                raise fail(f"must be <= {high:g}, not {value!r}", key)
            return kind(value)

        params: dict[str, Any] = {}
        for key, p in spec.items():
            if key in data:
                if p.kind is str:
                    params[key] = str(data[key])
                    if p.choices is not None and params[key] not in p.choices:
                        raise fail(f"must be one of {', '.join(p.choices)}, not {data[key]!r}", key)
                else:
                    params[key] = number(key, p.kind, p.low, p.high)
            elif p.required:
                raise fail(f"is required for effect {effect}", key)
            elif p.default is not None:
                params[key] = p.default

        nth: tuple[int, ...] = ()
        if "nth" in data:
            raw = data["nth"] if isinstance(data["nth"], list) else [data["nth"]]
            if not raw or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in raw):
                raise fail("must be a call number >= 1, or a list of them", "nth")
            nth = tuple(sorted(raw))
        kw: dict[str, Any] = {}
        if "probability" in data:
            kw["probability"] = number("probability", float, 0.0, 1.0)
        for key in ("after", "until"):
            if key in data:
                kw[key] = number(key, float, 0.0)
        if "times" in data:
            kw["times"] = number("times", int, 1)
        if "after" in kw and "until" in kw and kw["until"] <= kw["after"]:
            raise fail("must be later than 'after'", "until")
        protocol = str(data.get("protocol", "*"))
        if protocol not in ("*", "ipmi", "redfish", "fake"):
            raise fail(f"must be ipmi, redfish, fake or *, not {protocol!r}", "protocol")
        return cls(
            effect=effect,
            operation=str(data.get("operation", "*")),
            protocol=protocol,
            nth=nth,
            params=params,
            name=str(data.get("name", "")),
            **kw,
        )


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


class _RuleState:
    """A rule in force: its own counters and random stream."""

    __slots__ = ("calls", "fired", "rng", "rule")

    def __init__(self, rule: FaultRule, seed: str) -> None:
        self.rule = rule
        self.rng = random.Random(seed)
        self.calls = 0
        self.fired = 0


class FaultPlan:
    """The rules in force for one machine, evaluated on every BMC request.

    Thread-safe: an IPMI and a Redfish server may serve the same machine.
    ``listeners`` are called with every :class:`Firing` (the lab's event log).
    """

    def __init__(
        self,
        rules: Iterable[FaultRule] = (),
        *,
        seed: int | str = 0,
        node: str = "",
        clock: _clock.ClockFn | None = None,
    ) -> None:
        self.seed = seed
        self.node = node
        self._clock = clock or _clock.monotonic
        self._start = self._clock()
        self._lock = threading.Lock()
        self._added = 0
        self._states: list[_RuleState] = []
        self.listeners: list[Callable[[Firing], None]] = []
        for rule in rules:
            self.add(rule)

    # -- construction ----------------------------------------------------------

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any] | list[Any] | None,
        *,
        source: str | None = None,
        node: str = "",
        clock: _clock.ClockFn | None = None,
        seed: int | str | None = None,
    ) -> FaultPlan:
        """``{seed, rules: [...]}`` or a bare list of rules. An explicit
        ``seed`` argument overrides the document's."""
        return cls(
            parse_rules(data, source=source),
            seed=seed if seed is not None else _doc_seed(data, source),
            node=node,
            clock=clock,
        )

    @classmethod
    def from_file(cls, path: str, **kw: Any) -> FaultPlan:
        return cls.from_dict(load_file(path), source=path, **kw)

    # -- runtime control -------------------------------------------------------

    @property
    def rules(self) -> list[FaultRule]:
        with self._lock:
            return [s.rule for s in self._states]

    def add(self, rule: FaultRule) -> None:
        """Put a rule in force. Its random stream depends on the seed, the node
        and the order it was added in, so replays are exact."""
        with self._lock:
            seed = f"{self.seed}/{self.node}/{self._added}"
            self._added += 1
            self._states.append(_RuleState(rule, seed))

    def clear(self) -> None:
        with self._lock:
            self._states.clear()

    def counts(self) -> dict[str, int]:
        """How often each rule fired, keyed by its name or description."""
        with self._lock:
            return {s.rule.name or s.rule.describe(): s.fired for s in self._states}

    def elapsed(self) -> float:
        """Seconds since the plan started, on its clock (what windows use)."""
        return self._clock() - self._start

    # -- evaluation ------------------------------------------------------------

    def evaluate(self, operation: str, *, protocol: str = "fake") -> list[Firing]:
        """The effects that fire for one request, wire first, then BMC, then
        hardware (the order in which a server must carry them out)."""
        now = self._clock()
        since = now - self._start
        fired: list[Firing] = []
        with self._lock:
            for state in self._states:
                rule = state.rule
                if not rule.matches(operation, protocol):
                    continue
                state.calls += 1
                if not _due(rule, state, since):
                    continue
                if rule.effect is Effect.DROP and state.rng.random() >= rule.params["rate"]:
                    continue
                state.fired += 1
                fired.append(
                    Firing(
                        time=now,
                        node=self.node,
                        protocol=protocol,
                        operation=operation,
                        effect=rule.effect,
                        rule=rule.name or rule.describe(),
                        params=rule.params,
                    )
                )
            listeners = list(self.listeners)
        fired.sort(key=lambda f: list(Layer).index(f.layer))
        for firing in fired:
            for listener in listeners:
                listener(firing)
        return fired


def _due(rule: FaultRule, state: _RuleState, since: float) -> bool:
    if rule.times is not None and state.fired >= rule.times:
        return False
    if rule.nth and state.calls not in rule.nth:
        return False
    if rule.after is not None and since < rule.after:
        return False
    if rule.until is not None and since >= rule.until:
        return False
    return rule.probability is None or state.rng.random() < rule.probability


def parse_rules(data: Any, *, source: str | None = None, field: str = "rules") -> list[FaultRule]:
    """Rules from ``{rules: [...]}`` or a bare list; ``None`` means no rules."""
    if data is None:
        return []
    raw = data
    if isinstance(data, Mapping):
        unknown = set(data) - {"seed", "rules"}
        if unknown:
            key = sorted(unknown)[0]
            raise InputError(
                "unknown key (expected 'seed' and 'rules')",
                source=source,
                line=line_of(data, key),
                field=key,
            )
        raw = data.get("rules") or []
    if not isinstance(raw, list):
        raise InputError("must be a list of rules", source=source, field=field)
    return [
        FaultRule.from_dict(item, source=source, where=f"{field}[{i}]")
        for i, item in enumerate(raw)
    ]


def _doc_seed(data: Any, source: str | None) -> int | str:
    seed = data.get("seed", 0) if isinstance(data, Mapping) else 0
    if isinstance(seed, bool) or not isinstance(seed, int | str):
        raise InputError("must be an integer or a string", source=source, field="seed")
    return seed
