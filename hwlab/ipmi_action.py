"""The one executor of in-session IPMI requests, for the IPMI emulator
(:mod:`bmaas.hwlab.ipmi.bmc`) and the IPMI proxy (:mod:`bmaas.hwlab.proxy.ipmi`) alike.

What a fired :class:`~bmaas.fakes.effects.Action` does to one request is decided
here, once; each server says only how it sends, through a :class:`Wire`
(the Redfish servers' executor is :func:`bmaas.hwlab.answers.carry_out`)::

    silent   hang, drop, bmc_reboot   nothing is sent; carry_out is False
    answer   busy, internal_error,    wire.answer(code), the code from
             unsupported, auth_fail,  bmaas.hwlab.answers.IPMI_CODES, at
             an IPMI incident         answer_time(action, 0); not served
    corrupt  malformed_reply          wire.malformed(copies), at
                                      answer_time(action, 0)
    serve    anything else            wire.serve(copies) at once, its send at
                                      answer_time(action, the answer's bytes);
                                      an incident that executes is served,
                                      then answered with its code

    answer_time = delay + the time a trickled datagram takes to come whole

An incident with no IPMI answer (``ipmi_code`` None) is served as usual.
Retransmissions of one request are carried out again with the same action.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Protocol

from bmaas.fakes.effects import Action
from bmaas.hwlab.answers import executes, ipmi_code, ipmi_trickle_delay

__all__ = ["Served", "Wire", "answer_time", "carry_out"]


@dataclasses.dataclass(frozen=True)
class Served:
    """A request served by :meth:`Wire.serve`: its answer, not yet sent."""

    #: data bytes of the answer, which a trickle takes time over
    size: int
    #: put the answer on the wire
    send: Callable[[], None]
    #: False when refused before being served (no privilege): an executing
    #: incident then keeps the refusal, as nothing was carried out
    served: bool = True


class Wire(Protocol):
    """How one server sends the answers to one request.

    The emulator answers for the BMC it is; the proxy forges in the real
    BMC's name (it holds the session keys) and relays what it serves.
    """

    def later(self, seconds: float, send: Callable[[], None]) -> None:
        """Run ``send`` after ``seconds``; at once when 0."""

    def answer(self, code: int) -> None:
        """Send, in the BMC's place, a reply with completion ``code`` and no data."""

    def malformed(self, copies: int) -> None:
        """Send a reply the protocol does not allow. The emulator answers one
        without acting on the request (as :class:`bmaas.fakes.driver.FakeDriver`);
        the proxy relays the request 1 + ``copies`` times and strips the
        real BMC's answer (it cannot stop a real BMC from acting)."""

    def serve(self, copies: int) -> Served:
        """Serve the request 1 + ``copies`` times, as far as this server does
        before its answer leaves: the emulator acts now (its answer is
        known); the proxy relays when the answer is sent (the size of the
        request stands in for the answer's, not yet known)."""


def answer_time(action: Action, data_bytes: int) -> float:
    """Seconds until an answer of ``data_bytes`` leaves: the delay, then the
    trickle (one datagram cannot arrive in pieces: it comes whole when its
    last byte would)."""
    if action.trickle is None:
        return action.delay
    return action.delay + ipmi_trickle_delay(data_bytes, action.trickle)


def carry_out(action: Action, wire: Wire) -> bool:
    """Carry out one in-session IPMI request's ``action`` on ``wire``, as the
    module docstring's table says; False when nothing is ever sent."""
    if action.silent is not None:
        return False
    code = ipmi_code(action.answer) if action.answer is not None else None
    if code is not None and not executes(action.answer):
        wire.later(answer_time(action, 0), partial(wire.answer, code))
    elif action.corrupt is not None:
        wire.later(answer_time(action, 0), partial(wire.malformed, action.copies))
    else:
        served = wire.serve(action.copies)
        if code is not None and served.served:
            # carried out, then answered as a resent copy would be ("already on")
            wire.later(answer_time(action, 0), partial(wire.answer, code))
        else:
            wire.later(answer_time(action, served.size), served.send)
    return True
