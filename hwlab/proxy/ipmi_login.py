"""The login half of the IPMI relay: one ``login`` operation per RMCP+ login.

A login is several packets (Get Channel Auth Capabilities, maybe Get Channel
Cipher Suites, Open Session, RAKP 1 and 3 from the client; Open Session
Response, RAKP 2 and 4 from the BMC). The plan is evaluated once, at its
first packet; wire effects apply to that packet (and to each retransmission
of it: the same verdict), and each BMC effect waits
for the phase :data:`bmaas.hwlab.answers.IPMI_LOGIN_ANSWERS` names (the table the
emulator answers from too; the login is in the clear, so no key is needed):
internal_error answers Get Channel Auth Capabilities, busy, session_limit
and unsupported answer Open Session, auth_fail answers RAKP1, and
malformed_reply strips the BMC's RAKP2. Retransmitted packets (same bytes)
get the same treatment, and a login with no packet for :data:`LOGIN_IDLE`
seconds is over.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field

from bmaas.driver import Operation
from bmaas.fakes.effects import Effect, decide
from bmaas.fakes.faults import Firing
from bmaas.hwlab.answers import IPMI_CODES, LoginPhase, ipmi_login_answer, ipmi_trickle_delay
from bmaas.hwlab.proxy import rmcp
from bmaas.hwlab.proxy.base import Proxy
from bmaas.hwlab.proxy.ipmi_session import Login, Session, Verdict
from bmaas.hwlab.proxy.rmcp import Message, Packet, PayloadType

__all__ = ["CODES", "LOGIN_IDLE", "Client", "LoginRelay"]

_GCAC = (0x06, 0x38)  # Get Channel Authentication Capabilities: a login starts
#: completion codes a BMC effect answers with (the one IPMI table)
CODES = IPMI_CODES

#: a login with no packet for this long is over (pyghmi retransmits within 2 s)
LOGIN_IDLE = 2.5


@dataclass
class Client:
    """One client address, with its own socket to the BMC."""

    addr: tuple[str, int]
    sock: socket.socket
    last_seen: float
    login: Login | None = None
    by_bmc: dict[int, Session] = field(default_factory=dict)
    by_console: dict[int, Session] = field(default_factory=dict)
    #: verdicts of requests recognised by their bytes (sessionless, opaque)
    recent: dict[bytes, Verdict] = field(default_factory=dict)


class LoginRelay(Proxy):
    """Login handling for :class:`bmaas.hwlab.proxy.ipmi.IPMIProxy`, which provides
    the sockets (``to_bmc``, ``to_client``) and the reboot epoch."""

    _epoch: int

    def to_bmc(self, client: Client, data: bytes) -> None:
        raise NotImplementedError

    def to_client(self, client: Client, data: bytes) -> None:
        raise NotImplementedError

    def _login(self, client: Client, packet: Packet, message: Message | None) -> None:
        now = self.loop.time()
        login = client.login
        if login is not None and packet.raw in login.actions and now - login.last < LOGIN_IDLE:
            login.last = now
            self.counters["retransmits"] += 1
            self._replay(client, packet, login.actions[packet.raw])
            return
        is_gcac = message is not None and (message.netfn, message.cmd) == _GCAC
        if (
            login is None
            or login.done
            or now - login.last > LOGIN_IDLE
            or (is_gcac and login.saw_open)  # the client starts over
        ):
            login = client.login = self._new_login(client, packet, now)
        login.last = now
        login.saw_gcac = login.saw_gcac or is_gcac
        if login.dropped:
            login.actions[packet.raw] = ("drop", b"")
            self.counters["dropped"] += 1
            return
        action = self._login_stage(login, packet, message)
        login.actions[packet.raw] = action
        self._replay(client, packet, action)

    def _new_login(self, client: Client, packet: Packet, now: float) -> Login:
        action = decide(self.evaluate(Operation.LOGIN), machine=False)
        login = Login(started=now, last=now, opening=packet.raw)
        for firing, why in action.skipped:
            self.skipped(firing, why)
        # BMC answers wait for the login stage that can show them (below).
        waiting = [f for f in (action.answer, action.corrupt) if f is not None]
        for firing in action.carried:
            if any(firing is f for f in waiting):
                login.pending[firing.effect] = firing
            else:
                self.carried(firing)
        if action.reboot is not None:
            self.reboot(action.reboot)
            login = Login(started=now, last=now, opening=packet.raw)  # nothing left pending
        login.dropped = action.silent is not None
        login.delay = action.delay
        login.trickle = action.trickle
        login.copies = action.copies
        return login

    def _login_stage(
        self, login: Login, packet: Packet, message: Message | None
    ) -> tuple[str, bytes]:
        """What to do with one client packet of a login: forward, or answer
        (from :data:`bmaas.hwlab.answers.IPMI_LOGIN_ANSWERS`, at the phase it names)."""
        if message is not None:
            if (message.netfn, message.cmd) == _GCAC:
                found = self._due(login, LoginPhase.CHANNEL_AUTH)
                if found is not None:
                    firing, code = found
                    answer = rmcp.response_message(message, code)
                    return self._login_answer(login, firing, packet, answer)
            return ("forward", b"")
        payload = packet.payload
        if packet.payload_type == PayloadType.OPEN_SESSION_REQUEST:
            login.open_request(payload)
            for effect, firing in list(login.pending.items()):
                answer_at = ipmi_login_answer(firing)
                if answer_at is not None and answer_at.phase is LoginPhase.CHANNEL_AUTH:
                    self.skipped(
                        login.pending.pop(effect),
                        "the login did not start with Get Channel Authentication Capabilities",
                    )
            found = self._due(login, LoginPhase.OPEN_SESSION)
            if found is not None:
                firing, status = found
                answer = bytes([login.tag, status, 0, 0]) + payload[4:8]
                return self._login_answer(login, firing, packet, answer)
        elif packet.payload_type == PayloadType.RAKP1:
            login.rakp1(payload)
            found = self._due(login, LoginPhase.RAKP2)
            if found is not None:
                firing, status = found
                sid = struct.pack("<I", login.console_sid)
                answer = bytes([login.tag, status, 0, 0]) + sid
                return self._login_answer(login, firing, packet, answer)
        return ("forward", b"")

    @staticmethod
    def _due(login: Login, phase: LoginPhase) -> tuple[Firing, int] | None:
        """The pending effect that answers at ``phase`` (taken off the
        login), and its code."""
        for effect, firing in login.pending.items():
            answer = ipmi_login_answer(firing)
            if answer is not None and answer.phase is phase:
                del login.pending[effect]
                return firing, answer.code
        return None

    def _login_answer(
        self, login: Login, firing: Firing, packet: Packet, payload: bytes
    ) -> tuple[str, bytes]:
        login.done = True
        self.carried(firing)
        self.counters["answered"] += 1
        return ("reply", rmcp.build_sessionless(packet, payload))

    def _replay(self, client: Client, packet: Packet, action: tuple[str, bytes]) -> None:
        kind, data = action
        if kind == "drop":
            self.counters["dropped"] += 1
            return
        login = client.login
        delay, copies = 0.0, 0
        if login is not None and packet.raw == login.opening:
            # A login's delay and duplicate apply to its first packet, and to
            # each retransmission of it: a late login stays late, as the
            # emulator's (and as a request retransmitted in a session).
            delay, copies = login.delay, login.copies
        if login is not None and login.trickle is not None:
            # Every answer of a trickling BMC's login comes late, not just the first.
            delay += ipmi_trickle_delay(len(packet.raw), login.trickle)

        def send() -> None:
            if kind == "reply":
                self.to_client(client, data)
            else:
                for _ in range(1 + copies):
                    self.to_bmc(client, packet.raw)

        if delay:
            self.later(delay, send)
        else:
            send()

    def _login_reply(self, client: Client, login: Login, packet: Packet) -> bytes:
        login.last = self.loop.time()
        payload, spec = packet.payload, self.spec
        if packet.payload_type == PayloadType.OPEN_SESSION_RESPONSE:
            login.done = not login.open_response(payload)
        elif packet.payload_type == PayloadType.RAKP2:
            login.done = not login.rakp2(payload, spec.username, spec.password, spec.node)
            if not login.done and Effect.MALFORMED_REPLY in login.pending:
                self.carried(login.pending.pop(Effect.MALFORMED_REPLY))
                login.done = True
                return rmcp.sessionless(PayloadType.RAKP2, payload[:40])
        else:
            login.done = True
            session = login.session(payload, spec.password, spec.kg, spec.node)
            if session is not None:
                session.epoch = self._epoch
                client.by_bmc[session.bmc_sid] = session
                client.by_console[session.console_sid] = session
                self.counters["sessions_readable" if session.keys else "sessions_opaque"] += 1
        if login.done:
            for firing in login.pending.values():
                self.skipped(firing, "the login ended before the stage that shows it")
            login.pending.clear()
        return packet.raw
