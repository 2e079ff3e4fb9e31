"""The one in-session IPMI executor (hwlab/ipmi_action.py) over a fake
wire: what each action sends, and when, with no real sleeping (the wire
records the delay it was asked to wait)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from bmaas.fakes.effects import Action, Effect, decide
from bmaas.fakes.faults import Firing
from bmaas.fakes.incidents import INCIDENTS
from bmaas.hwlab.answers import IPMI_CODES, ipmi_trickle_delay
from bmaas.hwlab.ipmi_action import Served, answer_time, carry_out


@dataclasses.dataclass
class FakeWire:
    """Records each send as (seconds it waited for, what), and each serve."""

    size: int = 7
    refuse: bool = False
    sent: list[tuple[float, tuple[Any, ...]]] = dataclasses.field(default_factory=list)
    served: list[int] = dataclasses.field(default_factory=list)
    _wait: float = 0.0

    def later(self, seconds: float, send: Callable[[], None]) -> None:
        self._wait = seconds
        send()

    def answer(self, code: int) -> None:
        self.sent.append((self._wait, ("answer", code)))

    def malformed(self, copies: int) -> None:
        self.sent.append((self._wait, ("malformed", copies)))

    def serve(self, copies: int) -> Served:
        self.served.append(copies)
        reply = ("refused",) if self.refuse else ("reply", self.size)
        return Served(self.size, lambda: self.sent.append((self._wait, reply)), not self.refuse)


def _action(*effects: tuple[Effect, Mapping[str, object]]) -> Action:
    return decide(
        Firing(0.0, "n1", "ipmi", "power.get", effect, "r", dict(params))
        for effect, params in effects
    )


@pytest.mark.parametrize("effect", [Effect.HANG, Effect.DROP, Effect.BMC_REBOOT], ids=str)
def test_silence_sends_nothing_and_serves_nothing(effect: Effect) -> None:
    wire = FakeWire()
    params = {"duration": 5.0} if effect is Effect.BMC_REBOOT else {}
    assert carry_out(_action((effect, params), (Effect.BUSY, {})), wire) is False
    assert (wire.sent, wire.served) == ([], [])


@pytest.mark.parametrize("effect", sorted(IPMI_CODES, key=str), ids=str)
def test_a_bmc_error_is_its_code_after_the_delay_and_nothing_is_served(effect: Effect) -> None:
    wire = FakeWire()
    params: dict[str, object] = {"message_id": "x"} if effect is Effect.INTERNAL_ERROR else {}
    assert carry_out(_action((Effect.DELAY, {"seconds": 2.5}), (effect, params)), wire)
    assert wire.sent == [(2.5, ("answer", IPMI_CODES[effect]))]
    assert wire.served == []


def test_an_ipmi_incident_answers_its_own_code() -> None:
    wire = FakeWire()
    carry_out(_action((Effect.INCIDENT, {"incident": "ipmi-timeout"})), wire)
    assert wire.sent == [(0.0, ("answer", 0xC3))]


def test_an_incident_with_no_ipmi_answer_is_served_as_usual() -> None:
    wire = FakeWire()
    carry_out(_action((Effect.INCIDENT, {"incident": "ilo-already-on"})), wire)
    assert wire.sent == [(0.0, ("reply", 7))]
    assert wire.served == [0]


def test_a_malformed_reply_comes_after_the_delay_with_the_copies() -> None:
    wire = FakeWire()
    action = _action(
        (Effect.DELAY, {"seconds": 1.0}),
        (Effect.DUPLICATE, {"copies": 2}),
        (Effect.MALFORMED_REPLY, {}),
    )
    carry_out(action, wire)
    assert wire.sent == [(1.0, ("malformed", 2))]
    assert wire.served == []


def test_a_served_request_is_served_at_once_with_its_copies_and_answered_late() -> None:
    wire = FakeWire(size=20)
    trickle = {"bytes": 4, "every": 0.25}
    action = _action(
        (Effect.DELAY, {"seconds": 1.5}),
        (Effect.TRICKLE, trickle),
        (Effect.DUPLICATE, {"copies": 1}),
    )
    carry_out(action, wire)
    late = 1.5 + ipmi_trickle_delay(20, (4, 0.25))
    assert wire.served == [1]
    assert wire.sent == [(late, ("reply", 20))]
    assert answer_time(action, 20) == late


def test_a_trickled_error_takes_as_long_as_an_answer_with_no_data() -> None:
    wire = FakeWire(size=500)
    carry_out(_action((Effect.TRICKLE, {"bytes": 8, "every": 0.5}), (Effect.BUSY, {})), wire)
    assert wire.sent == [(ipmi_trickle_delay(0, (8, 0.5)), ("answer", 0xC0))]


@pytest.fixture
def executing_busy(monkeypatch: pytest.MonkeyPatch) -> str:
    """An IPMI incident that executes before answering: none is recorded
    yet, but the executor keeps the rule the Redfish one has."""
    name = "ipmi-node-busy"
    monkeypatch.setitem(INCIDENTS, name, dataclasses.replace(INCIDENTS[name], executes=True))
    return name


def test_an_executing_incident_is_served_then_answered_with_its_code(executing_busy: str) -> None:
    wire = FakeWire()
    carry_out(_action((Effect.INCIDENT, {"incident": executing_busy})), wire)
    assert wire.served == [0]
    assert wire.sent == [(0.0, ("answer", 0xC0))]


def test_an_executing_incident_keeps_a_refusal(executing_busy: str) -> None:
    wire = FakeWire(refuse=True)
    carry_out(_action((Effect.INCIDENT, {"incident": executing_busy})), wire)
    assert wire.sent == [(0.0, ("refused",))]
