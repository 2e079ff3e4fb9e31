"""pyghmi sessions and commands whose every wait ends at the caller's deadline.

pyghmi's synchronous API waits inside the library with timeouts that are
module globals (about 5 s for a dead BMC, 28 s for a frozen session, forever
for some login failures). Here the caller's thread drives the session itself:
pyghmi's IO thread still reads the sockets, but each session's packets wake
only its own caller (:class:`_WakeQueue`), the caller runs the session's
retransmit timer, and when the deadline passes it abandons the session. No
thread waits inside pyghmi, so nothing is left behind.

pyghmi 1.6.19 behaviours this module works around (measured on this machine):

==============================================  ==================================================
behaviour                                       handling
==============================================  ==================================================
``Session.__new__`` shares one session per      every login builds its own session; sockets
(BMC, user, password) and, with ``str``         already talking to that BMC are kept out of its
credentials, hands a second caller a session    way, as pyghmi's own ``forbidsock`` does
that never finishes logging in: it hangs
``_req_priv_level`` waits synchronously,        sent with a callback instead, so the wait is ours
up to 40 s, in whatever thread processed RAKP4
a frozen session is declared dead after ~28 s,  abandoned at the deadline; a session that ever
a dead BMC after ~5.4 s (``IpmiException        missed an answer is never reused
('None')``)
a wrong user name against a pyghmi-based BMC    the deadline ends it (reported as unreachable:
relogs forever (each relog resets the           silence cannot be told from a dead BMC)
retry counter)
a cipher suite 3 answer to a suite 17           the algorithms the BMC picked are honoured
proposal (pyghmi's own BMC) fails in RAKP2
with ``struct.error``
unconnected UDP sockets never see ICMP          a presence ping on a connected socket during
port-unreachable                                login reports a closed port at once
keepalives (Get Device ID every ~25 s) go       not registered: no hidden traffic; the driver
out from any thread that drives the loop        does not reuse a session idle for long
the IO thread reads the routing table without   finished sessions are replaced by a sink, never
a lock (check, then index): a deletion that     deleted from it
races a packet kills that thread for good
select() on pyghmi's sockets: no fd >= 1024     pyghmi shares one socket among 64 BMCs; keep the
                                                process below 1024 descriptors
the IO thread select()s on the sockets it knew   a login that added a socket wakes the IO thread
when it last woke: a new socket stays deaf
==============================================  ==================================================
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import logging
import secrets
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

from pyghmi import exceptions as pyghmi_exc
from pyghmi.ipmi import command as _command
from pyghmi.ipmi.private import constants
from pyghmi.ipmi.private import session as _ps
from pyghmi.ipmi.private import util as _util

from bmaas.clock import ClockFn
from drivers.ipmi.classify import NoAnswer

__all__ = ["BoundedCommand", "BoundedSession", "open_command"]

LOG = logging.getLogger(__name__)

#: longest wait between checks when nothing else bounds it (a safety net)
_SLICE = 0.2
#: during login, how often the presence ping's socket is checked for ICMP errors
_LOGIN_SLICE = 0.02
#: RMCP presence ping (DSP0136 3.2.4.1): ASF class, IANA 4542, message 0x80
_PRESENCE_PING = b"\x06\x00\xff\x06\x00\x00\x11\xbe\x80\x00\x00\x00"
_CONSTRUCTION = threading.Lock()
#: names for messages: "no answer to Get Chassis Status"
COMMAND_NAMES = {
    (0x00, 0x01): "Get Chassis Status",
    (0x00, 0x02): "Chassis Control",
    (0x00, 0x08): "Set System Boot Options",
    (0x00, 0x09): "Get System Boot Options",
    (0x06, 0x01): "Get Device ID",
    (0x06, 0x3B): "Set Session Privilege Level",
    (0x0A, 0x10): "Get FRU Inventory Area Info",
    (0x0A, 0x11): "Read FRU Data",
}


class _WakeQueue(collections.deque):  # type: ignore[type-arg]
    """A session's packet queue that wakes the session's caller on arrival."""

    def __init__(self, wake: threading.Event) -> None:
        super().__init__()
        self._wake = wake

    def append(self, item: Any) -> None:
        super().append(item)
        self._wake.set()


class _Discard(collections.deque):  # type: ignore[type-arg]
    def append(self, item: Any) -> None:
        return


class _Retired:
    """Stands in for a finished session in pyghmi's routing table: late
    packets land here and vanish (see ``BoundedSession._unroute``)."""

    broken = True
    logged = 0
    logging = False

    def __init__(self) -> None:
        self.pktqueue = _Discard()

    def process_pktqueue(self) -> None:
        return

    def logout(self, *args: Any) -> dict[str, bool]:
        return {"success": True}


_RETIRED = _Retired()


def _peer_addrs(bmc: str, port: int) -> list[Any]:
    """The socket addresses pyghmi will use for this BMC (IPv4 mapped into
    IPv6 when pyghmi's sockets are dual-stack)."""
    addrs = []
    for family, *_, sockaddr in socket.getaddrinfo(bmc, port, 0, socket.SOCK_DGRAM):
        if _ps.ipv6support and family == socket.AF_INET:
            sockaddr = ("::ffff:" + sockaddr[0], sockaddr[1], 0, 0)
        addrs.append(sockaddr)
    return addrs


def _wake_io_thread() -> None:
    """pyghmi's IO thread select()s on the socket list it had when it last
    woke: a socket added since (a second session to one BMC needs its own)
    is deaf until the thread wakes. pyghmi's own waits poke it; ours do not
    go through pyghmi, so poke it the same way."""
    socks = _ps.iosockets
    if socks and _ps.myself:
        with contextlib.suppress(OSError):
            socks[0].sendto(b"\x01", (_ps.myself, socks[0].getsockname()[1]))


def drain_shared_queue() -> None:
    """Empty pyghmi's process-wide queue of sessions with packets.

    pyghmi's IO thread appends a session per packet; normally
    ``Session.wait_for_rsp`` drains it. Our sessions process their own
    packets, so draining here only keeps the queue from growing and serves
    any other pyghmi user in the process.
    """
    queue = _ps.sessionqueue
    while True:
        try:
            session = queue.popleft()
        except IndexError:
            return
        if isinstance(session, BoundedSession):
            continue  # its own caller processes it
        try:
            session.process_pktqueue()
        except Exception:  # someone else's session: not ours to report
            LOG.debug("a foreign pyghmi session failed on a packet", exc_info=True)


class BoundedSession(_ps.Session):
    """A pyghmi client session driven by its caller, with a deadline."""

    def __new__(cls, *args: Any, **kwargs: Any) -> BoundedSession:
        return object.__new__(cls)  # never pyghmi's shared session

    def __init__(
        self,
        bmc: str,
        userid: bytes,
        password: bytes,
        *,
        port: int,
        privlevel: int,
        cipher_suite: int | None,
        onlogon: Callable[[dict[str, Any]], None],
    ) -> None:
        self.wakeup = threading.Event()
        self.guard = threading.RLock()
        self.failure: BaseException | None = None
        self.abandoned = False
        self.cipher_suite = cipher_suite
        self.forbidsock = self._sockets_in_use(bmc, port)
        super().__init__(
            bmc, userid, password, port=port, onlogon=onlogon, privlevel=privlevel, keepalive=False
        )

    def __repr__(self) -> str:
        return f"<BoundedSession {self.bmc}:{self.port} logged={self.logged} broken={self.broken}>"

    @staticmethod
    def _sockets_in_use(bmc: str, port: int) -> list[Any]:
        """Sockets of live sessions with this BMC: pyghmi routes replies by
        (BMC address, local port), so two sessions must not share one."""
        busy = []
        for addr in _peer_addrs(bmc, port):
            for other in list(_ps.Session.bmc_handlers.get(addr, {}).values()):
                if not other.broken and (other.logged or other.logging):
                    busy.append(other.socket)
        return busy

    # -- login: pyghmi's steps, made asynchronous and bounded ------------------

    def login(self) -> None:
        self.pktqueue = _WakeQueue(self.wakeup)
        super().login()

    def _initsession(self) -> None:
        super()._initsession()
        # pyghmi starts every session at the same id, so a stale reply to an
        # abandoned login could pass for this one's.
        self.localsid = secrets.randbits(30) + 1
        if self.cipher_suite == 3:
            self.attemptedhash = 1  # propose HMAC-SHA1 (suite 3) from the start

    def _got_rmcp_response(self, data: Any) -> Any:
        if self.sessioncontext == "OPENSESSION" and len(data) > 1 and data[0] == self.rmcptag:
            if data[1] != 0 and self.cipher_suite == 17:
                raise pyghmi_exc.IpmiException(
                    constants.rmcp_codes.get(data[1], "Unrecognized RMCP code")
                )
            if data[1] == 0 and len(data) >= 36 and data[16] == 1 and self.attemptedhash != 1:
                if self.cipher_suite == 17:
                    raise pyghmi_exc.IpmiException(constants.rmcp_codes[0x11])
                # The BMC chose HMAC-SHA1 (suite 3) over our suite 17 proposal,
                # as pyghmi's own BMC does: follow it instead of failing in RAKP2.
                self.attemptedhash = 1
                self.currhashlib = hashlib.sha1
                self.currhashlen = 12
        return super()._got_rmcp_response(data)

    def _req_priv_level(self) -> None:
        self.logged = 1
        self.logoutexpiry = None
        self.maxtimeout = 4
        self.logontries = 0  # no re-login inside a call: bmaas.retry decides
        self.raw_command(
            netfn=6, command=0x3B, data=[self.privlevel], callback=self._got_priv_level
        )

    def _got_priv_level(self, response: dict[str, Any]) -> None:
        self.command_done()
        error = _util.get_ipmi_error(response, suffix=" while requesting the privilege level")
        self.logging = False
        if error:
            self.logged = 0
            self.onlogon({"error": error, "code": response.get("code", 0)})
        else:
            self.onlogon({"success": True})

    def command_done(self) -> None:
        """What pyghmi leaves to a caller that passed a callback."""
        self.incommand = False
        while self.evq:
            self.evq.popleft().set()

    # -- packets and timers, whichever thread runs them -----------------------

    def process_pktqueue(self) -> None:
        with self.guard:
            if self.abandoned:
                self.pktqueue.clear()
                return
            try:
                super().process_pktqueue()
            except Exception as exc:  # e.g. struct.error on a malformed reply
                self.failure = exc
                self.wakeup.set()

    def _timedout(self) -> None:
        with self.guard:
            if self.abandoned:
                return
            try:
                super()._timedout()
            except Exception as exc:
                self.failure = exc
                self.wakeup.set()

    def _run_timer(self) -> float:
        """Fire this session's retransmit timer if due; seconds until it is."""
        with _util.protect(_ps.WAITING_SESSIONS):
            parms = _ps.Session.waiting_sessions.get(self)
            if parms is None:
                return _SLICE
            left = parms["timeout"] - _util._monotonic_time()
            if left > 0:
                return left
            _ps.Session.waiting_sessions.pop(self, None)
        self._timedout()
        return 0.0

    def wait(
        self,
        done: Callable[[], bool],
        deadline_at: float,
        clock: ClockFn,
        *,
        watch: Callable[[], None] | None = None,
        step: str,
    ) -> None:
        """Drive this session until ``done()`` or the deadline (``NoAnswer``)."""
        slice_ = _LOGIN_SLICE if watch is not None else _SLICE
        while True:
            self.wakeup.clear()
            self.process_pktqueue()
            drain_shared_queue()
            if self.failure is not None:
                raise self.failure
            if done():
                return
            if watch is not None:
                watch()
            left = deadline_at - clock()
            if left <= 0:
                raise NoAnswer(f"no answer to {step}")
            self.wakeup.wait(min(left, self._run_timer(), slice_))

    # -- ending ----------------------------------------------------------------

    def abandon(self) -> None:
        """Stop every activity of this session now. Sends Close Session if it
        was logged in (best effort, never waited for)."""
        with self.guard:
            if self.abandoned:
                return
            self.abandoned = True
            self.incommand = False
            self.lastpayload = None
            self.onlogpayload = None
            self.pendingpayloads.clear()
            with _util.protect(_ps.WAITING_SESSIONS):
                _ps.Session.waiting_sessions.pop(self, None)
            self.logout()

    def logout(self, sessionok: bool = True) -> dict[str, bool]:
        if self.logged and not self.broken:
            self.incommand = False
            sid = struct.unpack("4B", struct.pack("I", self.sessionid))
            self.raw_command(netfn=6, command=0x3C, data=sid, retry=False)
        self.lastpayload = None
        self.logged = 0
        self.logging = False
        self.onlogpayload = None
        if not self.broken:
            self.broken = True
            self._unroute()
        return {"success": True}

    def _unroute(self) -> None:
        # Replace, never delete: pyghmi's IO thread checks "port in handlers"
        # and then indexes it, without a lock.
        self.socketpool[self.socket] = max(0, self.socketpool.get(self.socket, 1) - 1)
        port = self.socket.getsockname()[1]
        for addr in getattr(self, "allsockaddrs", ()):
            handlers = _ps.Session.bmc_handlers.get(addr)
            if handlers is not None and handlers.get(port) is self:
                handlers[port] = _RETIRED

    def usable(self) -> bool:
        return self.logged and not self.broken and not self.abandoned and self.failure is None


class _RefusalWatch:
    """A presence ping on a connected UDP socket: the only way to learn, during
    login, that the BMC's port answered with ICMP port-unreachable."""

    def __init__(self, bmc: str, port: int) -> None:
        family, kind, proto, _, addr = socket.getaddrinfo(bmc, port, 0, socket.SOCK_DGRAM)[0]
        self.sock = socket.socket(family, kind, proto)
        try:
            self.sock.setblocking(False)
            self.sock.connect(addr)
            self.sock.send(_PRESENCE_PING)
        except OSError:
            self.sock.close()
            raise

    def __call__(self) -> None:
        try:
            self.sock.recv(64)  # a pong, or ConnectionRefusedError
        except BlockingIOError:
            return

    def close(self) -> None:
        self.sock.close()


class BoundedCommand(_command.Command):
    """A pyghmi ``Command`` over a :class:`BoundedSession`: ``raw_command``
    and ``xraw_command`` end at ``deadline_at`` on ``clock``."""

    def __init__(self, session: BoundedSession, clock: ClockFn) -> None:
        # Command.__init__ would log in synchronously; this one is already in.
        self.bmc = session.bmc
        self.onlogon = None
        self._sdrcachedir = None
        self._sdr = None
        self._oem = None
        self._oemknown = False
        self._netchannel = None
        self._ipv6support = None
        self.certverify = None
        self.kwargs: dict[str, Any] = {}
        self.ipmi_session = session
        self.clock = clock
        self.deadline_at = 0.0
        self.last_used = clock()

    def raw_command(
        self,
        netfn: int,
        command: int,
        bridge_request: Any = (),
        data: Any = (),
        delay_xmit: Any = None,
        retry: bool = True,
        timeout: Any = None,
        rslun: int = 0,
    ) -> dict[str, Any]:
        """One request, answered or ``NoAnswer`` by ``deadline_at``. ``retry``
        lets pyghmi resend an unanswered datagram (same sequence number) on
        its timer; pass ``False`` for requests that must not be sent twice."""
        session = self.ipmi_session
        box: list[dict[str, Any]] = []

        def answered(response: dict[str, Any]) -> None:
            session.command_done()
            error = _util.get_ipmi_error(response)
            if error:
                response["error"] = error
            box.append(response)
            session.wakeup.set()

        session.raw_command(
            netfn=netfn, command=command, data=data, retry=retry, callback=answered, rslun=rslun
        )
        step = COMMAND_NAMES.get((netfn, command), f"netfn {netfn:#04x} command {command:#04x}")
        session.wait(lambda: bool(box), self.deadline_at, self.clock, step=step)
        self.last_used = self.clock()
        return box[0]

    def xraw_command(self, netfn: int, command: int, **kw: Any) -> dict[str, Any]:
        """``raw_command`` that raises ``IpmiException(text, code)`` on a
        non-zero completion code and returns the data as ``bytes``."""
        response = self.raw_command(netfn, command, **kw)
        if "error" in response:
            raise pyghmi_exc.IpmiException(response["error"], response.get("code", 0))
        response["data"] = bytes(response["data"])
        return response

    def close(self) -> None:
        self.ipmi_session.abandon()


def open_command(
    bmc: str,
    port: int,
    username: bytes,
    password: bytes,
    *,
    privlevel: int,
    cipher_suite: int | None,
    deadline_at: float,
    clock: ClockFn,
) -> BoundedCommand:
    """Log in (RMCP+) by ``deadline_at`` and return a command object on the
    new session. Raises ``NoAnswer``, ``ConnectionRefusedError`` (ICMP),
    ``IpmiException`` (refused) or whatever a malformed reply raised."""
    outcome: list[dict[str, Any]] = []
    watch = _RefusalWatch(bmc, port)
    session = None
    try:
        with _CONSTRUCTION:  # two logins to one BMC must not pick one socket
            sockets = len(_ps.iosockets)
            session = BoundedSession(
                bmc,
                username,
                password,
                port=port,
                privlevel=privlevel,
                cipher_suite=cipher_suite,
                onlogon=outcome.append,
            )
            if len(_ps.iosockets) != sockets:
                _wake_io_thread()
        session.wait(lambda: bool(outcome), deadline_at, clock, watch=watch, step="the login")
        if "error" in outcome[0]:
            raise pyghmi_exc.IpmiException(str(outcome[0]["error"]), outcome[0].get("code", 0))
    except BaseException:
        if session is not None:
            session.abandon()
        raise
    finally:
        watch.close()
    return BoundedCommand(session, clock)
