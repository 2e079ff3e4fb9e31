"""pyghmi sessions and commands whose every wait ends at the caller's deadline.

pyghmi's synchronous API waits inside the library with timeouts that are
module globals (about 5 s for a dead BMC, 28 s for a frozen session, forever
for some login failures). Here the caller's thread drives the session itself:
pyghmi's IO thread still reads the sockets, but each session's packets wake
only its own caller (:class:`_WakeQueue`), the caller runs the session's
retransmit timer, and when the deadline passes it abandons the session. No
thread waits inside pyghmi, so nothing is left behind.

pyghmi 1.6.19 behaviours worked around here and in :mod:`bmaas.drivers.ipmi.command`
(measured on this machine):

==============================================  ==================================================
behaviour                                       handling
==============================================  ==================================================
``Session.__new__`` shares one session per      every login builds its own session, never
(BMC, user, password) and, with ``str``         offered to other pyghmi users; sockets already
credentials, hands a second caller a session    talking to that BMC are kept out of its way,
that never finishes logging in: it hangs        as pyghmi's own ``forbidsock`` does
``_req_priv_level`` waits synchronously,        sent with a callback instead, so the wait is ours
up to 40 s, in whatever thread processed RAKP4
a frozen BMC is declared dead after ~28 s, a    abandoned at the deadline; a session that ever
dead one after ~5 s (``IpmiException``          missed an answer is never reused, and there is
``('None')``); one that answers logins but not  no re-login inside a call (``logontries = 0``)
a command is re-logged and re-asked forever
a wrong user name against a pyghmi-based BMC    the deadline ends it (reported as unreachable:
relogs forever (each relog resets the           silence cannot be told from a dead BMC)
retry counter)
a cipher suite 3 answer to a suite 17           the algorithms the BMC picked are honoured,
proposal (pyghmi's own BMC) fails in RAKP2      with ``ipmi_cipher_suite: auto`` only (else
with ``struct.error``                           ``SuiteRefused``), and recorded as a downgrade
a refused suite 17 Open Session: pyghmi         ``SuiteRefused`` (a configuration fault that
proposes suite 3 in the same login, on any      names the setting); ``auto`` falls back for
RMCP+ status, without a word                    an algorithm refusal only, recorded
unconnected UDP sockets never see ICMP          a presence ping on a connected socket during
port-unreachable                                login reports a closed port at once
keepalives (Get Device ID every ~25 s) go       not registered: no hidden traffic; the driver
out from any thread that drives the loop        does not reuse a session idle for long
the IO thread reads the routing table without   finished sessions are replaced by a sink, never
a lock (check, then index): a deletion that     deleted from it
races a packet kills that thread for good
select() on pyghmi's sockets: no fd >= 1024     keep the process below 1024 descriptors
pyghmi shares one socket among 64 BMCs, and     one socket serves :data:`BMCS_PER_SOCKET` BMCs:
its IO thread, on every wake, tries a read on   at 10,000 sessions 157 sockets cost 0.17 ms a
every socket it has                             wake (20 sockets: 0.02 ms), paid on every reply
the IO thread select()s on the sockets it knew  a login that added a socket wakes the IO thread
when it last woke: a new socket stays deaf
the IO thread reads a socket as setblocking(0)  the sockets stay non-blocking for good
then recvfrom; every sender first calls         (:class:`_NonBlockingSocket`); a send that finds
setblocking(1): a send in between leaves the    the buffer full waits for room with poll()
thread blocked on a drained socket, every
other socket deaf until that one hears again
==============================================  ==================================================
"""

from __future__ import annotations

import collections
import hashlib
import logging
import secrets
import select
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

from pyghmi import exceptions as pyghmi_exc
from pyghmi.ipmi.private import constants
from pyghmi.ipmi.private import session as _ps
from pyghmi.ipmi.private import util as _util

from bmaas.deadline import Deadline
from bmaas.drivers.ipmi.classify import NoAnswer, SuiteRefused

__all__ = ["AUTO", "BoundedSession", "drain_shared_queue"]

#: ``ipmi_cipher_suite: auto``: propose suite 17, accept suite 3 when the BMC
#: refuses 17 for its algorithms (recorded: :attr:`BoundedSession.downgraded`)
AUTO = "auto"
#: pyghmi's ``attemptedhash`` while it proposes suite 17 (HMAC-SHA256)
_SHA256 = 256
#: RMCP+ statuses that refuse the proposed algorithms (IPMI 2.0 table 13-15):
#: authentication, integrity, confidentiality, no cipher suite match
_ALGORITHM_REFUSALS = frozenset({0x04, 0x05, 0x10, 0x11})

LOG = logging.getLogger(__name__)

#: BMCs whose sessions share one UDP socket (pyghmi's default is 64). Replies
#: are routed by (BMC address, local port), so two sessions with one BMC never
#: share a socket (:meth:`BoundedSession._sockets_in_use`); the IO thread drains
#: every socket on each wake, so fewer sockets make every reply cheaper. A
#: socket's receive buffer (pyghmi asks for 16 MiB; the kernel's rmem_max caps
#: it) only holds what arrives between two wakes, a few requests per worker.
#: Applied to bmaas's own sessions only (:meth:`BoundedSession._assignsocket`):
#: pyghmi's module-wide ``MAX_BMCS_PER_SOCKET`` stays 64 for every other
#: pyghmi user in the process.
BMCS_PER_SOCKET = 512

#: how long a send waits for room in a full socket buffer before pyghmi drops
#: the packet (its retransmit timer sends it again)
_SEND_ROOM_MS = 50

#: longest wait between checks when nothing else bounds it (a safety net)
_SLICE = 0.2
#: during login, how often the presence ping's socket is checked for ICMP errors
_LOGIN_SLICE = 0.02


class _NonBlockingSocket(socket.socket):
    """One of pyghmi's shared UDP sockets, non-blocking for good.

    pyghmi's IO thread drains a socket with ``setblocking(0)`` then
    ``recvfrom``; each sender (pyghmi's ``_io_sendto``) first calls
    ``setblocking(1)``. A send from another thread between those two steps
    leaves the IO thread in a *blocking* ``recvfrom`` on a drained socket:
    it waits there for the next packet that socket receives, and every
    session on the process's other sockets hears nothing until then. That is
    minutes when the last packet on it went to a silent BMC. Measured with
    pyghmi 1.6.19: 216 such sends in 60 s of 5 reading and 3 logging-in
    threads; CI saw three logins in a row on one worker go unanswered.
    Switched in by :func:`_keep_nonblocking`.
    """

    __slots__ = ()

    def setblocking(self, flag: bool) -> None:
        super().setblocking(False)

    def sendto(self, data: Any, *args: Any) -> int:
        try:
            return super().sendto(data, *args)
        except BlockingIOError:  # the buffer is full: wait for room, never block
            poller = select.poll()  # poll(): no descriptor limit, unlike select()
            poller.register(self.fileno(), select.POLLOUT)
            poller.poll(_SEND_ROOM_MS)
            return super().sendto(data, *args)  # still full: pyghmi drops it


def _keep_nonblocking() -> None:
    """Make every socket pyghmi's IO thread reads a :class:`_NonBlockingSocket`
    (the same socket object, its class switched: pyghmi and its routing
    table keep the references they hold). Sockets other pyghmi users in the
    process made are switched too: they share the IO thread. Only sockets of
    exactly the class it derives from are switched (under eventlet's
    monkey-patching that class is eventlet's, if it patched before import)."""
    plain: Any = _NonBlockingSocket.__mro__[1]
    for sock in list(_ps.iosockets):
        if type(sock) is plain and sock.fileno() >= 0:
            sock.__class__ = _NonBlockingSocket
            sock.setblocking(False)


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
_NOT_SHARED = object()  # a Kg "value" no other caller can pass


def _peer_addrs(bmc: str, port: int) -> list[Any]:
    """The socket addresses pyghmi will use for this BMC (IPv4 mapped into
    IPv6 when pyghmi's sockets are dual-stack)."""
    addrs: list[Any] = []
    sockaddr: Any
    for family, *_, sockaddr in socket.getaddrinfo(bmc, port, 0, socket.SOCK_DGRAM):
        if _ps.ipv6support and family == socket.AF_INET:
            sockaddr = ("::ffff:" + sockaddr[0], sockaddr[1], 0, 0)
        addrs.append(sockaddr)
    return addrs


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

    broken: bool
    logged: int

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
        cipher_suite: int | str | None,
        onlogon: Callable[[dict[str, Any]], None],
    ) -> None:
        self.wakeup = threading.Event()
        self.guard = threading.RLock()
        self.failure: BaseException | None = None
        self.abandoned = False
        #: 3, 17 (or None: 17), or "auto" (17, else 3: :attr:`downgraded`)
        self.cipher_suite = cipher_suite
        #: the login fell back from suite 17 to suite 3 ("auto" only)
        self.downgraded = False
        self.forbidsock = self._sockets_in_use(bmc, port)
        super().__init__(
            bmc, userid, password, port=port, onlogon=onlogon, privlevel=privlevel, keepalive=False
        )

    def __repr__(self) -> str:
        return f"<BoundedSession {self.bmc}:{self.port} logged={self.logged} broken={self.broken}>"

    @classmethod
    def _assignsocket(cls, server: Any = None, forbiddensockets: Any = ()) -> Any:
        """pyghmi's socket choice (the least used socket this session may
        share), with :data:`BMCS_PER_SOCKET` in place of pyghmi's
        process-wide ``MAX_BMCS_PER_SOCKET``. A new socket is pyghmi's own
        to make: every pooled socket is then forbidden to it. Every socket
        the IO thread reads, the chosen one included, is then kept
        non-blocking (:class:`_NonBlockingSocket`)."""
        chosen = cls._choose_socket(server, forbiddensockets)
        _keep_nonblocking()
        return chosen

    @classmethod
    def _choose_socket(cls, server: Any, forbiddensockets: Any) -> Any:
        if server is None:
            pool = _ps.Session.socketpool
            for sock, count in sorted(pool.items(), key=lambda item: item[1]):
                if count >= BMCS_PER_SOCKET:
                    break
                if sock in forbiddensockets:
                    continue
                pool[sock] += 1
                return sock
            forbiddensockets = list(pool)
        return super()._assignsocket(server, forbiddensockets=forbiddensockets)

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
        # pyghmi's Session.__new__ hands any caller with the same (BMC, user,
        # password, kg) an existing session: never this one.
        self.kgo = _NOT_SHARED
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
            proposing_17 = self.attemptedhash == _SHA256
            if data[1] != 0 and proposing_17:
                # pyghmi proposes suite 17 and, on ANY refusal, proposes suite
                # 3 in the same login without a word. Only "auto" may, and only
                # for a refusal about the algorithms (never for a busy BMC).
                if self.cipher_suite != AUTO or data[1] not in _ALGORITHM_REFUSALS:
                    if data[1] in _ALGORITHM_REFUSALS:
                        raise SuiteRefused(data[1])
                    raise pyghmi_exc.IpmiException(
                        constants.rmcp_codes.get(data[1], "Unrecognized RMCP code")
                    )
                self.downgraded = True  # pyghmi's fallback: suite 3, recorded
            if data[1] == 0 and len(data) >= 36 and data[16] == 1 and self.attemptedhash != 1:
                # The BMC chose HMAC-SHA1 (suite 3) over our suite 17 proposal,
                # as pyghmi's own BMC does: a downgrade, so only with "auto";
                # then follow it instead of failing in RAKP2.
                if self.cipher_suite != AUTO:
                    raise SuiteRefused(0x11, chose_3=True)
                self.downgraded = True
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
        deadline: Deadline,
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
            left = deadline.left()
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
        return bool(self.logged) and not self.broken and not self.abandoned and self.failure is None
