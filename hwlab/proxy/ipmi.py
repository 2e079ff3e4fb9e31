"""A fault-injecting UDP relay in front of an IPMI BMC.

Each client address gets its own upstream socket, so the BMC sees one peer
per client exactly as without the proxy. Every request is mapped to an
operation (:data:`bmaas.hwlab.operations.IPMI_COMMANDS`; the whole login exchange
is one ``login``)
and the node's fault plan is evaluated **once per request**: a
retransmission reuses the first transmission's verdict. Retransmissions are
recognised by their bytes (pyghmi resends the same packet), and in readable
sessions by (netfn, command, rqSeq, data) too (ipmitool rebuilds the packet
with a new session sequence number); an unreadable retransmission with new
bytes counts as a new request.

Each effect is decided by :func:`bmaas.fakes.effects.decide` and carried out by
:func:`bmaas.hwlab.ipmi_action.carry_out`, the IPMI emulator's executor too,
answering in-session requests from :data:`bmaas.hwlab.answers.IPMI_CODES`. Proxy
specifics: hang, drop and bmc_reboot relay nothing (bmc_reboot: for
``duration`` s, and sessions opened before are dropped afterwards); delay
relays late; duplicate relays 1 + ``copies`` times; malformed_reply strips
the data from the BMC's answer; trickle holds a relayed request as long as a
datagram its size would take to dribble in (a forged answer: one with no
data); power_stuck answers Chassis Control with completion code 0 in the
BMC's place and never relays it (the one hardware effect a proxy carries
out: :data:`bmaas.hwlab.proxy.effects.ACKNOWLEDGED`). The login has its own
answers (:mod:`bmaas.hwlab.proxy.ipmi_login`).

Answers in the BMC's place inside a session need the session keys (see
:mod:`bmaas.hwlab.proxy.ipmi_session`), hence the BMC credentials on the proxy.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
from collections.abc import Callable
from functools import partial

from bmaas.fakes.effects import decide
from bmaas.fakes.faults import FaultPlan, Firing
from bmaas.hwlab.ipmi_action import Served, carry_out
from bmaas.hwlab.operations import ipmi_operation
from bmaas.hwlab.proxy import rmcp
from bmaas.hwlab.proxy.effects import ACKNOWLEDGED, OPAQUE
from bmaas.hwlab.proxy.ipmi_login import Client, LoginRelay
from bmaas.hwlab.proxy.ipmi_session import Session, Verdict
from bmaas.hwlab.proxy.rmcp import Message, Packet, PayloadType
from bmaas.hwlab.proxy.spec import ProxySpec

__all__ = ["IPMIProxy"]

LOG = logging.getLogger(__name__)

#: sessionless commands of a login: channel auth capabilities, cipher suites, 1.5 challenge
_SESSIONLESS_LOGIN = {(0x06, 0x38), (0x06, 0x54), (0x06, 0x39)}
_SESSION_HOUSEKEEPING = {(0x06, 0x3B), (0x06, 0x3C), (0x06, 0x3A)}  # privilege, close, 1.5

#: a request's verdict is kept this long after its last transmission
RETRANSMIT_WINDOW = 5.0
#: clients silent this long are forgotten and their upstream socket closed
CLIENT_IDLE = 120.0


class IPMIProxy(LoginRelay):
    protocol = "ipmi"

    def __init__(
        self,
        spec: ProxySpec,
        plan: FaultPlan,
        *,
        events: Callable[[Firing], None] | None = None,
    ) -> None:
        super().__init__(spec, plan, events=events)
        self._sock: socket.socket | None = None
        self._clients: dict[tuple[str, int], Client] = {}
        self._upstream: tuple[int, tuple[str, int]] | None = None
        self._epoch = 0
        #: (client, BMC session id) of sessions lost in a BMC reboot
        self._dead: set[tuple[tuple[str, int], int]] = set()

    async def start(self) -> int:
        self._loop = asyncio.get_running_loop()
        spec = self.spec
        infos = await self._loop.getaddrinfo(
            spec.upstream_host, spec.upstream_port, type=socket.SOCK_DGRAM
        )
        family, address = infos[0][0], infos[0][4]
        self._upstream = (family, (str(address[0]), int(address[1])))
        family = socket.AF_INET6 if ":" in spec.listen_host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.bind((spec.listen_host, spec.listen_port))
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._loop.add_reader(sock, self._read, sock, None)
        self.later(30.0, self._sweep)
        return self.port

    async def stop(self) -> None:
        await super().stop()
        for client in list(self._clients.values()):
            self._forget(client)
        if self._sock is not None:
            self.loop.remove_reader(self._sock)
            self._sock.close()
            self._sock = None

    def flush(self) -> None:
        for client in self._clients.values():
            client.recent.clear()
            client.login = None
            for session in client.by_bmc.values():
                session.recent.clear()

    def status(self) -> dict[str, object]:
        sessions = [s for c in self._clients.values() for s in c.by_bmc.values()]
        return {
            **super().status(),
            "clients": len(self._clients),
            "sessions": len(sessions),
            "readable_sessions": sum(1 for s in sessions if s.keys is not None),
            "credentials": self.spec.credentials,
        }

    def reboot(self, duration: float) -> None:
        super().reboot(duration)
        self._epoch += 1
        for client in self._clients.values():
            client.login = None

    # -- sockets -------------------------------------------------------------------

    def _read(self, sock: socket.socket, client: Client | None) -> None:
        for _ in range(64):  # bounded: give other sockets their turn
            try:
                data, addr = sock.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # ICMP port unreachable from the BMC, etc.
                LOG.debug("%s: receive error: %s", self.spec.node, exc)
                return
            try:
                if client is None:
                    self._from_client(data, addr[:2])
                else:
                    self._from_bmc(client, data)
            except Exception:  # one bad packet must never stop the relay
                LOG.exception("%s: could not handle a packet; relaying it as is", self.spec.node)
                if client is None and addr[:2] in self._clients:
                    self.to_bmc(self._clients[addr[:2]], data)
                elif client is not None:
                    self.to_client(client, data)

    def _client(self, addr: tuple[str, int]) -> Client:
        client = self._clients.get(addr)
        if client is None:
            assert self._upstream is not None
            family, target = self._upstream
            sock = socket.socket(family, socket.SOCK_DGRAM)
            sock.setblocking(False)
            sock.connect(target)
            client = Client(addr, sock, self.loop.time())
            self._clients[addr] = client
            self.loop.add_reader(sock, self._read, sock, client)
        client.last_seen = self.loop.time()
        return client

    def _forget(self, client: Client) -> None:
        self._clients.pop(client.addr, None)
        self.loop.remove_reader(client.sock)
        client.sock.close()

    def _sweep(self) -> None:
        now = self.loop.time()
        for client in list(self._clients.values()):
            if now - client.last_seen > CLIENT_IDLE:
                self._forget(client)
        self.later(30.0, self._sweep)

    def to_bmc(self, client: Client, data: bytes) -> None:
        self.counters["relayed_up"] += 1
        try:
            client.sock.send(data)
        except OSError as exc:
            LOG.debug("%s: send to BMC failed: %s", self.spec.node, exc)

    def to_client(self, client: Client, data: bytes) -> None:
        self.counters["relayed_down"] += 1
        if self._sock is not None:
            try:
                self._sock.sendto(data, client.addr)
            except OSError as exc:
                LOG.debug("%s: send to client failed: %s", self.spec.node, exc)

    # -- client -> BMC -------------------------------------------------------------

    def _from_client(self, data: bytes, addr: tuple[str, int]) -> None:
        client = self._client(addr)
        if self.rebooting():
            self.counters["dropped"] += 1
            return
        packet = rmcp.parse(data)
        if packet is None:
            self.to_bmc(client, data)
            return
        if packet.version == 20 and packet.payload_type in (0x10, 0x12, 0x14):
            self._login(client, packet, None)
            return
        if packet.sessionless:
            message = Message.parse(packet.payload)
            if (message.netfn, message.cmd) in _SESSIONLESS_LOGIN:
                self._login(client, packet, message)
                return
            operation = ipmi_operation(message.netfn, message.cmd)
            if operation is None:
                self.to_bmc(client, data)
                return
            self._request(client, packet, operation, message, None)
            return
        session = client.by_bmc.get(packet.session_id) if packet.version == 20 else None
        if session is not None and session.epoch < self._epoch:
            # The BMC "rebooted" since this session opened: it is gone for good.
            client.by_bmc.pop(session.bmc_sid, None)
            client.by_console.pop(session.console_sid, None)
            self._dead.add((client.addr, session.bmc_sid))
        if (client.addr, packet.session_id) in self._dead:
            self.counters["dropped"] += 1
            return
        if session is None or session.keys is None or packet.payload_type != PayloadType.IPMI:
            if packet.payload_type != PayloadType.IPMI:
                self.to_bmc(client, data)  # SOL: relayed as is
                return
            self._request(client, packet, OPAQUE, None, None)
            return
        message = Message.parse(session.keys.unwrap(packet))
        if (message.netfn, message.cmd) in _SESSION_HOUSEKEEPING:
            self.to_bmc(client, data)
            return
        operation = ipmi_operation(message.netfn, message.cmd)
        if operation is None:
            self.to_bmc(client, data)
            return
        self._request(client, packet, operation, message, session)

    def _request(
        self,
        client: Client,
        packet: Packet,
        operation: str,
        message: Message | None,
        session: Session | None,
    ) -> None:
        now = self.loop.time()
        if session is not None and message is not None:
            key = (message.netfn, message.cmd, message.rq_seq)
            verdict = session.recent.get(key)
            if verdict is None or verdict.expiry < now or verdict.data != message.data:
                verdict = self._decide(operation, can_forge=True)
                verdict.data = message.data
                session.recent[key] = verdict
            else:
                self.counters["retransmits"] += 1
        else:
            verdict = client.recent.get(packet.raw)
            if verdict is None or verdict.expiry < now:
                verdict = self._decide(operation, can_forge=message is not None)
                client.recent[packet.raw] = verdict
                if len(client.recent) > 256:
                    client.recent = {k: v for k, v in client.recent.items() if v.expiry >= now}
            else:
                self.counters["retransmits"] += 1
        verdict.expiry = now + RETRANSMIT_WINDOW
        if not carry_out(verdict.action, _Relaying(self, client, packet, message, session)):
            self.counters["dropped"] += 1

    def _decide(self, operation: str, *, can_forge: bool) -> Verdict:
        action = decide(
            self.evaluate(operation),
            forge=can_forge,
            machine=False,
            acknowledge=ACKNOWLEDGED["ipmi"],
            why_not_forge="the proxy cannot read this session (no or wrong credentials)",
        )
        for firing in action.carried:
            self.carried(firing)
        for firing, why in action.skipped:
            self.skipped(firing, why)
        if action.reboot is not None:
            self.reboot(action.reboot)
        return Verdict(action)

    # -- BMC -> client -----------------------------------------------------------------

    def _from_bmc(self, client: Client, data: bytes) -> None:
        if self.rebooting():
            self.counters["dropped"] += 1
            return
        packet = rmcp.parse(data)
        login = client.login
        if packet is None or packet.version != 20:
            client.recent.clear()  # sessionless answers: a new request may reuse the bytes
            self.to_client(client, data)
            return
        if packet.payload_type in (0x11, 0x13, 0x15):
            if login is not None and not login.done:
                data = self._login_reply(client, login, packet)
            self.to_client(client, data)
            return
        if packet.sessionless:
            client.recent.clear()
            self.to_client(client, data)
            return
        session = client.by_console.get(packet.session_id)
        if session is None:
            self.to_client(client, data)
            return
        self.to_client(client, session.outbound(packet))


@dataclasses.dataclass(frozen=True)
class _Relaying:
    """The :class:`~bmaas.hwlab.ipmi_action.Wire` of one request through the
    proxy: answers forged in the BMC's name, the rest relayed to it."""

    proxy: IPMIProxy
    client: Client
    packet: Packet
    #: None: an opaque session (nothing is forged there, see ``_decide``)
    message: Message | None
    session: Session | None

    def later(self, seconds: float, send: Callable[[], None]) -> None:
        if seconds:
            self.proxy.later(seconds, send)
        else:
            send()

    def answer(self, code: int) -> None:
        message = self.message
        assert message is not None  # decide(forge=False) answers nothing
        if self.session is not None:
            reply = self.session.forge(message, code)
        else:
            reply = rmcp.build_sessionless(self.packet, rmcp.response_message(message, code))
        self.proxy.counters["answered"] += 1
        self.proxy.to_client(self.client, reply)

    def malformed(self, copies: int) -> None:
        if self.session is not None and self.message is not None:
            self.session.corrupt.add((self.message.cmd, self.message.rq_seq))
        self._relay(copies)

    def serve(self, copies: int) -> Served:
        # The proxy holds the request, not yet the answer: its size stands in.
        if self.session is not None and self.message is not None:
            size = len(self.message.data)
        else:
            size = len(self.packet.raw)
        return Served(size, partial(self._relay, copies))

    def _relay(self, copies: int) -> None:
        for _ in range(1 + copies):
            self.proxy.to_bmc(self.client, self.packet.raw)
