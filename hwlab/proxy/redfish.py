"""A fault-injecting HTTP(S) proxy in front of a Redfish service.

TLS is terminated with the proxy's own certificate (clients verify against
it), and the upstream is reached over HTTP or HTTPS with its certificate
verified as configured. Each request maps to one operation by method and
path (:data:`bmaas.hwlab.operations.REDFISH_ROUTES`; requests not listed are relayed
untouched) and the
node's fault plan is evaluated once per request and carried out as
:func:`bmaas.fakes.effects.decide` says, answering from :mod:`bmaas.hwlab.answers` (the
table the Redfish emulator answers from too; ``drop``, ``overload`` and
``bmc_reboot`` reset the connection (RST) there, for both). Proxy specifics:
``delay`` relays the request late; ``duplicate`` relays
it 1 + ``copies`` times (last answer wins); ``bmc_reboot`` stops listening for
``duration`` s (connection refused) and, like ``auth_fail`` with
``scope=session``, rejects session tokens issued before (401). The firmware
update effects answer ``SimpleUpdate`` with a task the proxy serves itself
(:mod:`bmaas.hwlab.proxy.updates`).

Answers made by the proxy never touch the upstream.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bmaas.driver import Operation
from bmaas.fakes.effects import decide
from bmaas.fakes.faults import FaultPlan, Firing
from bmaas.hwlab import answers, ports, tls
from bmaas.hwlab.http import HttpError, Request, Response, read_request, read_response
from bmaas.hwlab.http import redfish_error as error
from bmaas.hwlab.operations import redfish_operation
from bmaas.hwlab.proxy import updates
from bmaas.hwlab.proxy.base import Proxy
from bmaas.hwlab.proxy.effects import ACKNOWLEDGED
from bmaas.hwlab.proxy.spec import ProxySpec

__all__ = ["RedfishProxy", "operation_for"]

LOG = logging.getLogger(__name__)

#: seconds the proxy waits for the upstream's answer before giving up on it
UPSTREAM_TIMEOUT = 60.0


def operation_for(method: str, path: str) -> str | None:
    """The operation a relayed request is; None: relay it untouched."""
    operation = redfish_operation(method, path)
    return None if operation is None else str(operation)


@dataclass(eq=False)
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


class RedfishProxy(Proxy):
    protocol = "redfish"

    def __init__(
        self,
        spec: ProxySpec,
        plan: FaultPlan,
        *,
        events: Callable[[Firing], None] | None = None,
        tls_dir: str | Path | None = None,
    ) -> None:
        super().__init__(spec, plan, events=events)
        self.tls_dir = tls_dir
        self.cert_path: Path | None = None
        self._server: asyncio.Server | None = None
        #: the port, bound and not listening, through a BMC reboot's window
        self._held: socket.socket | None = None
        self._server_ssl: ssl.SSLContext | None = None
        self._upstream_ssl: ssl.SSLContext | None = None
        self._conns: set[_Conn] = set()
        self._issued: set[str] = set()
        self._revoked: set[str] = set()
        self._updates = updates.Updates(lambda: self.loop.time())

    @property
    def url(self) -> str:
        scheme = "https" if self.spec.serves_tls else "http"
        return f"{scheme}://{self.spec.listen_host}:{self.port}"

    async def start(self) -> int:
        self._loop = asyncio.get_running_loop()
        spec = self.spec
        if spec.serves_tls:
            if self.tls_dir is None:
                raise ValueError("a TLS-serving Redfish proxy needs a tls_dir for its certificate")
            cert = tls.ensure_certificate(self.tls_dir, spec.listen_host)
            self.cert_path = cert.ca_path  # what clients verify against
            self._server_ssl = tls.server_context(cert)
        if spec.upstream_tls:
            self._upstream_ssl = tls.upstream_context(spec.verify_ca)
        await self._listen(spec.listen_port)
        return self.port

    async def _listen(self, port: int) -> None:
        held, self._held = self._held, None  # the port kept through a BMC reboot
        sock = ports.listen_again(held, self.spec.listen_host, port)
        try:
            self._server = await asyncio.start_server(self._serve, sock=sock, ssl=self._server_ssl)
        except BaseException:
            sock.close()
            raise
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        await super().stop()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        if self._held is not None:
            self._held.close()
            self._held = None
        for conn in list(self._conns):
            self._reset(conn)
            for task in conn.tasks:
                task.cancel()

    # -- BMC reboot --------------------------------------------------------------------

    def reboot(self, duration: float) -> None:
        super().reboot(duration)
        self._revoke()
        if self._server is not None:
            self._server.close()  # new connections are refused, as by a BMC that is down
            self._server = None
            # and the port stays ours, bound but not listening, through the window
            self._held = ports.hold(self.spec.listen_host, self.port)
        for conn in list(self._conns):
            self._reset(conn)
        self.later(duration, self._relisten)

    def _revoke(self) -> None:
        """Every session token issued so far dies (401 from now on)."""
        self._revoked |= self._issued
        self._issued.clear()

    def _relisten(self) -> None:
        async def bind() -> None:
            try:
                await self._listen(self.port)
            except OSError as exc:
                LOG.warning("%s: cannot listen again on %d: %s", self.spec.node, self.port, exc)
                self.later(0.5, self._relisten)

        self.loop.create_task(bind())

    # -- connections -------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(reader, writer)
        self._conns.add(conn)
        task = asyncio.current_task()
        if task is not None:
            conn.tasks.add(task)
        try:
            while not writer.is_closing():
                try:
                    request = await read_request(reader)
                except HttpError as exc:
                    LOG.debug("%s: bad request: %s", self.spec.node, exc)
                    answer = error(exc.status, "Base.1.8.MalformedJSON", str(exc))
                    writer.write(answer.encode(keep_alive=False))
                    break
                if request is None or not await self._handle(conn, request):
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass  # the client went away
        finally:
            self._conns.discard(conn)
            self._close_upstream(conn)
            if not writer.is_closing():
                writer.close()

    def _reset(self, conn: _Conn) -> None:
        """Abort the client connection with a TCP reset, as a crashing BMC would."""
        answers.reset(conn.writer)
        self._close_upstream(conn)

    def _close_upstream(self, conn: _Conn) -> None:
        if conn.upstream is not None:
            conn.upstream[1].transport.abort()
            conn.upstream = None

    # -- one request ---------------------------------------------------------------------

    async def _handle(self, conn: _Conn, request: Request) -> bool:
        """Answer one request; False when the connection must end."""
        keep = request.keep_alive
        own = self._own_answer(request)
        if own is not None:
            conn.writer.write(own.encode(keep_alive=keep))
            return keep
        operation = operation_for(request.method, request.path)
        action = decide(
            self.evaluate(operation) if operation else [],
            machine=False,
            acknowledge=ACKNOWLEDGED["redfish"],
        )
        for firing in action.carried:
            self.carried(firing)
        for firing, why in action.skipped:
            self.skipped(firing, why)
        if action.hangs:
            self.counters["hung"] += 1  # held until the client gives up

        def drop() -> None:  # carry_out reset the client's connection
            self.counters["resets"] += 1
            self._close_upstream(conn)
            if action.reboot is not None:
                self.reboot(action.reboot)

        def forge(firing: Firing) -> Response | None:
            if answers.expires_sessions(firing):
                self._revoke()  # every token dies, a fresh login works
            forged = self._forged(firing, request)
            if forged is not None:
                self.counters["answered"] += 1
            return forged

        async def serve(copies: int) -> tuple[Response, bool]:
            for _ in range(copies):
                await self._forward(conn, request)
            response = self._relocate(await self._forward(conn, request))
            if operation == Operation.LOGIN and response.status in (200, 201):
                issued = response.header("X-Auth-Token")
                if issued:
                    self._issued.add(issued)
            return response, True

        sent: list[Response | None] = []
        keep = await answers.carry_out(
            action,
            request,
            conn.reader,
            conn.writer,
            forge=forge,
            serve=serve,
            drop=drop,
            answered=sent.append,
        )
        down = updates.reboot_after(action.answer, sent[0] if sent else None)
        if down is None:
            return keep
        # the update lands and the BMC reboots into it; this connection ends
        # cleanly, after its answer (a reset could discard it unread)
        self._conns.discard(conn)
        self.reboot(down)
        return False

    def _forged(self, firing: Firing, request: Request) -> Response | None:
        """The answer ``firing`` gives in the BMC's place (None: relay)."""
        if firing.effect in updates.EFFECTS:
            return self._updates.take(firing, request)
        return answers.redfish_forged(firing, request)

    def _own_answer(self, request: Request) -> Response | None:
        """What the proxy answers whatever the rules say: a session that died
        in a reboot (401), a task of an update it answered for."""
        token = request.header("X-Auth-Token")
        if token and token in self._revoked:
            return error(401, "Base.1.8.NoValidSession", "session lost when the BMC rebooted")
        return self._updates.answer(request)

    def _relocate(self, response: Response) -> Response:
        """Point an absolute ``Location`` at the upstream back at the proxy,
        so a client following it (a new session, a task) stays behind it."""
        location = response.header("Location")
        scheme = "https" if self.spec.upstream_tls else "http"
        prefix = f"{scheme}://{self.spec.upstream_host}:{self.spec.upstream_port}"
        if not location or not location.startswith(prefix):
            return response
        headers = [
            (k, self.url + v[len(prefix) :] if k.lower() == "location" else v)
            for k, v in response.headers
        ]
        return Response(response.status, headers, response.body, response.reason, response.closes)

    async def _forward(self, conn: _Conn, request: Request) -> Response:
        """Relay ``request`` to the upstream; a connection the upstream closed
        while idle is replaced once, before anything was answered on it."""
        spec = self.spec
        data = request.encode(f"{spec.upstream_host}:{spec.upstream_port}")
        for attempt in (1, 2):
            fresh = conn.upstream is None
            try:
                if conn.upstream is None:
                    conn.upstream = await asyncio.wait_for(
                        asyncio.open_connection(
                            spec.upstream_host,
                            spec.upstream_port,
                            ssl=self._upstream_ssl,
                            server_hostname=spec.upstream_host if self._upstream_ssl else None,
                        ),
                        UPSTREAM_TIMEOUT,
                    )
                reader, writer = conn.upstream
                writer.write(data)
                await writer.drain()
                response = await asyncio.wait_for(
                    read_response(reader, request.method), UPSTREAM_TIMEOUT
                )
            except (OSError, HttpError, asyncio.IncompleteReadError, TimeoutError) as exc:
                self._close_upstream(conn)
                if not fresh and attempt == 1 and not isinstance(exc, TimeoutError):
                    continue  # a stale keep-alive connection: try a fresh one
                LOG.warning("%s: upstream %s failed: %s", spec.node, spec.upstream, exc)
                return error(
                    502, "Base.1.8.GeneralError", f"hwlab proxy: upstream {spec.upstream}: {exc}"
                )
            self.counters["relayed"] += 1
            if response.closes:
                self._close_upstream(conn)
            return response
        raise AssertionError("unreachable")
