"""A fault-injecting HTTP(S) proxy in front of a Redfish service.

TLS is terminated with the proxy's own certificate (clients verify against
it), and the upstream is reached over HTTP or HTTPS with its certificate
verified as configured. Each request maps to one operation by method and
path (:data:`hwlab.operations.REDFISH_ROUTES`; requests not listed are relayed
untouched) and the
node's fault plan is evaluated once per request:

=================  ==========================================================
hang               no answer; the connection stays open until the client goes
drop               the connection is reset (RST), nothing relayed
delay              the request is relayed ``seconds`` late
duplicate          the request is relayed 1 + ``copies`` times (last answer wins)
busy               503 + ``Retry-After`` when ``retry_after`` is set
internal_error     500 with ``@Message.ExtendedInfo`` naming ``message_id``
auth_fail          401 with ``WWW-Authenticate``
unsupported        405 for POST/PATCH/DELETE, 501 for reads
malformed_reply    relayed, then the JSON body is cut in half
bmc_reboot         the port stops listening for ``duration`` s (connection
                   refused); session tokens issued before are rejected (401)
=================  ==========================================================

Answers made by the proxy never touch the upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
import ssl
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bmaas.driver import Operation
from fakes.faults import Effect, FaultPlan, Firing
from hwlab.operations import redfish_operation
from hwlab.proxy import tls
from hwlab.proxy.base import Proxy
from hwlab.proxy.http import HTTPError, Request, Response, read_request, read_response
from hwlab.proxy.http import redfish_error as error
from hwlab.proxy.spec import ProxySpec

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
        self._server_ssl: ssl.SSLContext | None = None
        self._upstream_ssl: ssl.SSLContext | None = None
        self._conns: set[_Conn] = set()
        self._issued: set[str] = set()
        self._revoked: set[str] = set()

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
            cert, key = tls.ensure_certificate(self.tls_dir, spec.listen_host)
            self.cert_path = cert
            self._server_ssl = tls.server_context(cert, key)
        if spec.upstream_tls:
            self._upstream_ssl = tls.upstream_context(spec.verify_ca)
        await self._listen(spec.listen_port)
        return self.port

    async def _listen(self, port: int) -> None:
        self._server = await asyncio.start_server(
            self._serve, self.spec.listen_host, port, ssl=self._server_ssl, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        await super().stop()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for conn in list(self._conns):
            self._reset(conn)
            for task in conn.tasks:
                task.cancel()

    # -- BMC reboot --------------------------------------------------------------------

    def reboot(self, duration: float) -> None:
        super().reboot(duration)
        self._revoked |= self._issued
        self._issued.clear()
        if self._server is not None:
            self._server.close()  # new connections are refused, as by a BMC that is down
            self._server = None
        for conn in list(self._conns):
            self._reset(conn)
        self.later(duration, self._relisten)

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
                except (HTTPError, ValueError) as exc:
                    LOG.debug("%s: bad request: %s", self.spec.node, exc)
                    writer.write(
                        error(400, "Base.1.8.MalformedJSON", str(exc)).encode(keep_alive=False)
                    )
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
        sock = conn.writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.writer.transport.abort()
        self._close_upstream(conn)

    def _close_upstream(self, conn: _Conn) -> None:
        if conn.upstream is not None:
            conn.upstream[1].transport.abort()
            conn.upstream = None

    # -- one request ---------------------------------------------------------------------

    async def _handle(self, conn: _Conn, request: Request) -> bool:
        """Answer one request; False when the connection must end."""
        keep = request.keep_alive
        token = request.header("X-Auth-Token")
        if token and token in self._revoked:
            answer = error(401, "Base.1.8.NoValidSession", "session lost when the BMC rebooted")
            conn.writer.write(answer.encode(keep_alive=keep))
            return keep
        operation = operation_for(request.method, request.path)
        firings = self.evaluate(operation) if operation else []
        delay, copies, corrupt = 0.0, 0, False
        answer: Response | None = None
        for firing in firings:
            effect = firing.effect
            self.carried(firing)
            if effect is Effect.HANG:
                self.counters["hung"] += 1
                while await conn.reader.read(65536):
                    pass  # hold the connection until the client gives up
                return False
            if effect in (Effect.DROP, Effect.BMC_REBOOT):
                self.counters["resets"] += 1
                self._reset(conn)
                if effect is Effect.BMC_REBOOT:
                    self.reboot(firing.params["duration"])
                return False
            if effect is Effect.DELAY:
                delay += firing.params["seconds"]
            elif effect is Effect.DUPLICATE:
                copies += firing.params["copies"]
            elif effect is Effect.MALFORMED_REPLY:
                corrupt = True
            else:
                answer = _answer(effect, firing, request)
                break
        if delay:
            await asyncio.sleep(delay)
        if answer is not None:
            self.counters["answered"] += 1
            conn.writer.write(answer.encode(keep_alive=keep))
            await conn.writer.drain()
            return keep
        response = None
        for _ in range(1 + copies):
            response = await self._forward(conn, request)
        assert response is not None
        if corrupt:
            response = _corrupt(response)
        response = self._relocate(response)
        if operation == Operation.LOGIN and response.status in (200, 201):
            issued = response.header("X-Auth-Token")
            if issued:
                self._issued.add(issued)
        conn.writer.write(response.encode(keep_alive=keep))
        await conn.writer.drain()
        return keep

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
            except (OSError, HTTPError, asyncio.IncompleteReadError, TimeoutError) as exc:
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


def _answer(effect: Effect, firing: Firing, request: Request) -> Response:
    """The error a BMC-layer effect answers with, in the BMC's place."""
    params = firing.params
    if effect is Effect.BUSY:
        headers = []
        if params.get("retry_after") is not None:
            headers.append(("Retry-After", str(math.ceil(params["retry_after"]))))
        return error(503, "Base.1.8.ServiceTemporarilyUnavailable", "BMC busy", headers=headers)
    if effect is Effect.INTERNAL_ERROR:
        return error(500, params["message_id"], "The BMC reported an internal error")
    if effect is Effect.AUTH_FAIL:
        return error(
            401,
            "Base.1.8.ResourceAtUriUnauthorized",
            "credentials rejected",
            headers=[("WWW-Authenticate", 'Basic realm="Redfish"')],
        )
    if effect is Effect.UNSUPPORTED:
        if request.method in ("POST", "PATCH", "PUT", "DELETE"):
            return error(405, "Base.1.8.ActionNotSupported", "not supported by this BMC")
        return error(501, "Base.1.8.ActionNotSupported", "not supported by this BMC")
    raise AssertionError(f"no answer for {effect}")


def _corrupt(response: Response) -> Response:
    """The same answer with its JSON cut in half: invalid, as a BMC that
    crashed mid-reply would send."""
    body = response.body
    status = response.status
    if not body:
        body, status = b'{"@odata.id": "/redfish/v1/Systems/', 200 if status == 204 else status
    else:
        body = body[: max(1, len(body) // 2)]
    headers = [(k, v) for k, v in response.headers if k.lower() != "content-type"]
    headers.append(("Content-Type", "application/json"))
    return Response(status, headers, body, response.reason, response.closes)
