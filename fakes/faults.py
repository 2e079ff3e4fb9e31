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
(``bmaas.fakes.driver.FakeDriver``, hwlab's IPMI and Redfish servers); hardware
effects by :class:`bmaas.fakes.machine.FakeMachine`.

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

import collections
import dataclasses
import fnmatch
import functools
import math
import random
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from bmaas import clock as _clock
from bmaas import fields
from bmaas.fakes.effects import EFFECT_PARAMS, EFFECTS, Effect, Firing, Layer, Param
from bmaas.fakes.incidents import INCIDENTS, POWER_WINDOWS
from bmaas.faults import InputError
from bmaas.yamlsrc import line_of, load_file

__all__ = ["EFFECT_PARAMS", "EVENT_PREFIX", "Effect", "FaultPlan", "FaultRule", "Firing", "Layer"]


#: operations on a BMC's event path (``event.subscribe``, ``event.stream``,
#: ``event.power``, ``event.health``, ``event.test``): only rules whose
#: operation starts with it meet them
EVENT_PREFIX = "event."

_RULE_KEYS = {"name", "operation", "protocol", "effect"}
_RULE_KEYS |= {"nth", "probability", "after", "until", "times", "power", "within"}
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
    #: a power window: fire only while the machine has been ``power`` ("on",
    #: "off", or "changed": either, since its last transition) for less than
    #: ``within`` seconds (None: any time). Whoever serves a machine tells
    #: the plan its power (:attr:`FaultPlan.power_window`); a proxy, which
    #: has no machine, ignores the window and fires on the other conditions.
    power: str | None = None
    within: float | None = None

    def matches(self, operation: str, protocol: str) -> bool:
        if operation.startswith(EVENT_PREFIX) and not self.operation.startswith(EVENT_PREFIX):
            # The event path (a BMC's event stream, bmaas.hwlab.redfish.events)
            # meets only rules that name it: "*" keeps meaning every request;
            # a hang of the whole service (scope=all) silences its stream too.
            whole = self.effect is Effect.HANG and self.params.get("scope") == "all"
            return whole and self.protocol in ("*", protocol)
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
        if self.power is not None:
            text += f" {self.power}<{self.within:g}s" if self.within is not None else ""
        if self.params:
            text += " " + " ".join(f"{k}={v}" for k, v in self.params.items())
        if self.effect is Effect.BMC_REBOOT and self.times is None:
            # It fires again on the first request after each window: the BMC
            # never stays up. Say so where people look (hwlab status).
            text += " recurring"
        return text + (f" ({self.name})" if self.name else "")

    def unseen_on(self, protocols: Iterable[str]) -> str | None:
        """Why this rule, put on a node that speaks ``protocols``, would fire
        and never be seen by a client (None: it can be seen). An incident
        answers over its vendor's protocols only: an IPMI-only incident on a
        Redfish-only node fired, was logged as fired, and no answer changed.
        (Any other rule aimed at a protocol the node lacks never fires, and
        is left alone: a profile puts both protocols' rules on every node.)"""
        if self.effect is not Effect.INCIDENT:
            return None
        incident = INCIDENTS[str(self.params["incident"])]
        over = set(incident.protocols)
        if self.protocol != "*":
            over &= {self.protocol}
        speaks = sorted(set(protocols))
        if over & set(speaks):
            return None
        return (
            f"incident {incident.name!r} answers over {' and '.join(incident.protocols)} only "
            f"and the node speaks {' and '.join(speaks) or 'no BMC protocol'} only: it would "
            "fire and never be seen"
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"effect": str(self.effect), "operation": self.operation}
        if self.protocol != "*":
            out["protocol"] = self.protocol
        if self.name:
            out["name"] = self.name
        if self.nth:
            out["nth"] = list(self.nth)
        for key in ("probability", "after", "until", "times", "power", "within"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        out.update(self.params)
        return out

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, source: str | None = None, where: str = "rule"
    ) -> FaultRule:
        """Validate one flat rule mapping: every problem at once
        (:class:`bmaas.fields.Problems`), each naming ``source``, line and field."""
        if not isinstance(data, Mapping):
            kind = type(data).__name__
            raise InputError(f"must be a mapping, not {kind}", source=source, field=where)
        check = fields.Checker(source)
        _EFFECT.walk(data, check, where)
        check.raise_if_any()
        values = _record(Effect(str(data["effect"]))).walk(data, check, where)
        check.raise_if_any()
        assert values is not None
        effect = values.pop("effect")
        params = {k: values.pop(k) for k in EFFECT_PARAMS[effect] if k in values}
        return cls(effect=effect, params=params, **values)


def _effect(value: Any) -> Effect:
    try:
        return Effect(str(value))
    except ValueError:
        known = ", ".join(e.value for e in Effect)
        raise ValueError(f"unknown effect {value!r} (one of: {known})") from None


#: what a rule's effect is (read first: the rest of its table depends on it)
_EFFECT = fields.Record({"effect": fields.Field(_effect, required=True)}, rest=lambda key: None)


def _param(param: Param) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        converted, problem = param.check(value)
        if problem is not None:
            raise ValueError(problem)
        return converted

    return check


def _nth(value: Any) -> tuple[int, ...]:
    raw = value if isinstance(value, list) else [value]
    if not raw or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in raw):
        raise ValueError("must be a call number >= 1, or a list of them")
    return tuple(sorted(raw))


def _protocol(value: Any) -> str:
    protocol = str(value)
    if protocol not in ("*", "ipmi", "redfish", "fake"):
        raise ValueError(f"must be ipmi, redfish, fake or *, not {protocol!r}")
    return protocol


def _trigger(found: fields.Found) -> None:
    """An incident's own operation and power window, where the rule gives none;
    the operation one the effect acts on."""
    effect = found.values["effect"]
    trigger = None
    if effect is Effect.INCIDENT and found.ok("incident"):
        trigger = INCIDENTS[found.values["incident"]].trigger
    if "operation" not in found.data:
        found.values["operation"] = trigger.operation if trigger else "*"
    if trigger is not None and trigger.power is not None and "power" not in found.data:
        found.values["power"] = trigger.power
    power_given = "power" in found.values
    if trigger is not None and trigger.within is not None and power_given:
        found.values.setdefault("within", trigger.within)
    if found.ok("operation") and not EFFECTS[effect].applies_to(found.values["operation"]):
        found.fail(
            f"effect {effect} acts only on {', '.join(EFFECTS[effect].operations)}", "operation"
        )


def _windows(found: fields.Found) -> None:
    values = found.values
    if found.ok("after", "until") and values["until"] <= values["after"]:
        found.fail("must be later than 'after'", "until")
    if ("power" in values) != ("within" in values) and not found.bad & {"power", "within"}:
        found.fail("'power' and 'within' go together (a power window)", "within")
    protocol, incident = values.get("protocol"), values.get("incident")
    if (
        values["effect"] is Effect.INCIDENT
        and protocol in ("ipmi", "redfish")
        and found.ok("incident")
    ):
        answers = INCIDENTS[str(incident)].protocols
        if protocol not in answers:
            found.fail(
                f"incident {incident!r} answers over {' and '.join(answers)} "
                f"only: over {protocol} it would fire and never be seen",
                "protocol",
            )


@functools.cache
def _record(effect: Effect) -> fields.Record:
    """The table of a rule of ``effect``: the rule's keys and the effect's parameters."""
    params = {
        key: fields.Field(
            _param(p),
            required=p.required,
            missing=f"is required for effect {effect}",
            default=fields.MISSING if p.default is None else p.default,
        )
        for key, p in EFFECT_PARAMS[effect].items()
    }
    seconds = fields.Field(_param(Param(float, low=0.0)), unit="s")
    return fields.Record(
        {
            "effect": fields.Field(_effect),
            "name": fields.Field(str, default=""),
            **params,
            "operation": fields.Field(str),
            "nth": fields.Field(_nth),
            "probability": fields.Field(_param(Param(float, low=0.0, high=1.0))),
            "after": seconds,
            "until": seconds,
            "times": fields.Field(_param(Param(int, low=1))),
            "power": fields.one_of(
                *POWER_WINDOWS, message=f"must be one of {', '.join(POWER_WINDOWS)}"
            ),
            "within": seconds,
            "protocol": fields.Field(_protocol, default="*"),
        },
        checks=(_trigger, _windows),
        unknown=f"unknown key for effect {effect} (allowed: {{allowed}})",
    )


class _RuleState:
    """A rule in force: its own counters and random stream."""

    __slots__ = ("calls", "down_until", "fired", "recent", "rng", "rule")

    def __init__(self, rule: FaultRule, seed: str) -> None:
        self.rule = rule
        self.rng = random.Random(seed)
        self.calls = 0
        self.fired = 0
        #: overload: arrival times within the last second, and the end of
        #: the silent window it set off
        self.recent: collections.deque[float] = collections.deque()
        self.down_until = -math.inf


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
        #: the machine's power now and for how long ("on"/"off", seconds),
        #: for rules with a power window; set by the machine it is attached to
        self.power_window: Callable[[], tuple[str, float, float]] | None = None
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

    def evaluate(
        self,
        operation: str,
        *,
        protocol: str = "fake",
        sessions: int | None = None,
        in_flight: int | None = None,
    ) -> list[Firing]:
        """The effects that fire for one request, wire first, then BMC, then
        hardware (the order in which a server must carry them out).

        ``sessions``: how many sessions the BMC holds now, where the server
        knows (a login): ``session_limit`` fires only when they are at its
        limit, so the event log shows each refusal, never a login let in.
        ``in_flight``: requests the BMC is serving now, this one included,
        where the server counts them (``overload``; its rate it counts here).
        An ``overload`` firing that starts a silent window carries
        ``params["trigger"]`` (what set it off); the requests lost in the
        window fire without it."""
        now = self._clock()
        since = now - self._start
        fired: list[Firing] = []
        window = self.power_window() if self.power_window is not None else None
        with self._lock:
            for state in self._states:
                rule = state.rule
                if not rule.matches(operation, protocol):
                    continue
                state.calls += 1
                if rule.effect is Effect.SESSION_LIMIT and (
                    sessions is None or sessions < rule.params["sessions"]
                ):
                    continue
                params: Mapping[str, Any] = rule.params
                if rule.effect is Effect.OVERLOAD:
                    trigger = _overload(state, now, in_flight)
                    if trigger is None:
                        continue
                    if trigger:  # a new window: the rule's own "when" still applies
                        if not _due(rule, state, since):
                            state.down_until = -math.inf
                            continue
                        params = {**rule.params, "trigger": trigger}
                elif not _due(rule, state, since) or not _in_window(rule, window):
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
                        params=params,
                    )
                )
            listeners = list(self.listeners)
        fired.sort(key=lambda f: list(Layer).index(f.layer))
        for firing in fired:
            for listener in listeners:
                listener(firing)
        return fired


def _overload(state: _RuleState, now: float, in_flight: int | None) -> str | None:
    """``overload``: None when the BMC copes; "" inside a silent window; else
    what sets a new window off (its trigger, for the event log)."""
    if now < state.down_until:
        return ""
    recent = state.recent
    recent.append(now)
    while recent and recent[0] <= now - 1.0:
        recent.popleft()
    params = state.rule.params
    trigger = None
    if params.get("max_rate") is not None and len(recent) > params["max_rate"]:
        trigger = f"{len(recent)} requests within 1s > max_rate {params['max_rate']:g}"
    elif (
        params.get("max_concurrent") is not None
        and in_flight is not None
        and in_flight > params["max_concurrent"]
    ):
        trigger = f"{in_flight} requests in flight > max_concurrent {params['max_concurrent']}"
    if trigger is None:
        return None
    state.down_until = now + float(params["duration"])
    recent.clear()
    return trigger


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


def _in_window(rule: FaultRule, window: tuple[str, float, float] | None) -> bool:
    """Whether the machine's power is inside ``rule``'s power window.
    ``window`` is (state, seconds in it, seconds since the last transition);
    None (no machine: a proxy) leaves the decision to the other conditions."""
    if rule.power is None or rule.within is None or window is None:
        return True
    state, in_state, since_change = window
    if rule.power == "changed":
        return since_change < rule.within
    return state == rule.power and in_state < rule.within


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
