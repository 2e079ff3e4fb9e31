"""One emulated BMC: a pyghmi ``Bmc`` over a :class:`~bmaas.fakes.machine.FakeMachine`.

Like virtualbmc, this subclasses ``pyghmi.ipmi.bmc.Bmc`` and keeps its
vocabulary (``power_on``, ``get_boot_device``, ...), with a simulated machine
instead of libvirt. Unlike virtualbmc, every request first goes through the
machine's :class:`~bmaas.fakes.faults.FaultPlan`; what fires is decided by
:func:`bmaas.fakes.effects.decide` and, in a session, carried out by
:func:`bmaas.hwlab.ipmi_action.carry_out` (the IPMI proxy's executor too).
Answers come from the tables the proxy answers from too
(:data:`bmaas.hwlab.answers.IPMI_CODES`, ``IPMI_LOGIN_ANSWERS``), and
requests are named by :data:`bmaas.hwlab.operations.IPMI_COMMANDS`. A login
is evaluated once, at its first packet (Get Channel Authentication
Capabilities); every other request once, so a client call that sends three
requests is three evaluations. Hardware effects go to the machine with the
request that carries them.
"""

from __future__ import annotations

import dataclasses
import hmac
import logging
import socket
import struct
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from pyghmi.ipmi import bmc as _pyghmi_bmc

from bmaas.driver import BootDevice, Operation, PowerAction, PowerState
from bmaas.fakes.effects import Action, Effect, decide
from bmaas.fakes.faults import Firing
from bmaas.fakes.machine import FakeMachine
from bmaas.hwlab.answers import LoginPhase, ipmi_login_answer, ipmi_login_status
from bmaas.hwlab.ipmi import extra
from bmaas.hwlab.ipmi.fru import build_fru
from bmaas.hwlab.ipmi.session import (
    CIPHER_SUITES,
    RMCP_ILLEGAL_PARAMETER,
    RMCP_INSUFFICIENT_RESOURCES,
    RMCP_NO_CIPHER_SUITE_MATCH,
    EventLoop,
    LabSession,
    LoginFaults,
    RequestContext,
    negotiate,
)
from bmaas.hwlab.ipmi_action import Served, answer_time, carry_out
from bmaas.hwlab.operations import ipmi_operation

__all__ = ["LabBmc"]

LOG = logging.getLogger(__name__)

#: sessions one BMC holds at once; more get RMCP+ status 0x01 (real BMCs allow 4-32)
MAX_SESSIONS = 32
#: seconds without a packet after which a session is forgotten (a common BMC default)
#: a login begun by Get Channel Authentication Capabilities waits this long for
#: its Open Session (pyghmi retransmits within 2 s; the IPMI proxy's LOGIN_IDLE)
LOGIN_IDLE = 2.5
SESSION_IDLE_TIMEOUT = 60.0
#: largest Read FRU Data count answered; more gets 0xCA, as on small BMCs
MAX_FRU_READ = 224

_RMCP_IPMI = b"\x06\x00\xff\x07"
_NAMESPACE = uuid.UUID("6f1c3e64-3d0b-4b8e-9d57-2d1f0f6f7a10")


#: requests that change the machine need Operator privilege (IPMI 2.0 appendix G)
_NEEDS_OPERATOR = {(0x00, 0x02), (0x00, 0x08)}

# boot flags device selector (Set System Boot Options parameter 5, data 2 bits 5:2)
_BOOT_CODES = {BootDevice.PXE: 1, BootDevice.DISK: 2, BootDevice.CDROM: 5, BootDevice.BIOS: 6}
_BOOT_DEVICES = {code: device for device, code in _BOOT_CODES.items()}


def _checksum(data: bytes) -> int:
    return -sum(data) & 0xFF


class LabBmc(_pyghmi_bmc.Bmc):
    """The BMC of one simulated machine, on one UDP socket."""

    def __init__(
        self,
        server: EventLoop,
        machine: FakeMachine,
        sock: socket.socket,
        *,
        username: str,
        password: str,
        cipher_suites: tuple[int, ...] = (17, 3),
    ) -> None:
        # Deliberately not calling IpmiServer.__init__: it binds through
        # pyghmi's process-global socket list and IO thread, which belong to
        # pyghmi's *client* and would tie every BMC to one select() loop.
        self.server = server
        self.machine = machine
        self.name = machine.name
        self.socket = sock
        self.port = sock.getsockname()[1]
        self.uuid = uuid.uuid5(_NAMESPACE, machine.name)
        self.suites = cipher_suites
        self._username = username.encode("utf-8")
        self._password = password.encode("utf-8")
        self.sessions: dict[Any, LabSession] = {}
        #: logins begun (Get Channel Authentication Capabilities): their one evaluation
        self._logins: dict[Any, tuple[Action, float]] = {}
        #: sessions opened so far, and the most held at once (hwlab status "sessions")
        self.logins = 0
        self.peak_sessions = 0
        self._reboot_seen = machine.bmc_down_until
        self._control_fault_at: float | None = None
        self._fru = build_fru(
            manufacturer=machine.hardware.vendor,
            model=machine.hardware.model,
            serial=machine.hardware.serial,
        )

    def __repr__(self) -> str:
        return f"<LabBmc {self.name} 127.0.0.1:{self.port} sessions={len(self.sessions)}>"

    # -- credentials -----------------------------------------------------------

    def knows_user(self, name: bytes) -> bool:
        return hmac.compare_digest(name, self._username)

    def user_key(self) -> bytes:
        """Kuid, the user's password."""
        return self._password

    # -- packets in ------------------------------------------------------------

    def datagram(self, data: bytes, addr: Any) -> None:
        """Route one datagram: ASF ping, sessionless IPMI, a new login, or a session."""
        if self.machine.bmc_down_until != self._reboot_seen:
            self._reboot_seen = self.machine.bmc_down_until
            self.sessions.clear()  # a rebooted BMC remembers no session
        if self.machine.bmc_down() or len(data) < 4 or data[0] != 0x06:
            return
        if data[3] == 0x06:
            self._asf(data, addr)
        elif data[:4] != _RMCP_IPMI or len(data) < 14:
            return
        elif data[4] == 0x00:
            self._sessionless(data, addr, msg_at=14)
        elif data[4] == 0x06 and len(data) >= 16:
            ptype = data[5] & 0x3F
            (length,) = struct.unpack_from("<H", data, 14)
            if ptype == 0x10:
                self._open_session(bytes(data[16 : 16 + length]), addr)
            elif ptype == 0x00 and data[6:10] == b"\x00\x00\x00\x00":
                self._sessionless(data, addr, msg_at=16)
            elif (session := self.sessions.get(addr)) is not None:
                session.receive(bytearray(data))

    def send(self, packet: bytes, addr: Any) -> None:
        self.server.sendto(self.socket, packet, addr)

    def drop_session(self, session: LabSession) -> None:
        session.closed = True
        if self.sessions.get(session.sockaddr) is session:
            del self.sessions[session.sockaddr]

    # -- sessionless messages --------------------------------------------------

    def _asf(self, data: bytes, addr: Any) -> None:
        """Answer an RMCP Presence Ping (DSP0136) with a Pong saying "IPMI here"."""
        if len(data) < 12 or data[4:8] != b"\x00\x00\x11\xbe" or data[8] != 0x80:
            return
        pong = b"\x00\x00\x11\xbe" + bytes(4) + bytes([0x81, 0]) + bytes(6)
        self.send(
            b"\x06\x00\xff\x06\x00\x00\x11\xbe\x40" + bytes([data[9], 0, len(pong)]) + pong, addr
        )

    def _sessionless(self, data: bytes, addr: Any, *, msg_at: int) -> None:
        msg = data[msg_at:]
        if len(msg) < 7 or msg[1] >> 2 != 0x06:
            return
        command, body = msg[5], msg[6:-1]
        code, later = 0, 0.0
        if command == 0x38:  # Get Channel Authentication Capabilities: a login starts
            action = self._start_login(addr)
            if action.silent is not None:
                return
            answer = ipmi_login_answer(action.answer) if action.answer is not None else None
            if answer is not None and answer.phase is LoginPhase.CHANNEL_AUTH:
                self._logins.pop(addr, None)  # the login ends here
                code, reply, later = answer.code, b"", answer_time(action, 0)
            else:
                # channel 1; IPMI 2.0 extended data; non-null user names; IPMI 2.0 only
                reply = bytes([1, 0x80, 0x04, 0x02, 0, 0, 0, 0])
        elif command == 0x54:  # Get Channel Cipher Suites
            index = body[2] & 0x3F if len(body) > 2 else 0
            records = b"".join(CIPHER_SUITES[n].record() for n in self.suites)
            reply = bytes([1]) + records[index * 16 : index * 16 + 16]
        else:
            return  # nothing else is answered before a session exists
        head = bytes([msg[3], ((msg[1] >> 2) + 1) << 2 | (msg[4] & 0x03)])
        tail = bytes([msg[0], (msg[4] & 0xFC) | (msg[1] & 0x03), command, code]) + reply
        message = head + bytes([_checksum(head)]) + tail + bytes([_checksum(tail)])
        if msg_at == 16:
            frame = bytes([6, 0]) + bytes(8) + struct.pack("<H", len(message))
        else:
            frame = bytes(9) + bytes([len(message)])
        self.server.call_later(later, self.send, _RMCP_IPMI + frame + message, addr)

    # -- login -----------------------------------------------------------------

    def _start_login(self, addr: Any) -> Action:
        """Evaluate the plan for a login, once, at its first packet (Get
        Channel Authentication Capabilities, as the IPMI proxy does); its
        Open Session within :data:`LOGIN_IDLE` seconds goes on from there."""
        self._expire_idle()
        held = sum(1 for a, s in self.sessions.items() if not s.closed and a != addr)
        action = self.judge(Operation.LOGIN, sessions=held)
        self._logins[addr] = (action, self.server.now())
        return action

    def _open_session(self, request: bytes, addr: Any) -> None:
        started = self._logins.pop(addr, None)
        if started is not None and self.server.now() - started[1] <= LOGIN_IDLE:
            action = started[0]
        else:  # a client that skipped Get Channel Authentication Capabilities
            action = self._start_login(addr)
            self._logins.pop(addr, None)
        if action.silent is not None or len(request) < 8:
            return
        fault = action.answer.effect if action.answer is not None else None
        if action.corrupt is not None and fault is None:
            fault = Effect.MALFORMED_REPLY
        later = answer_time(action, 24)
        self._expire_idle()
        suite = negotiate(request, self.suites)
        status = 0
        refusal = ipmi_login_status(action.answer) if action.answer is not None else None
        if refusal is not None:
            status = refusal
        elif fault is Effect.UNSUPPORTED or suite is None:
            status = RMCP_NO_CIPHER_SUITE_MATCH
        elif len(request) < 32:
            status = RMCP_ILLEGAL_PARAMETER
        elif len(self.sessions) >= MAX_SESSIONS and addr not in self.sessions:
            status = RMCP_INSUFFICIENT_RESOURCES
        if status or suite is None:
            reply = bytes([request[0], status, 0, 0]) + request[4:8]
            head = _RMCP_IPMI + bytes([6, 0x11]) + bytes(8) + struct.pack("<H", len(reply))
            self.server.call_later(later, self.send, head + reply, addr)
            return
        faults = LoginFaults(
            auth_fail=fault is Effect.AUTH_FAIL,
            malformed=fault is Effect.MALFORMED_REPLY,
        )
        self.server.call_later(later, self._start_session, addr, request, suite, faults)

    def _start_session(self, addr: Any, request: bytes, suite: Any, faults: LoginFaults) -> None:
        old = self.sessions.pop(addr, None)
        if old is not None:
            old.closed = True  # the client started over from the same address
        self.sessions[addr] = LabSession(self, addr, request, suite, faults)
        self.logins += 1
        self.peak_sessions = max(self.peak_sessions, self.open_sessions())

    def open_sessions(self) -> int:
        """Sessions held now (a rebooted BMC, or one idle past its timeout, holds none).
        Read-only: the control thread may ask while the server thread serves."""
        if self.machine.bmc_down() or self._reboot_seen != self.machine.bmc_down_until:
            return 0  # the reboot wiped them; the next datagram clears the table
        cutoff = self.server.now() - SESSION_IDLE_TIMEOUT
        held = list(self.sessions.values())
        return sum(1 for s in held if not s.closed and s.last_seen >= cutoff)

    def _expire_idle(self) -> None:
        cutoff = self.server.now() - SESSION_IDLE_TIMEOUT
        for session in [s for s in self.sessions.values() if s.last_seen < cutoff]:
            self.drop_session(session)

    # -- faults ------------------------------------------------------------------

    def judge(self, operation: Operation, *, sessions: int | None = None) -> Action:
        """Evaluate the fault plan for one request (``sessions``: held now,
        for a login) and take the BMC down when ``bmc_reboot`` fires."""
        firings = self.machine.plan.evaluate(str(operation), protocol="ipmi", sessions=sessions)
        action = decide(firings)
        if action.reboot is not None:
            self.machine.reboot_bmc(action.reboot)
        return action

    def handle_request(self, session: LabSession, ctx: RequestContext, data: bytes) -> None:
        """One IPMI request inside an established session."""
        operation = ipmi_operation(ctx.netfn, ctx.command)
        if operation is None:
            session.respond(ctx, *self._unjudged(ctx, data))
            return
        action = self.judge(operation)
        carry_out(action, _Answering(self, session, ctx, data, action.hardware))

    def serve(
        self, session: LabSession, ctx: RequestContext, data: bytes, hw: list[Firing], copies: int
    ) -> Served:
        """Act on one request 1 + ``copies`` times; its answer, to be sent."""
        if (ctx.netfn, ctx.command) in _NEEDS_OPERATOR and session.clientpriv < 3:
            refused = partial(session.respond, ctx, 0xD4, b"")  # insufficient privilege
            return Served(0, refused, served=False)
        # A duplicated request is acted on every time it arrives; the
        # client keeps the first answer (same sequence number).
        for _ in range(copies):
            self._execute(ctx, data, hw)
        code, reply = self._execute(ctx, data, hw)
        return Served(len(reply), partial(session.respond, ctx, code, reply))

    def _unjudged(self, ctx: RequestContext, data: bytes) -> tuple[int, bytes]:
        """Commands no fault rule names (see :mod:`bmaas.hwlab.ipmi.extra`)."""
        return extra.answer(ctx.netfn, ctx.command, data, self.machine.name)

    def _execute(self, ctx: RequestContext, data: bytes, hw: list[Firing]) -> tuple[int, bytes]:
        key = (ctx.netfn, ctx.command)
        if key == (0x00, 0x02):
            return self._chassis_control(data, hw)
        if key == (0x00, 0x08):
            return self._set_boot_options(data, hw)
        self.machine.apply(hw)  # power_lost and friends need no request of their own
        if key == (0x06, 0x01):
            return 0, self._device_id()
        if key == (0x00, 0x01):
            return 0, self._chassis_status()
        if key == (0x00, 0x09):
            return self._get_boot_options(data)
        if key == (0x0A, 0x10):
            return (
                (0, struct.pack("<HB", len(self._fru), 0)) if data[:1] == b"\x00" else (0xCB, b"")
            )
        return self._read_fru(data)

    # -- commands ----------------------------------------------------------------

    def _device_id(self) -> bytes:
        # device 0x20, revision 1, firmware 1.00, IPMI 2.0, chassis, FRU, SEL
        # and SDR repository devices, manufacturer 0 (unspecified), product
        # 0x4C42 ("LB")
        return bytes([0x20, 0x01, 0x01, 0x00, 0x02, 0x8E, 0, 0, 0, 0x42, 0x4C, 0, 0, 0, 0])

    def get_power_state(self) -> PowerState:
        return self.machine.settled_power

    def _chassis_status(self) -> bytes:
        machine = self.machine
        current = 0x01 if self.get_power_state() is PowerState.ON else 0x00
        last_event = 0
        # A latched power fault shows while the machine is off and no power-on
        # is under way (the BMC is trying again once one is).
        if machine.power_fault and machine.power_state() is PowerState.OFF:
            current |= 0x08
            last_event |= 0x08
        if self._control_fault_at is not None and self.server.now() >= self._control_fault_at:
            current |= 0x10  # power control fault: commanded, never changed
        return bytes([current, last_event, 0])

    def _chassis_control(self, data: bytes, hw: list[Firing]) -> tuple[int, bytes]:
        actions = {
            0: PowerAction.OFF,
            1: PowerAction.ON,
            2: PowerAction.REBOOT,
            3: PowerAction.REBOOT,
            5: PowerAction.SOFT_OFF,
        }
        directive = data[0] & 0x0F if data else -1
        if directive not in actions:
            return 0xCC, b""  # invalid data field (includes the diagnostic interrupt)
        if directive == 2 and self.machine.settled_power is PowerState.OFF:
            return 0xD5, b""  # power cycle has no effect on a machine that is off
        action = actions[directive]
        if directive == 3:
            # A hard reset pulls the reset line: power stays on, and chassis
            # status reads on all through, as on real BMCs. A power cycle (2)
            # is the one that passes through off.
            self.machine.reset(hw)
        else:
            self.machine.set_power(action, hw)
        self._note_stuck(action, any(f.effect is Effect.POWER_STUCK for f in hw))
        return 0, b""

    def _note_stuck(self, action: PowerAction, stuck: bool) -> None:
        """A BMC that commanded power and saw nothing change reports a power
        control fault once the transition should have landed."""
        if not stuck:
            self._control_fault_at = None
            return
        hw = self.machine.hardware
        took = {PowerAction.OFF: hw.power_off_time, PowerAction.SOFT_OFF: hw.soft_off_time}
        self._control_fault_at = self.server.now() + took.get(action, hw.power_on_time)

    def _get_boot_options(self, data: bytes) -> tuple[int, bytes]:
        parameter = data[0] & 0x7F if data else -1
        if parameter == 5:
            setting = self.machine.boot_device()
            flags = 0x80 | (0x40 if setting.persistent else 0)
            # a fake machine only ever holds a BootDevice (never an OtherBootDevice)
            code = _BOOT_CODES[BootDevice(setting.device)]
            return 0, bytes([1, 5, flags, code << 2, 0, 0, 0])
        if parameter in (0, 3, 4):
            return 0, bytes([1, parameter, 0])
        return 0x80, b""  # parameter not supported

    def _set_boot_options(self, data: bytes, hw: list[Firing]) -> tuple[int, bytes]:
        parameter = data[0] & 0x7F if data else -1
        if parameter in (0, 3, 4):
            return 0, b""  # set-in-progress and acknowledge flags: accepted, not modelled
        if parameter != 5 or len(data) < 3:
            return 0x80 if parameter != 5 else 0xC7, b""
        flags, selector = data[1], (data[2] >> 2) & 0x0F
        if not flags & 0x80 or selector == 0:
            return 0, b""  # "no override": the machine keeps its boot order
        device = _BOOT_DEVICES.get(selector)
        if device is None:
            return 0xCC, b""
        self.machine.set_boot_device(device, persistent=bool(flags & 0x40), firings=hw)
        return 0, b""

    def _read_fru(self, data: bytes) -> tuple[int, bytes]:
        if len(data) < 4:
            return 0xC7, b""
        if data[0] != 0:
            return 0xCB, b""
        offset, count = data[1] | data[2] << 8, data[3]
        if count > MAX_FRU_READ:
            return 0xCA, b""
        chunk = self._fru[offset : offset + count]
        return 0, bytes([len(chunk)]) + chunk


@dataclasses.dataclass(frozen=True)
class _Answering:
    """The :class:`~bmaas.hwlab.ipmi_action.Wire` of one request to the emulator:
    the BMC answers for itself."""

    bmc: LabBmc
    session: LabSession
    ctx: RequestContext
    data: bytes
    hardware: list[Firing]

    def later(self, seconds: float, send: Callable[[], None]) -> None:
        self.bmc.server.call_later(seconds, send)

    def answer(self, code: int) -> None:
        self.session.respond(self.ctx, code, b"")

    def malformed(self, copies: int) -> None:
        self.session.respond(self.ctx, 0, (), malformed=True)

    def serve(self, copies: int) -> Served:
        return self.bmc.serve(self.session, self.ctx, self.data, self.hardware, copies)
