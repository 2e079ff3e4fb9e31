"""Logging in and sending commands within a deadline: pyghmi's ``Command``
over :class:`~bmaas.drivers.ipmi.session.BoundedSession`.

:func:`open_command` logs in (RMCP+) and returns a :class:`BoundedCommand`;
``BoundedCommand.within(deadline)`` is one driver call's view of it, whose
``raw_command``/``xraw_command`` end by that call's :class:`~bmaas.deadline.Deadline`
(pyghmi's retransmits included: the caller's thread runs them, and stops at
the deadline). During
login a presence ping on a connected socket turns an ICMP port-unreachable
into an immediate ``ConnectionRefusedError`` (pyghmi's unconnected sockets
never see one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
from collections.abc import Callable
from typing import Any

from pyghmi import exceptions as pyghmi_exc
from pyghmi.ipmi import command as _command
from pyghmi.ipmi.private import session as _ps
from pyghmi.ipmi.private import util as _util

from bmaas.clock import ClockFn
from bmaas.deadline import Deadline
from bmaas.drivers.ipmi.session import BoundedSession

__all__ = ["COMMAND_NAMES", "BoundedCommand", "CommandCall", "open_command"]

#: RMCP presence ping (DSP0136 3.2.4.1): ASF class, IANA 4542, message 0x80
_PRESENCE_PING = b"\x06\x00\xff\x06\x00\x00\x11\xbe\x80\x00\x00\x00"
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

#: two logins to one BMC must not pick the same socket
_CONSTRUCTION = threading.Lock()


def _wake_io_thread() -> None:
    """pyghmi's IO thread select()s on the socket list it had when it last
    woke: a socket added since (a second session to one BMC needs its own)
    is deaf until the thread wakes. pyghmi's own waits poke it; ours do not
    go through pyghmi, so poke it the same way."""
    socks = _ps.iosockets
    if socks and _ps.myself:
        with contextlib.suppress(OSError):
            socks[0].sendto(b"\x01", (_ps.myself, socks[0].getsockname()[1]))


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
    and ``xraw_command`` end by the ``deadline`` they are given."""

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
        self.last_used = clock()
        #: (netfn, command) of the latest request, for command-specific codes
        self.last_command: tuple[int, int] | None = None

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
        *,
        deadline: Deadline,
    ) -> dict[str, Any]:
        """One request, answered or ``NoAnswer`` by ``deadline``. ``retry``
        lets pyghmi resend an unanswered datagram (same sequence number) on
        its timer; pass ``False`` for requests that must not be sent twice."""
        session = self.ipmi_session
        self.last_command = (netfn, command)
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
        session.wait(lambda: bool(box), deadline, step=step)
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

    def within(
        self, deadline: Deadline, *, pace: Callable[[Deadline], None] | None = None
    ) -> CommandCall:
        """This command as one driver call sees it: every request by
        ``deadline``, each first waiting for its turn at the BMC (``pace``)."""
        return CommandCall(self, deadline, pace)

    def close(self) -> None:
        self.ipmi_session.abandon()


@dataclasses.dataclass(frozen=True)
class CommandCall:
    """One driver call's view of a :class:`BoundedCommand`: each request it
    sends ends by the call's ``deadline``, passed explicitly, never stored
    on the shared command."""

    command: BoundedCommand
    deadline: Deadline
    #: the BMC's gate spacing (bmaas.gate), before every request
    pace: Callable[[Deadline], None] | None = None

    def raw_command(self, netfn: int, command: int, **kw: Any) -> dict[str, Any]:
        if self.pace is not None:
            self.pace(self.deadline)
        return self.command.raw_command(netfn, command, deadline=self.deadline, **kw)

    def xraw_command(self, netfn: int, command: int, **kw: Any) -> dict[str, Any]:
        if self.pace is not None:
            self.pace(self.deadline)
        return self.command.xraw_command(netfn, command, deadline=self.deadline, **kw)


def open_command(
    bmc: str,
    port: int,
    username: bytes,
    password: bytes,
    *,
    privlevel: int,
    cipher_suite: int | str | None,
    deadline: Deadline,
    clock: ClockFn,
) -> BoundedCommand:
    """Log in (RMCP+) by ``deadline`` and return a command object on the
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
        session.wait(lambda: bool(outcome), deadline, watch=watch, step="the login")
        if "error" in outcome[0]:
            raise pyghmi_exc.IpmiException(str(outcome[0]["error"]), outcome[0].get("code", 0))
    except BaseException:
        if session is not None:
            session.abandon()
        raise
    finally:
        watch.close()
    return BoundedCommand(session, clock)
